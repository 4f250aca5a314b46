"""The attribution probe: the CRD watch's terms per group priced through the facts' cost model, the
health sample's RSS and MRD count beside them; what it cannot price said, never failed; and every front
end reading its sample (the exporter's series per group, the headless and doctor lines, the evidence
of the memory findings)."""

from __future__ import annotations

import json

import httpx
import pytest

from crdscope.base.activation import MRD_BYTES
from crdscope.base.errors import ConfigError
from crdscope.base.facts import ClusterFacts
from crdscope.base.samples.attribution import AttributionSample, GroupTerms, attribution_summary
from crdscope.base.samples.health import HealthSample
from crdscope.base.samples.version import VersionSample
from crdscope.connection.crdwatch import CRD_PATH, CRDWatch
from crdscope.costmodel.attribution import attribute_groups
from crdscope.costmodel.features import features_of_spec
from crdscope.probes.attribution import NO_PRICING, NO_VERSION, NOT_LISTED, AttributionProbe
from tests.helpers import mock_cluster
from tests.unit.test_costmodel import coefficients_file  # noqa: F401 - the fixture
from tests.unit.test_crd_schema_bytes import crd, go_text

MIB = float(1 << 20)
VERSION = VersionSample(major="1", minor="37+", git_version="v1.37.2")
HEALTH = HealthSample(rss_bytes=3 << 30, mrds=40, crds=3)
CRDS = [crd("a.s3.test", "s3.test", "u1", "1"), crd("b.s3.test", "s3.test", "u2", "2", versions=2),
        crd("c.ec2.test", "ec2.test", "u3", "3")]


async def listed_watch(items: list[dict]) -> CRDWatch:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == CRD_PATH
        return httpx.Response(200, content=go_text({"metadata": {"resourceVersion": "9"}, "items": items}))

    watch = CRDWatch(mock_cluster(handler))
    await watch.list_once()
    return watch


