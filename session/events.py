"""Transitions worth a person's attention, derived from samples: the events log.

:class:`EventDetector` watches the samples of every probe and yields an
:class:`Event` once per *transition* (the API server restarted, readyz started
failing, 429s began...), never once per sample: a server that stays down for
ten minutes is one "down" event and one "recovered" event.  The TUI's events
panel, the headless watcher and the recorder all use it; an event's timestamp
is the timestamp of the sample that revealed it, so replaying a recording
yields the same events as the live session did.

What each figure's line says is not judged here: every rule is an
:class:`~crdscope.findings.spec.EventRule` declared on the check of its subject (the
one list, ``findings.engine.CHECKS``), judging by that check's
:class:`~crdscope.findings.spec.Judgement` s or following its finding's state, so a
threshold changed in ``config.toml`` moves the line, the finding and the panel at
once.  A figure the probe reports as unobservable (``None``) raises no event.
Samples of other classes (a probe this detector does not know) only count for
probe down / recovered.
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from crdscope.base.samples.loader import LoaderSample
from crdscope.base.restarts import KUBE_STATE_METRICS, LAB_SUPERVISOR, START_TIME, RestartEvent
from crdscope.base.samples.health import HealthSample
from crdscope.base.samples import Sample
from crdscope.base.settings import Thresholds
from crdscope.findings.engine import event_rules
from crdscope.findings.model import Finding, Severity as FindingSeverity
from crdscope.findings.model import format_duration as format_seconds  # one formatter for events and findings
from crdscope.findings.spec import EventRule, Judging, Said

from .values import finite_number

#: How bad an event is: the events panel colours by it, ``--fail-if``-style checks count by it.
Severity = Literal["info", "warn", "fail"]
INFO: Severity = "info"
WARN: Severity = "warn"
FAIL: Severity = "fail"
SEVERITIES: tuple[Severity, ...] = (INFO, WARN, FAIL)



@dataclasses.dataclass(frozen=True)
class Event:
    """One transition: when, what kind, how bad, which probe saw it, and a line for a person."""

    timestamp: float
    kind: str
    severity: Severity
    probe: str
    message: str

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (the recorder's event record)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Event:
        """Inverse of :meth:`to_json`; unknown keys are ignored."""
        return cls(timestamp=float(data.get("timestamp", 0.0)), kind=str(data.get("kind", "")),
                   severity=_severity(data.get("severity")), probe=str(data.get("probe", "")),
                   message=str(data.get("message", "")))

    def line(self) -> str:
        """``HH:MM:SS severity probe: message`` in local time, for logs and the headless watcher."""
        clock = time.strftime("%H:%M:%S", time.localtime(self.timestamp))
        return f"{clock} {self.severity:<4} {self.probe}: {self.message}"


def _severity(value: object) -> Severity:
    """A recorded severity; one this build does not know reads as info."""
    for known in SEVERITIES:
        if value == known:
            return known
    return INFO


@dataclasses.dataclass
class _ProbeState:
    down_since: float | None = None


#: An event rule's finding severity as the events log says it.
SEVERITY_OF: dict[FindingSeverity, Severity] = {FindingSeverity.CRITICAL: FAIL, FindingSeverity.WARNING: WARN,
                                                FindingSeverity.INFO: INFO}
#: Samples of its probe each event rule sees before the one it judges (the OpenAPI backlog's rises).
BEFORE_KEPT = 4


@dataclasses.dataclass
class _RuleState:
    """What one event rule held after the last sample it judged, since when, and the samples before."""

    held: dict[str, Said] = dataclasses.field(default_factory=dict)
    since: dict[str, float] = dataclasses.field(default_factory=dict)
    before: deque[Sample] = dataclasses.field(default_factory=lambda: deque(maxlen=BEFORE_KEPT))


class EventDetector:
    """Turns a stream of samples (any probe, any order) into transition events.

    What a figure's line says is judged by the declared :class:`~crdscope.findings.spec.EventRule` s
    (``rules``: every declared check's, ``findings.engine.event_rules()``); this class only runs
    them, once per transition.  It says itself what a sample states with no verdict to make: a
    probe's own failure, a restart its sources counted, the loader's progress.
    """

    def __init__(self, thresholds: Thresholds | None = None, rules: Iterable[EventRule[Any]] | None = None) -> None:
        self.thresholds = thresholds or Thresholds()
        self.rules: tuple[EventRule[Any], ...] = tuple(rules) if rules is not None else event_rules()
        self._probes: dict[str, _ProbeState] = {}
        self._restarts: float | None = None
        self._start_time: float | None = None
        self._states = [_RuleState() for _ in self.rules]
        self._loader_state: str | None = None

    def observe(self, sample: Sample, findings: Mapping[str, Finding] | None = None) -> list[Event]:
        """The events this sample reveals (usually none); ``findings``: the findings open after it
        (the rules that follow a finding read them; a caller without an engine passes none)."""
        probe = type(sample).probe
        events = self._availability(probe, sample)
        if isinstance(sample, HealthSample):
            # Even a failed sample's restarts, where a source outside the server kept counting them (a
            # supervisor's deaths: the OOM drill's server never answered between its deaths, and drill 1
            # printed none of its nine restarts).
            events += self._restarts_seen(sample)
        if sample.error:
            return events  # a failed sample's figures are defaults, not observations
        for rule, state in zip(self.rules, self._states, strict=True):
            if isinstance(sample, rule.sample):
                events += self._judge(rule, state, sample, findings or {})
        if isinstance(sample, LoaderSample):
            events += self._loader(sample)
        return events

    def _judge(self, rule: EventRule[Any], state: _RuleState, sample: Sample,
               findings: Mapping[str, Finding]) -> list[Event]:
        """One rule on one sample: an event for each key that began or stopped holding."""
        judging = Judging(sample, tuple(state.before), self.thresholds, findings, dict(state.held), dict(state.since))
        state.before.append(sample)
        holding = rule.holding(judging)
        if holding is None:
            return []  # not observed: what held stands
        probe, at = type(sample).probe, sample.timestamp
        events = [Event(at, rule.began, SEVERITY_OF[said.severity], probe, said.text)
                  for key, said in holding.items() if key not in state.held]
        events += [Event(at, rule.ended, INFO, probe, rule.ended_text(key, judging))
                   for key in state.held if key not in holding]
        state.since = {key: state.since.get(key, at) for key in holding}
        state.held = dict(holding)
        return events

    # -- every probe: down / recovered ------------------------------------------------
    def _availability(self, probe: str, sample: Sample) -> list[Event]:
        state = self._probes.setdefault(probe, _ProbeState())
        if sample.error and state.down_since is None:
            state.down_since = sample.timestamp
            return [Event(sample.timestamp, "probe-down", FAIL, probe, f"probe down: {sample.error}")]
        if not sample.error and state.down_since is not None:
            seconds = max(0.0, sample.timestamp - state.down_since)
            state.down_since = None
            return [Event(sample.timestamp, "probe-recovered", INFO, probe,
                          f"probe recovered after {format_seconds(seconds)}")]
        return []

    # -- restarts and the loader: what the sample says, no verdict -------------------------
    def _restarts_seen(self, sample: HealthSample) -> list[Event]:
        """One line per restart since the last sample; a failed sample counts only restarts its
        sources name (deaths a platform saw), its own start time being unknown."""
        events: list[Event] = []
        if sample.error and not sample.restart_events:
            return events
        restarts = finite_number(sample.restarts)
        start_time = None if sample.error else finite_number(sample.start_time)
        restarted = 0
        if restarts is not None:
            previous = self._restarts
            restarted = int(restarts - previous) if previous is not None and restarts > previous else 0
            self._restarts = restarts
        elif start_time is not None:
            restarted = int(self._start_time is not None and start_time != self._start_time)
        if start_time is not None:
            self._start_time = start_time
        if restarted:
            named = sample.restart_events[-restarted:] if len(sample.restart_events) >= restarted else ()
            fresh: tuple[RestartEvent | None, ...] = named or (None,)  # one line per restart; None: none named
            for number, event in enumerate(fresh, start=1):
                line = restart_line(sample, event, latest=number == len(fresh) and not sample.error)
                events.append(Event(sample.timestamp, "apiserver-restarted", FAIL, "health", line))
        return events

    def _loader(self, sample: LoaderSample) -> list[Event]:
        state = sample.state
        if state == self._loader_state:
            return []
        previous, self._loader_state = self._loader_state, state
        source = sample.source
        if state == "running" and previous in (None, "idle", "done", "stopped"):
            return [Event(sample.timestamp, "loader-started", INFO, "loader", f"loading {source}")]
        if state in ("done", "stopped"):
            established = sample.established
            failed = sample.failed
            elapsed = finite_number(sample.elapsed_seconds)
            took = f" in {format_seconds(elapsed)}" if elapsed is not None else ""
            severity = WARN if failed else INFO
            return [Event(sample.timestamp, f"loader-{state}", severity, "loader",
                          f"loader {state}: {established:.0f} CRDs Established, {failed:.0f} failed{took}")]
        return []


#: A replica's figures name the replacement's start time only if it began this close to the restart
#: or after it (a replica not scraped since still shows the dead process's start).
REPLACEMENT_SECONDS = 60.0
#: Sources whose restart time is the death itself (a Lease's is when its new holder was first seen).
DEATH_SOURCES = (LAB_SUPERVISOR, KUBE_STATE_METRICS)


def restart_line(sample: HealthSample, event: RestartEvent | None, *, latest: bool = True) -> str:
    """``API server restarted: replica r2 (new process started 01:43:05)``.

    Where several API servers answer behind one address, the sample's own start time is the
    answering replica's, not the restarted one's: the line names the replica the restart's source
    names, and its new process's start time only where that is known (the process start time
    source's own, or the replica's figures once they show a process started after the restart).

    Several restarts seen at once (the server was away while a supervisor counted its deaths, the
    OOM drill's back-off) are one line each, each with its own death time; the process serving now
    replaced only the ``latest`` of them, so only that line names its start (it named all eight in
    the drill of bench/results/oom-drill-20261206, drill 2).
    """
    several = len(sample.replicas) > 1 or (sample.apiservers or 0) > 1
    replica = event.replica if event is not None else ""
    started: float | None = None
    if event is not None and event.source == START_TIME:
        started = event.at
    elif event is not None and replica:
        figures = next((r for r in sample.replicas if r.name == replica), None)
        if figures is not None and figures.start_time and figures.start_time >= event.at - REPLACEMENT_SECONDS:
            started = figures.start_time
    if started is None and not several and latest:
        current = finite_number(sample.start_time)
        # The serving process replaced this death only if it started after it (a clock's slack allowed).
        if current is not None and (event is None or current >= event.at - REPLACEMENT_SECONDS):
            started = current
    who = f": replica {replica}" if replica and several else ""
    details = []
    if event is not None and event.source in DEATH_SOURCES:
        details.append(f"died {_clock(event.at)}" + (", OOM-killed" if event.oom_killed else ""))
    if started:
        details.append(f"new process started {_clock(started)}")
    return f"API server restarted{who}" + (f" ({'; '.join(details)})" if details else "")


def _clock(at: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(at))
