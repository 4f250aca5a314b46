"""The etcd-connections finding judged on real figures: every lab measurement of
``python -m bench etcd_connections`` (bench/results/etcd-connections-*.json), the recordings issue 46
quotes and the published report's count.

The measurements are what real API servers held (1.26, 1.28, 1.33, 1.37 and 1.38.0-beta.0): idle,
with CRDs installed, with kinds in use (one and several versions), after spec updates,
re-creations, an etcd restart and deletions; and restarted with their etcd member given twice in
``--etcd-servers``, which doubles every storage's connections.  The finding must stay silent on
every row but the last kind, and open on that one on every minor.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from crdscope.base.samples.health import HealthSample
from crdscope.base.samples.inventory import InventorySample
from crdscope.base.samples.version import VersionSample
from crdscope.base.store import SampleStore
from crdscope.findings import etcd
from crdscope.findings.etcd import ETCD_CONNECTIONS_CHECK, EtcdDesign
from crdscope.findings.model import Severity
from crdscope.findings.observations import Observations

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"
NOW = 1_000_000.0


def measurements() -> list[tuple[str, dict]]:
    """(minor, settled row) of the newest measurement file, every minor and step."""
    newest = sorted(RESULTS.glob("etcd-connections-*.json"))[-1]
    rows = []
    for measured in json.loads(newest.read_text())["minors"].values():
        minor = ".".join(measured["kubernetes"].lstrip("v").split(".")[:2])
        rows += [(minor, row) for row in measured["rows"] if "counts_seen" in row]
    return rows


def judged(minor: str | None, connections: int | list[int], crds: int, served_versions: int | None,
           with_objects: int = 0) -> list:
    """The check on a store holding what the probes report of such a server (``connections`` a list:
    one health sample 10 s apart each, the last one newest)."""
    store = SampleStore()
    if minor is not None:
        major, minor_number = minor.split(".")
        store.add(VersionSample(timestamp=NOW, major=major, minor=minor_number))
    store.add(InventorySample(timestamp=NOW, crds=crds, established=crds, served_versions=served_versions))
    counts = connections if isinstance(connections, list) else [connections]
    for index, count in enumerate(counts):
        store.add(HealthSample(timestamp=NOW - 10.0 * (len(counts) - 1 - index), etcd_connections=count, crds=crds,
                               crds_without_objects=crds - with_objects))
    return ETCD_CONNECTIONS_CHECK(Observations(store=store, now=NOW))


ROWS = measurements()


@pytest.mark.parametrize(("minor", "row"), ROWS, ids=[f"{m}-{r['step']}-{i}" for i, (m, r) in enumerate(ROWS)])
def test_every_measured_server_is_judged_by_its_own_design(minor, row):
    found = judged(minor, row["connections"], row["crds"], row["served_versions"], row["object_series_above_0"])
    if row["step"] != "etcd-listed-twice":
        assert found == [], (minor, row["step"], row["connections"], found)
        return
    (finding,) = found
    assert finding.severity is Severity.WARNING and finding.id == "etcd-connections-per-crd"
    assert f"holds {row['connections']} etcd connections" in finding.title and minor in finding.title
    assert any("--etcd-servers" in part for part in (finding.cause, finding.remedy))


def test_the_measurements_cover_the_minors_and_the_steps_the_model_rests_on():
    minors = {minor for minor, _ in ROWS}
    assert {"1.26", "1.33", "1.37"} <= minors
    for minor in minors:
        steps = {row["step"] for m, row in ROWS if m == minor}
        assert {"idle", "installed", "listed", "listed-multiversion", "updated", "recreated", "etcd-restarted",
                "deleted", "etcd-listed-twice"} <= steps, (minor, steps)
        # Hundreds of CRDs installed before any is used, and more than a hundred versions in use.
        assert max(row["crds"] for m, row in ROWS if m == minor and row["step"] == "installed") >= 200
        assert max(row["versions_in_use"] for m, row in ROWS if m == minor) >= 150


def test_the_issues_false_alarms_are_silent():
    # The recording of an idle 1.37.2 lab: 87 connections for 21 CRDs (one version each, all listed).
    assert judged("1.37", 87, 21, 21) == []
    # The doctor run beside the Crossplane plan: 89 connections for 34 CRDs.
    assert judged("1.37", 89, 34, 34) == []
    # The published count: 1,937 connections for 1,878 CRDs, every kind watched by its provider.
    assert judged("1.26", 1937, 1878, 1878) == []


def test_the_evidence_states_the_expected_figure_and_how_it_was_derived():
    (finding,) = judged("1.33", 300, 50, 60, with_objects=10)
    text = " ".join(finding.evidence)
    # 1.33: 58 with no kind in use; at least 10 kinds with objects, at most the 60 versions served.
    assert "expected 68 to 118" in text and "baseline 58" in text and "v1.33.13" in text
    assert "1 per served version of each kind in use" in text and "0 per CRD installed" in text
    assert "judged normal up to 148" in text  # 118 + 25 % (30)
    assert "bench/results/etcd-connections-" in text and "python -m bench etcd_connections" in text


def test_a_count_judged_normal_has_room_above_the_upper_end():
    # 1.37, 100 CRDs of 2 versions each: at most 69 + 200 = 269; normal up to 269 + 68 = 337.
    assert judged("1.37", 337, 100, 200) == []
    assert len(judged("1.37", 338, 100, 200)) == 1
    # A small cluster gets at least 20: 69 + 0 -> 89.
    assert judged("1.37", 89, 0, 0) == [] and len(judged("1.37", 90, 0, 0)) == 1


def test_a_passing_spike_is_not_judged_but_a_held_count_is():
    # A CRD update holds the old storage's connections a moment: one sample over, one under, within 30 s.
    assert judged("1.37", [90, 400], 21, 21) == []
    assert len(judged("1.37", [400, 400], 21, 21)) == 1
    # Older than the hold, a low count no longer counts.
    assert len(judged("1.37", [90, 400, 400, 400, 400], 21, 21)) == 1


def test_without_the_versions_served_the_check_does_not_judge():
    assert judged("1.37", 5000, 21, None) == []


def test_a_minor_not_measured_uses_the_nearest_and_says_so():
    (finding,) = judged("1.40", 500, 10, 10)
    assert "1.40 not measured: 1.38's design" in " ".join(finding.evidence)
    (finding,) = judged(None, 500, 10, 10)
    assert "server version unknown" in " ".join(finding.evidence)


def test_no_upgrade_is_advised_where_no_newer_minor_holds_fewer(monkeypatch):
    for minor in etcd.DESIGNS:
        (finding,) = judged(minor, 1000, 10, 10)
        assert "an upgrade would not lower it" in finding.remedy, minor
        assert "upgrading lowers it" not in finding.remedy
    # Were a newer minor measured to share clients, a server older than it would be told.
    sharing = EtcdDesign("1.39", 60, 0.0, 0.05, "a build that shares etcd clients")
    monkeypatch.setitem(etcd.DESIGNS, "1.39", sharing)
    (finding,) = judged("1.37", 1000, 10, 10)
    assert "1.39 holds 0.05 per served version in use against 1 here: upgrading lowers it" in finding.remedy
    (finding,) = judged("1.39", 1000, 10, 10)
    assert "an upgrade would not lower it" in finding.remedy


def test_designs_are_measured_figures_in_minor_order():
    minors = list(etcd.DESIGNS)
    assert minors == sorted(minors, key=lambda m: tuple(int(p) for p in m.split(".")))
    for design in etcd.DESIGNS.values():
        assert dataclasses.astuple(design)[2:4] == (0.0, 1.0) and 50 <= design.baseline <= 80
