"""Stage bookkeeping of the OpenAPI probe: which observation times a CRD, and which cannot."""

from __future__ import annotations

import dataclasses

import pytest

from crdscope.connection.crdwatch import CRDRecord
from crdscope.probes.openapi import document_resources
from crdscope.probes.publication import CONTENT_CHECK_AFTER, PublicationTracker, lag_stats


def record(name: str, *, created: float, established: float | None, live: bool = True, uid: str | None = None,
           versions: tuple[str, ...] = ("v1",), group: str = "g.test") -> CRDRecord:
    return CRDRecord(
        name=name, uid=uid or f"uid-{name}", group=group, kind="K", plural=name.split(".")[0], scope="Cluster",
        served_versions=versions, storage_version=versions[0], owner="other", labels=(), run_id=None,
        resource_version="1", created=created, names_accepted=created, terminating=False,
        established=None if established is None else float(int(established)),  # conditions: whole seconds
        seen=created + 0.01, seen_established=established, established_live=live and established is not None)


def test_lag_stats_by_hand():
    stats = lag_stats([4.0, 1.0, 3.0, 2.0])
    # Linear interpolation: rank (n-1)*q: p50 -> 1.5 -> 2.5; p95 -> 2.85 -> 3 + 0.85 = 3.85.
    assert (stats.p50, stats.p95, stats.max, stats.count) == (2.5, pytest.approx(3.85), 4.0, 4)
    assert lag_stats([]).p50 is None


def test_openapi_stage_needs_a_hash_change_after_establishment():
    tracker = PublicationTracker()
    crds = {"a.g.test": record("a.g.test", created=100.0, established=None)}
    tracker.update_crds(crds)
    tracker.observe_index(100.0, 100.1, {"apis/g.test/v1": "H0"})  # the group-version exists already
    crds["a.g.test"] = record("a.g.test", created=100.0, established=100.5)
    tracker.update_crds(crds)
    # A fetch that started before establishment cannot show it, even with a new hash.
    tracker.observe_index(100.4, 100.6, {"apis/g.test/v1": "H1"})
    tracker.place_openapi(crds)
    assert tracker.backlog(crds) == [("a.g.test", 100.5)]
    tracker.observe_index(101.0, 101.2, {"apis/g.test/v1": "H1"})  # unchanged: still not published
    tracker.place_openapi(crds)
    assert len(tracker.backlog(crds)) == 1
    tracker.observe_index(102.0, 102.3, {"apis/g.test/v1": "H2"})
    tracker.place_openapi(crds)
    stages = next(iter(tracker.stages.values()))
    assert stages.openapi_v3 == 102.3 and tracker.backlog(crds) == []
    assert tracker.lag_seconds()["openapi_v3"].max == pytest.approx(2.3)
    history = tracker.index["apis/g.test/v1"]
    assert history.first_seen is None and history.hash_changed == 102.3


def test_published_before_the_watch_reported_it():
    """The watch can report Established after the index already shows the schema: the document settles it."""
    tracker = PublicationTracker()
    crds = {"a.g.test": record("a.g.test", created=100.0, established=None),
            "b.g.test": record("b.g.test", created=100.0, established=None)}
    tracker.update_crds(crds)
    tracker.observe_index(100.0, 100.1, {"apis/g.test/v1": "H0"})
    # The fetch that started at 100.4 already shows a (H1, with a's schema); the watch tells us at 100.5.
    tracker.observe_index(100.4, 100.6, {"apis/g.test/v1": "H1"})
    crds["a.g.test"] = record("a.g.test", created=100.0, established=100.5)
    crds["b.g.test"] = record("b.g.test", created=100.0, established=100.5)
    tracker.update_crds(crds)
    tracker.observe_index(101.0, 101.1, {"apis/g.test/v1": "H1"})
    tracker.place_openapi(crds)
    assert len(tracker.backlog(crds)) == 2
    # Not read before the CRDs waited CONTENT_CHECK_AFTER seconds; then once per (path, hash).
    assert tracker.content_wanted(crds, now=101.1) == []
    assert tracker.content_wanted(crds, now=100.5 + CONTENT_CHECK_AFTER) == [("apis/g.test/v1", "H1")]
    tracker.observe_content("apis/g.test/v1", "H1", frozenset({"a"}))
    assert tracker.content_wanted(crds, now=200.0) == []
    tracker.place_openapi(crds)
    by_name = {s.name: s for s in tracker.stages.values()}
    # Shown by the fetch received at 100.6, after the watch's report at 100.5.
    assert by_name["a.g.test"].openapi_v3 == 100.6
    assert tracker.backlog(crds) == [("b.g.test", 100.5)]  # not in H1's document: still waiting
    tracker.observe_index(110.0, 110.2, {"apis/g.test/v1": "H2"})
    tracker.place_openapi(crds)
    assert by_name["b.g.test"].openapi_v3 == 110.2 and tracker.backlog(crds) == []


