"""``crdscope doctor``'s report says what it checked, and what it could not (no sample from a probe)."""

from __future__ import annotations

import json

from crdscope.findings.engine import CHECKED_BY_PROBE
from crdscope.session.doctor import Diagnosis, render
from crdscope.session.recorder import ClusterInfo

EVERY_PROBE = frozenset(probe for _, probe in CHECKED_BY_PROBE)


def diagnosis(seen: frozenset[str]) -> Diagnosis:
    return Diagnosis(cluster=ClusterInfo(server="https://127.0.0.1:6443", context="lab"), seconds=30.0,
                     findings=[], samples=40, kubectl="v1.32.4", probes_seen=seen)


def test_with_every_probe_heard_everything_is_checked():
    report = json.loads(render(diagnosis(EVERY_PROBE), "json"))
    assert report["checked"] == [what for what, _ in CHECKED_BY_PROBE] and report["not_checked"] == []
    assert "Not checked" not in render(diagnosis(EVERY_PROBE), "text")


def test_a_probe_never_heard_from_is_not_claimed_as_checked():
    partial = diagnosis(EVERY_PROBE - {"health"})
    report = json.loads(render(partial, "json"))
    health_checks = [what for what, probe in CHECKED_BY_PROBE if probe == "health"]
    assert not set(health_checks) & set(report["checked"])
    assert len(report["not_checked"]) == len(health_checks)
    assert all("no good health sample in 30.0 s" in line for line in report["not_checked"])
    text = render(partial, "md")
    assert "Nothing found. Checked: " in text and "Not checked: memory per CRD" in text
