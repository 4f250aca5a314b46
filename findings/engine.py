"""The findings engine: samples in, findings opening and closing out, once each.

Every sample goes into the sample store :class:`Observations` reads; every
check then says which findings hold now.  A finding id that appears opens (``since`` = the sample's
time, or what the check knows), one that disappears closes, one whose severity
changed is reported as changed; nothing else is reported, however many samples
confirm it.  The responsiveness probe's sample every second is what makes
evaluation run that often regardless of the other probes' cadences.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from typing import Any

from crdscope.base.errors import ConfigError
from crdscope.base.paths import config_file
from crdscope.base.facts import ClusterFacts
from crdscope.base.samples import Sample
from crdscope.base.settings import Thresholds
from crdscope.base.silences import Silence, covering
from crdscope.base.store import SampleStore

from . import checks, crashloop, crossplane, etcd, kubectl_discovery, resources, webhooks
from .model import ACCEPTED, CHANGED, CLOSED, EXPIRED, OPENED, Finding, FindingChange, Severity, most_severe_first
from .observations import Observations
from .spec import Check, CheckSpec, EventRule

log = logging.getLogger("crdscope.findings")

#: Every check the engine runs by default, in the order the issue lists them; each declares the
#: probes and thresholds it uses and the alerting rules it becomes (``doctor`` and ``crdscope
#: rules`` read these declarations).
CHECKS: tuple[CheckSpec, ...] = (
    checks.NOT_ANSWERING_CHECK,
    crashloop.CRASH_LOOP_CHECK,
    checks.LATENCY_SLO_CHECK,
    webhooks.WEBHOOKS_CHECK,
    resources.NO_AGGREGATED_DISCOVERY_CHECK,
    checks.APF_CHECK,
    checks.OPENAPI_BEHIND_CHECK,
    resources.MEMORY_CHECK,
    resources.UNUSED_CRDS_CHECK,
    etcd.ETCD_CONNECTIONS_CHECK,
    crossplane.UNUSED_ACTIVE_MRDS_CHECK,
    crossplane.WITHOUT_SAFE_START_CHECK,
    crossplane.ACTIVE_OUTSIDE_MRAPS_CHECK,
    crossplane.MRAP_NOT_READY_CHECK,
    crossplane.COMPOSED_INACTIVE_CHECK,
    crossplane.DEAD_ENTRY_CHECK,
    crossplane.RUNTIME_NOT_RUNNING_CHECK,
    crossplane.NO_NODES_CHECK,
)
#: Checks a front end adds when it knows more (the local kubectl).
OPTIONAL_CHECKS: tuple[CheckSpec, ...] = (kubectl_discovery.KUBECTL_DISCOVERY_CHECK,)
#: Every declared check.
DECLARED: tuple[CheckSpec, ...] = CHECKS + OPTIONAL_CHECKS


def event_rules() -> tuple[EventRule[Any], ...]:
    """Every event line a declared check declares (the events detector runs these, and no other)."""
    return tuple(rule for check in DECLARED for rule in check.events)


def finding_kinds() -> tuple[str, ...]:
    """Every finding kind a declared check can open, in the checks' order."""
    return tuple(dict.fromkeys(kind for check in DECLARED for kind in check.kinds))


def check_silences(silences: tuple[Silence, ...]) -> None:
    """Each ``[[silence]]`` entry names a finding kind crdscope has: a typo would never match and
    the team would be paged for what it accepted.  A one-line :class:`ConfigError` (exit 2) otherwise."""
    known = finding_kinds()
    for number, silence in enumerate(silences, start=1):
        if silence.kind not in known:
            raise ConfigError(f"{config_file()}: [[silence]] entry {number} ({silence.finding} on {silence.cluster}): "
                              f"no finding kind {silence.kind!r} (kinds: {', '.join(known)})")