def test_shown_before_the_report_is_timed_at_the_report():
    tracker = PublicationTracker()
    crds = {"a.g.test": record("a.g.test", created=100.0, established=None)}
    tracker.update_crds(crds)
    tracker.observe_index(100.0, 100.1, {"apis/g.test/v1": "H0"})
    tracker.observe_index(100.2, 100.3, {"apis/g.test/v1": "H1"})  # received before the watch's report
    crds["a.g.test"] = record("a.g.test", created=100.0, established=100.9)
    tracker.update_crds(crds)
    tracker.observe_content("apis/g.test/v1", "H1", frozenset({"a", "other"}))
    tracker.place_openapi(crds)
    assert next(iter(tracker.stages.values())).openapi_v3 == 100.9


def test_resources_of_a_group_version_document():
    document = {"paths": {
        "/apis/g.test/v1/": {}, "/apis/g.test/v1/widgets": {}, "/apis/g.test/v1/widgets/{name}": {},
        "/apis/g.test/v1/namespaces/{namespace}/gadgets": {},
        "/apis/g.test/v1/namespaces/{namespace}/gadgets/{name}/status": {},
        "/apis/g.test/v1/watch/things": {}, "/apis/other.test/v1/nope": {},
    }}
    found = document_resources(document, "apis/g.test/v1")
    assert found == {"widgets", "gadgets", "things"}


def test_crds_older_than_the_monitor():
    tracker = PublicationTracker()
    crds = {
        "old.g.test": record("old.g.test", created=10.0, established=11.0, live=False),
        "late.h.test": record("late.h.test", created=20.0, established=21.0, live=False, group="h.test"),
    }
    tracker.update_crds(crds)
    tracker.observe_index(50.0, 50.1, {"apis/g.test/v1": "H"})
    tracker.place_openapi(crds)
    old = tracker.stages["uid-old.g.test"]
    # In the first fetch: published, but when is unknown - out of the lag figures and the backlog.
    assert old.openapi_untimed and old.openapi_v3 is None
    assert tracker.backlog(crds) == [("late.h.test", 21.0)]
    tracker.observe_index(55.0, 55.2, {"apis/g.test/v1": "H", "apis/h.test/v1": "X"})
    tracker.place_openapi(crds)
    assert tracker.stages["uid-late.h.test"].openapi_v3 == 55.2
    assert tracker.index["apis/h.test/v1"].first_seen == 55.2
    assert tracker.lag_seconds()["openapi_v3"].count == 1


def test_every_served_version_must_be_published():
    tracker = PublicationTracker()
    crds = {"m.g.test": record("m.g.test", created=0.0, established=None, versions=("v1", "v2"))}
    tracker.update_crds(crds)
    tracker.observe_index(0.5, 0.6, {})
    crds["m.g.test"] = dataclasses.replace(crds["m.g.test"], established=1.0, seen_established=1.2,
                                           established_live=True)
    tracker.update_crds(crds)
    tracker.observe_index(2.0, 2.1, {"apis/g.test/v1": "A"})
    tracker.place_openapi(crds)
    assert tracker.backlog(crds) == [("m.g.test", 1.2)]
    tracker.observe_index(3.0, 3.1, {"apis/g.test/v1": "A", "apis/g.test/v2": "B"})
    tracker.place_openapi(crds)
    assert tracker.stages["uid-m.g.test"].openapi_v3 == 3.1


def test_discovery_stage():
    tracker = PublicationTracker()
    crds = {"a.g.test": record("a.g.test", created=10.0, established=10.3)}
    tracker.update_crds(crds)
    tracker.observe_discovery(10.5, {("g.test", "v1", "a")}, crds)  # the first look: untimed
    assert tracker.stages["uid-a.g.test"].discovery_untimed
    crds["b.g.test"] = record("b.g.test", created=11.0, established=11.2)
    tracker.update_crds(crds)
    tracker.observe_discovery(12.0, {("g.test", "v1", "a")}, crds)
    assert not tracker.stages["uid-b.g.test"].in_discovery
    tracker.observe_discovery(13.0, {("g.test", "v1", "a"), ("g.test", "v1", "b")}, crds)
    assert tracker.stages["uid-b.g.test"].discovery == 13.0
    # `b` deleted and created again between two looks: its resource never left discovery, so the
    # time it appeared belongs to the old CRD - the new one is reached but untimed.
    crds["b.g.test"] = record("b.g.test", created=40.0, established=40.2, uid="uid-b2")
    tracker.update_crds(crds)
    tracker.observe_discovery(41.0, {("g.test", "v1", "a"), ("g.test", "v1", "b")}, crds)
    assert "uid-b.g.test" not in tracker.stages
    assert tracker.stages["uid-b2"].discovery_untimed and tracker.stages["uid-b2"].discovery is None
    assert tracker.lag_seconds()["discovery"].count == 0


