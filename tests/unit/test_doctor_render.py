"""``crdscope doctor``'s report says what it checked, and what it could not (no sample from a probe)."""

from __future__ import annotations

import json

from crdscope.findings.engine import CHECKS
from crdscope.session.doctor import Diagnosis, render
from crdscope.session.recorder import ClusterInfo

EVERY_PROBE = frozenset(kind.probe for check in CHECKS for kind in check.probes)


def diagnosis(seen: frozenset[str]) -> Diagnosis:
    return Diagnosis(cluster=ClusterInfo(server="https://127.0.0.1:6443", context="lab"), seconds=30.0,
                     findings=[], samples=40, kubectl="v1.32.4", probes_seen=seen)


def test_with_every_probe_heard_everything_is_checked():
    report = json.loads(render(diagnosis(EVERY_PROBE), "json"))
    assert report["checked"] == [check.what_it_checks for check in CHECKS] and report["not_checked"] == []
    assert "Not checked" not in render(diagnosis(EVERY_PROBE), "text")


def test_a_probe_never_heard_from_is_not_claimed_as_checked():
    partial = diagnosis(EVERY_PROBE - {"health"})
    report = json.loads(render(partial, "json"))
    health_checks = [check.what_it_checks for check in CHECKS if "health" in check.missing(partial.probes_seen)]
    assert "memory per CRD, growth, restarts" in health_checks
    assert not set(health_checks) & set(report["checked"])
    assert len(report["not_checked"]) == len(health_checks)
    assert all("no good health sample in 30.0 s" in line for line in report["not_checked"])
    text = render(partial, "md")
    assert "Nothing found. Checked: " in text and "Not checked: " in text and "; memory per CRD" in text


def test_a_check_that_reads_a_sample_only_when_present_does_not_wait_for_it():
    # The Crossplane unused-kinds check prices kinds by the health fit when there is one: without
    # health samples it still judges (by the cost model), so it stays checked.
    report = json.loads(render(diagnosis(EVERY_PROBE - {"health"}), "json"))
    assert "Crossplane: unused active MRDs" in report["checked"]