class FindingsEngine:
    """Turns samples into :class:`FindingChange` transitions and keeps the open findings.

    The samples live in ``store``: a front end that already keeps its samples in a
    :class:`SampleStore` hands it over and the checks read the same samples (without one the
    engine keeps its own, :attr:`store`).  :meth:`observe` adds a sample to the store, unless it
    is already the latest of its probe there (a front end sharing the store added it first),
    then evaluates; a front end may equally add samples itself and call :meth:`evaluate`.
    """

    def __init__(self, thresholds: Thresholds | None = None, checks_: Iterable[Check] = CHECKS, *,
                 facts: ClusterFacts | None = None, store: SampleStore | None = None) -> None:
        self.observations = Observations(thresholds=thresholds or Thresholds(),
                                         store=store if store is not None else SampleStore(),
                                         facts=facts if facts is not None else ClusterFacts())
        #: The checks run at each evaluation: :class:`CheckSpec` declarations, or plain functions.
        self.checks: list[Check] = list(checks_)
        self.open: dict[str, Finding] = {}
        #: Accepted findings (``[[silence]]``) and the cluster name their globs are matched against.
        self.silences: tuple[Silence, ...] = ()
        self.cluster = ""

    def accept(self, silences: tuple[Silence, ...], cluster: str) -> None:
        """Judge by these acceptances from the next evaluation on (``cluster``: the context name)."""
        self.silences, self.cluster = silences, cluster

    def acceptances(self, now: float) -> list[Silence]:
        """The acceptances in force for this cluster at ``now`` (lapsed ones and other clusters' left out)."""
        return [s for s in self.silences if s.applies_to(self.cluster, now)]

    @property
    def store(self) -> SampleStore:
        """The store the checks read."""
        return self.observations.store

    def observe(self, sample: Sample) -> list[FindingChange]:
        """Take a sample in (into the store, unless already there) and return the transitions it
        caused (usually none)."""
        if self.store.latest(sample.probe) is not sample:
            self.observations.add(sample)
        return self.evaluate(sample.timestamp)

    __call__ = observe  # a monitor sink

    def evaluate(self, now: float) -> list[FindingChange]:
        """Run every check and compare with the open findings (acceptances judged at ``now``: one
        that lapsed since the last evaluation is reported, and the finding pages again)."""
        self.observations.now = now
        holding: dict[str, Finding] = {}
        for check in self.checks:
            try:
                found = check(self.observations)
            except Exception:  # a check tripping on an odd sample must not stop the others
                log.exception("finding check %s failed", check_name(check))
                continue
            for finding in found:
                holding.setdefault(finding.id, finding)
        changes: list[FindingChange] = []
        for finding_id, previous in list(self.open.items()):
            if finding_id not in holding:
                del self.open[finding_id]
                changes.append(FindingChange(now, CLOSED, previous))
        for finding_id, finding in holding.items():
            finding = dataclasses.replace(finding, accepted=covering(self.silences, finding_id, self.cluster, now))
            known = self.open.get(finding_id)
            if known is None:
                since = finding.since if 0 < finding.since <= now else now
                opened = dataclasses.replace(finding, since=since)
                self.open[finding_id] = opened
                changes.append(FindingChange(now, OPENED, opened))
            else:
                current = dataclasses.replace(finding, since=known.since)
                self.open[finding_id] = current
                if current.pages != known.pages:
                    changes.append(FindingChange(now, EXPIRED if current.pages else ACCEPTED, current))
                if current.severity != known.severity:
                    changes.append(FindingChange(now, CHANGED, current))
        return changes

    def current(self) -> list[Finding]:
        """Open findings, most severe first."""
        return most_severe_first(list(self.open.values()))

    def counts(self) -> dict[Severity, int]:
        """Open findings that page, per severity (every severity present, 0 when none): accepted
        ones are not counted (``--fail-if 'findings.critical>0'`` reads these)."""
        counts = dict.fromkeys(Severity, 0)
        for finding in self.open.values():
            if finding.pages:
                counts[finding.severity] += 1
        return counts


def check_name(check: Check) -> str:
    """A check's function name, for logs."""
    return check.name if isinstance(check, CheckSpec) else check.__qualname__


__all__ = ["CHECKS", "DECLARED", "OPTIONAL_CHECKS", "CheckSpec", "FindingsEngine", "OPENED",
           "CLOSED", "CHANGED", "ACCEPTED", "EXPIRED"]
