"""The findings engine: samples in, findings opening and closing out, once each.

Every sample updates :class:`Observations`; every check then says which
findings hold now.  A finding id that appears opens (``since`` = the sample's
time, or what the check knows), one that disappears closes, one whose severity
changed is reported as changed; nothing else is reported, however many samples
confirm it.  The responsiveness probe's sample every second is what makes
evaluation run that often regardless of the other probes' cadences.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable

from crdscope.base.samples import Sample
from crdscope.base.settings import Thresholds

from . import checks, crashloop, crossplane, resources
from .model import CHANGED, CLOSED, OPENED, Finding, FindingChange, Severity, most_severe_first
from .observations import Observations

log = logging.getLogger("crdscope.findings")

Check = Callable[[Observations], list[Finding]]

#: Every check, in the order the issue lists them (the kubectl check is added when known).
CHECKS: tuple[Check, ...] = (
    checks.not_answering,
    crashloop.crash_loop,
    checks.latency_slo,
    resources.no_aggregated_discovery,
    checks.apf,
    checks.openapi_behind,
    resources.memory,
    resources.unused_crds,
    resources.etcd_connections,
    crossplane.unused_active_mrds,
    crossplane.without_safe_start,
    crossplane.active_outside_mraps,
    crossplane.mrap_not_ready,
)
#: What the checks look at, for "nothing found" (``crdscope doctor``).
#: What the checks look at, and the probe whose samples each needs (``doctor`` lists a check as
#: done only when that probe delivered a good sample).
CHECKED_BY_PROBE = (
    ("API server answering (HTTP/2 PINGs, requests in flight, health checks)", "responsiveness"),
    ("request latency against the SLOs (canaries, server-side p99)", "latency"),
    ("aggregated discovery offered", "discovery"),
    ("APF rejecting or queueing", "throttling"),
    ("OpenAPI publication backlog", "openapi"),
    ("memory per CRD, growth, restarts", "health"),
    ("CRDs without objects", "health"),
    ("etcd connections per CRD", "health"),
    ("API server crash-looping (restarts from start times, Leases, the lab, kube-state-metrics)", "health"),
    ("Crossplane: unused active MRDs, safe-start, MRDs outside MRAPs, MRAPs not ready", "inventory"),
)
CHECKED = tuple(what for what, _ in CHECKED_BY_PROBE)


class FindingsEngine:
    """Turns samples into :class:`FindingChange` transitions and keeps the open findings."""

    def __init__(self, thresholds: Thresholds | None = None, checks_: Iterable[Check] = CHECKS, *,
                 memory_limit_bytes: int | None = None) -> None:
        self.observations = Observations(thresholds=thresholds or Thresholds(), memory_limit_bytes=memory_limit_bytes)
        self.checks = list(checks_)
        self.open: dict[str, Finding] = {}
        self.sinks: list[Callable[[FindingChange], None]] = []

    def observe(self, sample: Sample) -> list[FindingChange]:
        """Take a sample in and return the transitions it caused (usually none)."""
        self.observations.add(sample)
        return self.evaluate(sample.timestamp)

    __call__ = observe  # a monitor sink

    def evaluate(self, now: float) -> list[FindingChange]:
        """Run every check and compare with the open findings."""
        self.observations.now = now
        holding: dict[str, Finding] = {}
        for check in self.checks:
            try:
                found = check(self.observations)
            except Exception:  # a check tripping on an odd sample must not stop the others
                log.exception("finding check %s failed", getattr(check, "__name__", check))
                continue
            for finding in found:
                holding.setdefault(finding.id, finding)
        changes: list[FindingChange] = []
        for finding_id, previous in list(self.open.items()):
            if finding_id not in holding:
                del self.open[finding_id]
                changes.append(FindingChange(now, CLOSED, previous))
        for finding_id, finding in holding.items():
            known = self.open.get(finding_id)
            if known is None:
                since = finding.since if 0 < finding.since <= now else now
                opened = dataclasses.replace(finding, since=since)
                self.open[finding_id] = opened
                changes.append(FindingChange(now, OPENED, opened))
            else:
                current = dataclasses.replace(finding, since=known.since)
                self.open[finding_id] = current
                if current.severity != known.severity:
                    changes.append(FindingChange(now, CHANGED, current))
        for change in changes:
            for sink in list(self.sinks):
                sink(change)
        return changes

    def current(self) -> list[Finding]:
        """Open findings, most severe first."""
        return most_severe_first(list(self.open.values()))

    def counts(self) -> dict[Severity, int]:
        """Open findings per severity (every severity present, 0 when none)."""
        counts = dict.fromkeys(Severity, 0)
        for finding in self.open.values():
            counts[finding.severity] += 1
        return counts

    def worst(self) -> Severity | None:
        """The most severe open finding's severity, None when nothing is open."""
        found = self.current()
        return found[0].severity if found else None


class FindingsReplay:
    """Open findings rebuilt from recorded transitions (replay and reports of a recording)."""

    def __init__(self) -> None:
        self.open: dict[str, Finding] = {}

    def apply(self, change: FindingChange) -> None:
        """Apply one recorded transition."""
        if change.change == CLOSED:
            self.open.pop(change.finding.id, None)
        else:
            self.open[change.finding.id] = change.finding

    def current(self) -> list[Finding]:
        return most_severe_first(list(self.open.values()))


__all__ = ["CHECKS", "CHECKED", "CHECKED_BY_PROBE", "FindingsEngine", "FindingsReplay", "OPENED", "CLOSED", "CHANGED"]