def test_discovery_is_never_timed_before_the_watch_reports_established():
    """A watch that reads an install's events in bursts reports Established up to a pause late: a
    fetch that already lists the CRD waits for it, keeps the time it first showed it, and is never
    earlier than Established."""
    tracker = PublicationTracker()
    crds = {"a.g.test": record("a.g.test", created=10.0, established=10.2)}
    tracker.update_crds(crds)
    tracker.observe_discovery(10.5, {("g.test", "v1", "a")}, crds)  # the first look
    crds["b.g.test"] = record("b.g.test", created=11.0, established=None)
    tracker.update_crds(crds)
    tracker.observe_discovery(11.5, {("g.test", "v1", "a"), ("g.test", "v1", "b")}, crds)
    assert not tracker.stages["uid-b.g.test"].in_discovery  # listed, but not yet Established to us
    crds["b.g.test"] = record("b.g.test", created=11.0, established=11.6)  # reported after the fetch
    tracker.update_crds(crds)
    tracker.observe_discovery(12.5, {("g.test", "v1", "a"), ("g.test", "v1", "b")}, crds)
    stages = tracker.stages["uid-b.g.test"]
    assert stages.discovery == 11.6 and stages.established == 11.6
    crds["c.g.test"] = record("c.g.test", created=13.0, established=13.1)
    tracker.update_crds(crds)
    tracker.observe_discovery(14.0, {("g.test", "v1", p) for p in "abc"}, crds)
    assert tracker.stages["uid-c.g.test"].discovery == 14.0  # the fetch's own time when it is later


def test_openapi_sample_round_trips():
    from crdscope.base.samples.openapi import GroupVersionPublication, OpenAPISample

    sample = OpenAPISample(v3_paths=3, lag_seconds={"established": lag_stats([1.0, 2.0])},
                           group_versions={"g.test/v1": GroupVersionPublication(first_seen=1.0, hash="AB")},
                           backlog=1, backlog_names=("a.g.test",), v2_bytes=10)
    assert OpenAPISample.from_json(sample.to_json()) == sample


def test_regeneration_series_time_the_v3_stage_of_crds_established_while_watched():
    """Servers before 1.27: the index waits for CRDs to settle, the server's regeneration series times the stage."""
    tracker = PublicationTracker()
    old = dataclasses.replace(record("old.g.test", created=50.0, established=51.0), established_live=False)
    crds = {"old.g.test": old, "a.g.test": record("a.g.test", created=100.0, established=None, versions=("v1", "v2"))}
    tracker.update_crds(crds)
    tracker.observe_regenerations(99.0, {("old.g.test", "v1")}, crds)
    assert tracker.placed_by_regeneration == 0  # Established before monitoring: left to the index
    crds["a.g.test"] = record("a.g.test", created=100.0, established=101.0, versions=("v1", "v2"))
    tracker.update_crds(crds)
    # One of its two versions published: not yet in OpenAPI.
    tracker.observe_regenerations(105.0, {("old.g.test", "v1"), ("a.g.test", "v1")}, crds)
    assert tracker.stages["uid-a.g.test"].openapi_v3 is None
    assert tracker.backlog(crds) == [("old.g.test", 51.0), ("a.g.test", 101.0)]
    tracker.observe_regenerations(110.0, {("old.g.test", "v1"), ("a.g.test", "v1"), ("a.g.test", "v2")}, crds)
    assert tracker.stages["uid-a.g.test"].openapi_v3 == 110.0 and tracker.placed_by_regeneration == 1
    assert tracker.lag_seconds()["openapi_v3"].max == pytest.approx(10.0)
    # Placed once: a later look changes nothing.
    tracker.observe_regenerations(120.0, {("old.g.test", "v1"), ("a.g.test", "v1"), ("a.g.test", "v2")}, crds)
    assert tracker.stages["uid-a.g.test"].openapi_v3 == 110.0 and tracker.stages["uid-old.g.test"].openapi_v3 is None


def test_published_versions_and_server_minor_from_a_real_exposition():
    from crdscope.connection.metrics import parse_text
    from crdscope.probes.openapi import REGENERATION_FAMILY, published_versions, server_minor

    # As kube-apiserver 1.26.15 exposes it: created by With() and never incremented, so every value is 0.
    text = (f"# HELP {REGENERATION_FAMILY} [ALPHA] Counter of OpenAPI v3 spec regeneration count broken down by "
            "group, version, causing CRD and reason.\n"
            f"# TYPE {REGENERATION_FAMILY} counter\n"
            f'{REGENERATION_FAMILY}{{crd="a.g.test",group="g.test",reason="add",version="v1"}} 0\n'
            f'{REGENERATION_FAMILY}{{crd="b.g.test",group="g.test",reason="update",version="v1"}} 0\n'
            f'{REGENERATION_FAMILY}{{crd="c.g.test",group="g.test",reason="remove",version="v1"}} 0\n')
    scrape = parse_text(text, [REGENERATION_FAMILY])
    assert published_versions(scrape) == {("a.g.test", "v1"), ("b.g.test", "v1")}
    assert [server_minor(m) for m in ("26", "26+", "37", "", "x")] == [26, 26, 37, None, None]