async def test_the_clusters_own_crds_priced_group_by_group(coefficients_file):  # noqa: F811
    watch = await listed_watch(CRDS)
    facts = ClusterFacts(flag_limit=4 << 30, pricing=attribute_groups)
    probe = AttributionProbe(watch, facts, {"version": VERSION, "health": HEALTH})
    sample = await probe.run()
    # Each group as the cost model prices those CRDs' own features, read from their specs.
    for group in ("s3.test", "ec2.test"):
        features = [features_of_spec(c["metadata"]["name"], c["spec"]) for c in CRDS if c["spec"]["group"] == group]
        alone = attribute_groups("1.37", {group: GroupTerms(len(features), sum(f.served for f in features),
                                                            sum(f.schema_bytes for f in features))})
        # (The watch measures a schema as the server sends it: a few percent off json.dumps here.)
        assert sample.memory_bytes[group] == pytest.approx(alone.crd_memory_bytes, rel=0.02)
    assert (sample.model_minor, sample.kubernetes_minor, sample.crds, sample.groups) == ("1.37", "1.37", 3, 2)
    assert sample.mrds == 40 and sample.mrd_memory_bytes == pytest.approx(40 * MRD_BYTES)
    assert sample.rss_bytes == 3 << 30 and sample.headroom_crds == int((1 << 30) // (sample.mib_per_crd * MIB))
    assert sample.unobservable == {}
    # One CRD more: the watch's terms moved, and the next run prices it.
    more = await listed_watch([*CRDS, crd("d.ec2.test", "ec2.test", "u4", "4")])
    again = await AttributionProbe(more, facts, {"version": VERSION, "health": HEALTH}).run()
    assert again.memory_bytes["ec2.test"] == pytest.approx(2 * sample.memory_bytes["ec2.test"])


async def test_what_cannot_be_priced_is_said_not_failed(coefficients_file):  # noqa: F811
    watch = await listed_watch(CRDS)
    latest = {"version": VERSION}
    unpriced = await AttributionProbe(watch, ClusterFacts(), latest).run()
    assert unpriced.ok and unpriced.unobservable == {"crd_memory_bytes": NO_PRICING}
    assert attribution_summary(unpriced) == ""
    no_version = await AttributionProbe(watch, ClusterFacts(pricing=attribute_groups), {}).run()
    assert no_version.unobservable == {"crd_memory_bytes": NO_VERSION}
    not_listed = await AttributionProbe(CRDWatch(mock_cluster(lambda r: httpx.Response(500))),
                                        ClusterFacts(pricing=attribute_groups), latest).run()
    assert not_listed.unobservable == {"crd_memory_bytes": NOT_LISTED}

    def no_coefficients(*_args: object, **_kwargs: object) -> AttributionSample:
        raise ConfigError("cost model coefficients unreadable (x.json): gone")

    missing = await AttributionProbe(watch, ClusterFacts(pricing=no_coefficients), latest).run()
    assert missing.ok and missing.unobservable["crd_memory_bytes"].startswith("cost model coefficients unreadable")
    # Priced without a health sample: the CRDs are, the MRDs and the RSS are said to be unknown.
    alone = await AttributionProbe(watch, ClusterFacts(pricing=attribute_groups), latest).run()
    assert alone.crd_memory_bytes and alone.mrd_memory_bytes is None and alone.headroom_crds is None
    assert set(alone.unobservable) == {"mrd_memory_bytes", "rss_bytes"}


def test_the_exporter_has_a_series_per_group_and_one_for_the_mrds(coefficients_file):  # noqa: F811
    from tests.unit.test_exporter import scrape, serving, without_cluster

    groups = {"s3.aws.upbound.io": GroupTerms(10, 10, 300_000), "ec2.aws.upbound.io": GroupTerms(30, 40, 900_000)}
    sample = attribute_groups("1.37", groups, mrds=817, rss_bytes=2 << 30)
    from crdscope.session.recorder import ClusterInfo

    collector, core = serving(ClusterInfo(server="https://x", context="prod"))
    core.store.add(sample)
    series = without_cluster(scrape(collector), "prod")
    for group, held in sample.memory_bytes.items():
        assert series[("crdscope_attribution_memory_bytes", (("group", group),))] == pytest.approx(held)
    assert series[("crdscope_attribution_mrd_memory_bytes", ())] == pytest.approx(817 * MRD_BYTES)
    assert series[("crdscope_attribution_crd_memory_bytes", ())] == pytest.approx(sample.crd_memory_bytes)
    assert series[("crdscope_attribution_mib_per_crd", ())] == pytest.approx(sample.mib_per_crd)


def test_a_recorded_attribution_replays_as_its_own_type(coefficients_file):  # noqa: F811
    from crdscope.probes.registry import sample_type

    sample = attribute_groups("1.37", {"s3.test": GroupTerms(2, 3, 4000)}, mrds=5)
    back = sample_type("attribution").from_json(json.loads(json.dumps(sample.to_json())))
    assert back == sample


def test_doctor_and_the_memory_findings_carry_the_attribution(coefficients_file):  # noqa: F811
    from crdscope.base.settings import Thresholds
    from crdscope.findings.observations import Observations
    from crdscope.findings.resources import memory
    from crdscope.session.core import SessionStore
    from crdscope.session.doctor import Diagnosis, render
    from crdscope.session.recorder import ClusterInfo

    sample = attribute_groups("1.37", {"s3.test": GroupTerms(200, 200, 6_000_000),
                                       "ec2.test": GroupTerms(100, 100, 1_000_000)}, mrds=300, rss_bytes=3 << 30)
    summary = attribution_summary(sample)
    assert summary.startswith("CRDs ~ ") and summary.endswith(
        f"; costliest groups: s3.test {sample.memory_bytes['s3.test'] / (1 << 30):.2f} GiB, "
        f"ec2.test {sample.memory_bytes['ec2.test'] / (1 << 30):.2f} GiB")
    diagnosis = Diagnosis(ClusterInfo(server="https://x", context="x"), 30.0, [], 10, "kubectl", attribution=sample)
    assert f"Memory by the cost model: {summary}" in render(diagnosis, "text").splitlines()
    data = json.loads(render(diagnosis, "json"))["attribution"]
    assert data["crd_memory_bytes"] == pytest.approx(sample.crd_memory_bytes) and data["mrds"] == 300
    store = SessionStore()
    store.add(HealthSample(rss_bytes=3 << 30, crds=300, mib_per_crd=9.0, r2=0.99, fit_points=20, fit_crd_counts=5))
    store.add(sample)
    [finding] = [f for f in memory(Observations(Thresholds(), store=store)) if f.kind == "memory-per-crd"]
    assert f"attribution: {summary}" in finding.evidence
