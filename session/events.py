"""Transitions worth a person's attention, derived from samples: the events log.

:class:`EventDetector` watches the samples of every probe and yields an
:class:`Event` once per *transition* (the API server restarted, readyz started
failing, 429s began...), never once per sample: a server that stays down for
ten minutes is one "down" event and one "recovered" event.  The TUI's events
panel, the headless watcher and the recorder all use it; an event's timestamp
is the timestamp of the sample that revealed it, so replaying a recording
yields the same events as the live session did.

Each probe's figures are read as attributes of its sample class (a type checker
sees them); a figure the probe reports as unobservable (``None``) raises no event.
Samples of other classes (a probe this detector does not know) only count for
probe down / recovered.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable
from typing import Any, Literal

from crdscope.base.samples.loader import LoaderSample
from crdscope.base.samples.discovery import ClientModel, DiscoverySample
from crdscope.base.restarts import KUBE_STATE_METRICS, LAB_SUPERVISOR, START_TIME, RestartEvent
from crdscope.base.samples.health import HealthSample
from crdscope.base.samples.latency import LatencySample
from crdscope.base.samples.openapi import OpenAPISample
from crdscope.base.samples import Sample
from crdscope.base.settings import Thresholds
from crdscope.findings.model import format_duration as format_seconds  # one formatter for events and findings
from crdscope.base.samples.throttling import ThrottlingSample

from .values import finite_number

#: How bad an event is: the events panel colours by it, ``--fail-if``-style checks count by it.
Severity = Literal["info", "warn", "fail"]
INFO: Severity = "info"
WARN: Severity = "warn"
FAIL: Severity = "fail"
SEVERITIES: tuple[Severity, ...] = (INFO, WARN, FAIL)

#: The kubectl >= 1.24 client model (QPS 50, burst 300): the discovery budget people feel.
KUBECTL_124_QPS, KUBECTL_124_BURST = 50.0, 300.0
#: Consecutive rises of the OpenAPI backlog that count as "growing" below the warn threshold.
BACKLOG_RISES = 2


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


class EventDetector:
    """Turns a stream of samples (any probe, any order) into transition events."""

    def __init__(self, thresholds: Thresholds | None = None) -> None:
        self.thresholds = thresholds or Thresholds()
        self._probes: dict[str, _ProbeState] = {}
        self._restarts: float | None = None
        self._start_time: float | None = None
        self._ready: bool | None = None
        self._throttled = False
        self._responses_429: float | None = None
        self._over_budget = False
        self._backlog: float | None = None
        self._backlog_rises = 0
        self._backlog_growing = False
        self._breaches: dict[str, str] = {}
        self._loader_state: str | None = None

    def observe(self, sample: Sample) -> list[Event]:
        """The events this sample reveals (usually none)."""
        probe = type(sample).probe
        events = self._availability(probe, sample)
        if sample.error:
            # A failed sample's figures are defaults, not observations, except those a source outside
            # the server keeps counting while it is away (a supervisor's deaths: the OOM drill's server
            # never answered between its deaths, and drill 1 printed none of its nine restarts).
            if isinstance(sample, HealthSample):
                events += self._restarts_seen(sample)
            return events
        if isinstance(sample, HealthSample):
            events += self._health(sample)
        elif isinstance(sample, ThrottlingSample):
            events += self._throttling(sample)
        elif isinstance(sample, DiscoverySample):
            events += self._discovery(sample)
        elif isinstance(sample, OpenAPISample):
            events += self._openapi(sample)
        elif isinstance(sample, LatencySample):
            events += self._latency(sample)
        elif isinstance(sample, LoaderSample):
            events += self._loader(sample)
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

    # -- per probe ---------------------------------------------------------------------
    def _health(self, sample: HealthSample) -> list[Event]:
        events = self._restarts_seen(sample)
        ready = sample.ready
        if ready is not None:
            if not ready and self._ready is not False:
                failing = _first_few(list(sample.failing_checks)) or "no check named"
                events.append(Event(sample.timestamp, "readyz-failing", FAIL, "health",
                                    f"readyz failing: {failing}"))
            elif ready and self._ready is False:
                events.append(Event(sample.timestamp, "readyz-recovered", INFO, "health", "readyz ok again"))
            self._ready = ready
        return events

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

    def _throttling(self, sample: ThrottlingSample) -> list[Event]:
        rejecting = []
        for level in sample.priority_levels:
            rate = finite_number(level.rejected_per_s)
            if rate:
                rejecting.append(f"{level.name} {rate:.1f}/s")
        seen = float(sample.responses_429.total)
        new_429 = self._responses_429 is not None and seen > self._responses_429
        self._responses_429 = seen
        throttled = bool(rejecting) or new_429
        if throttled == self._throttled:
            return []
        self._throttled = throttled
        if throttled:
            where = f"APF rejecting at {', '.join(rejecting)}" if rejecting else "crdscope received 429s"
            return [Event(sample.timestamp, "throttling-began", WARN, "throttling", f"429s began: {where}")]
        return [Event(sample.timestamp, "throttling-stopped", INFO, "throttling", "429s stopped")]

    def _discovery(self, sample: DiscoverySample) -> list[Event]:
        seconds = kubectl_124_seconds(sample.client_models)
        if seconds is None:
            return []
        budget = self.thresholds.discovery_seconds_warn
        over = seconds > budget
        if over == self._over_budget:
            return []
        self._over_budget = over
        if over:
            return [Event(sample.timestamp, "discovery-over-budget", WARN, "discovery",
                          f"discovery over budget: kubectl 1.24+ would take {seconds:.1f} s (> {budget:g} s)")]
        return [Event(sample.timestamp, "discovery-within-budget", INFO, "discovery",
                      f"discovery within budget again: kubectl 1.24+ {seconds:.1f} s")]

    def _openapi(self, sample: OpenAPISample) -> list[Event]:
        backlog = float(sample.backlog)
        previous, self._backlog = self._backlog, backlog
        self._backlog_rises = self._backlog_rises + 1 if previous is not None and backlog > previous else 0
        warn = self.thresholds.openapi_backlog_warn
        if not self._backlog_growing and backlog > 0 and (backlog >= warn or self._backlog_rises >= BACKLOG_RISES):
            self._backlog_growing = True
            severity = WARN if backlog >= warn else INFO
            return [Event(sample.timestamp, "openapi-backlog-growing", severity, "openapi",
                          f"OpenAPI backlog growing: {backlog:.0f} CRDs Established but not yet published")]
        if self._backlog_growing and backlog == 0:
            self._backlog_growing = False
            return [Event(sample.timestamp, "openapi-backlog-drained", INFO, "openapi", "OpenAPI backlog drained")]
        return []

    def _latency(self, sample: LatencySample) -> list[Event]:
        now = {key: breach_text(key, sample) for key in sample.slo_breaches}
        for name in sample.canary_slo_breaches:
            canary = sample.canaries.get(name)
            p99 = finite_number(canary.p99_seconds) if canary else None
            slo = finite_number(canary.slo_seconds) if canary else None
            figures = f" p99 {p99:.2f} s > {slo:g} s" if p99 is not None and slo is not None else ""
            now[f"canary {name}"] = f"canary {name}{figures}"
        events = [Event(sample.timestamp, "latency-slo-breached", WARN, "latency", f"latency SLO breached: {text}")
                  for key, text in now.items() if key not in self._breaches]
        events += [Event(sample.timestamp, "latency-slo-recovered", INFO, "latency", f"latency SLO met again: {key}")
                   for key in self._breaches if key not in now]
        self._breaches = now
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


def kubectl_124_seconds(models: Iterable[ClientModel]) -> float | None:
    """Seconds of the kubectl >= 1.24 client model among a discovery sample's (None when absent)."""
    models = list(models)
    for model in models:
        if model.qps == KUBECTL_124_QPS and model.burst == KUBECTL_124_BURST:
            return finite_number(model.seconds)
    for model in models:
        if "kubectl" in model.name and "1.24" in model.name:
            return finite_number(model.seconds)
    return None


def breach_text(key: str, sample: LatencySample) -> str:
    """A breach (``"VERB scope"``) as a person reads it, with p99 against the SLO when the sample has them."""
    p99 = finite_number(sample.p99_by_verb_scope.get(key))
    slo = finite_number(sample.slo_seconds.get(key))
    if p99 is not None and slo is not None:
        return f"{key} p99 {p99:.2f} s > {slo:g} s"
    return key


def _first_few(names: list[str], shown: int = 3) -> str:
    """``a, b, c (+4 more)``: a restarting server fails a dozen checks at once."""
    more = f" (+{len(names) - shown} more)" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more
