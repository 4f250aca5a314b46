"""Benchmark: how soon a frozen API server is the critical finding "API server not answering" (issue 27).

``python -m bench hang [--runs 20] [--size 300] [--kubernetes MINOR] [--rest-seconds 120]``: a fresh
lab (default: the newest Kubernetes) watched by two in-process monitors side by side, each a live
core as every front end opens it (``session.live.open_live_core``: every default probe and a
findings engine), on their own shared clients:

- ``ping``: the default settings (an HTTP/2 PING every second, ``thresholds.ping_unanswered_seconds_critical``);
- ``heartbeat``: ``cadences.responsiveness_ping = 0``, the behaviour before issue 27 (a /livez
  heartbeat after 2 s of silence, 4 s once all is quiet; the 5 s rule alone).

The first ``--size`` CRDs of the AWS set (``../shared/crds/provider-aws.tar.xz``) are installed
with kubectl while both watch: the PING's round trips and longest wait during the install tell how
far the threshold is from a busy server's answers (and whether "not answering" opened falsely).
Once the server is idle and both monitors are quiet (no CRD change for ``cadences.settle`` s), a
window of ``--rest-seconds`` counts each monitor's requests by origin (the request rate change).

Then ``--runs`` times: a random phase of 0-3 s, SIGSTOP (``Lab.stop``), the seconds until each
monitor's engine opens ``apiserver-not-answering`` (time.monotonic() at the engine's sink, the
monitor's own clock), SIGCONT once both opened (or after 30 s), then until both closed and the
monitors settled again (nothing in flight, PINGs answered, then 5 s).  Reported: p50, p90 and max
per monitor, the ratio of the two per run, and "not answering" opened outside the freezes (false
alarms).  Goals: the PING monitor's p50 and max under 5 s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from crdscope.findings.checks import NOT_ANSWERING
from crdscope.findings.model import CLOSED, OPENED, FindingChange
from crdscope.lab.binaries import ensure_binaries
from crdscope.lab.controlplane import Lab, LabState
from crdscope.connection.cluster import Cluster
from crdscope.base.errors import CrdscopeError
from crdscope.base.samples.responsiveness import ResponsivenessSample
from crdscope.base.samples import Sample, percentile
from crdscope.base.settings import Settings
from crdscope.session.live import open_live_core

from .common import BenchError, Options, Result, append_row, isolate_environment, say, size_label
from .labs import apply_and_wait, memory_for, wait_for_memory, wait_until_idle
from .versions import SET, first_crds

DEFAULT_RUNS = 20
DEFAULT_SIZE = 300
REST_SECONDS = 120.0
#: A run's random phase before the stop: the freeze falls anywhere in the PING's 1 s and the
#: heartbeat's 4 s of silence.
PHASE_SECONDS = 3.0
#: The freeze ends after both monitors opened the finding, or after this long (a miss).
FREEZE_TIMEOUT = 30.0
CLOSE_TIMEOUT = 90.0
#: After the close, and once nothing is in flight, the monitors rest this long before the next run.
SETTLE_SECONDS = 5.0
#: The goal (issue 27): a hang shown within 5 s, p50 and max.
GOAL_SECONDS = 5.0


class Watcher:
    """One in-process live core (as every front end opens it); remembers when "not answering" opened
    and closed."""

    def __init__(self, name: str, state: LabState, settings: Settings) -> None:
        self.name = name
        self.cluster = Cluster.connect(state.kubeconfig, state.admin_context)
        self.live = open_live_core(self.cluster, settings)
        self.monitor = self.live.monitor
        self.core = self.live.core
        self.monitor.add_sink(self._sample)
        self.core.add_listener(lambda taken: [self._change(change) for change in taken.changes])
        #: (time.monotonic(), the change) of every "not answering" transition.
        self.changes: list[tuple[float, FindingChange]] = []
        self.latest: ResponsivenessSample | None = None
        #: (time.monotonic(), round trip) of every PING answer the samples saw, once each.
        self.rtts: list[tuple[float, float]] = []
        #: (time.monotonic(), the PING's wait) of every sample.
        self.waits: list[tuple[float, float]] = []
        self._answers = 0
        self.task: asyncio.Task[None] | None = None

    def _sample(self, sample: Sample) -> None:
        if not isinstance(sample, ResponsivenessSample):
            return
        self.latest = sample
        now = time.monotonic()
        if sample.ping_waiting_seconds is not None:
            self.waits.append((now, sample.ping_waiting_seconds))
        ping = self.monitor.probe("responsiveness").ping
        status = ping.status() if ping is not None else None
        # A sample repeats the latest answer's round trip until the next one: count each answer once.
        if status is not None and status.answers > self._answers and status.rtt_seconds is not None:
            self._answers = status.answers
            self.rtts.append((now, status.rtt_seconds))

    def ping_connections(self) -> int | None:
        """Connections the PING opened so far (one more each time the server closes an idle one)."""
        ping = self.monitor.probe("responsiveness").ping
        return ping.status().connections if ping is not None else None

    def _change(self, change: FindingChange) -> None:
        if change.finding.id == NOT_ANSWERING:
            self.changes.append((time.monotonic(), change))

    def start(self) -> None:
        self.task = asyncio.create_task(self.live.run(), name=f"monitor-{self.name}")

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(BaseException):
                await self.task
        await self.cluster.aclose()

    def opened_since(self, since: float) -> tuple[float, FindingChange] | None:
        return next(((t, c) for t, c in self.changes if t >= since and c.change == OPENED), None)

    def closed_since(self, since: float) -> tuple[float, FindingChange] | None:
        return next(((t, c) for t, c in self.changes if t >= since and c.change == CLOSED), None)

    def is_open(self) -> bool:
        return NOT_ANSWERING in self.core.findings.open

    def settled(self) -> bool:
        """Nothing of its own in flight and, where PINGs are used, the latest one answered."""
        sample = self.latest
        if sample is None or sample.in_flight or self.is_open():
            return False
        return sample.ping_state in ("", "off", "unsupported", "answering")

    def own_requests(self) -> dict[str, int]:
        """Requests so far by origin (the scheduler's probe names, metrics, crd-watch)."""
        counts: dict[str, int] = {}
        for (origin, _), tally in self.cluster.traffic.by_origin_and_path().items():
            counts[origin] = counts.get(origin, 0) + tally.requests
        return counts


async def until(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll ``predicate`` every 50 ms until it is truthy; BenchError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise BenchError(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(0.05)


def distribution(values: list[float]) -> dict[str, float | int | None]:
    """n, p50, p90, max (linear interpolation, as the probes' percentiles)."""
    return {"n": len(values), "p50": _round(percentile(values, 50)), "p90": _round(percentile(values, 90)),
            "max": _round(max(values)) if values else None}


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def ping_figures(watcher: Watcher, start: float, end: float) -> dict[str, Any]:
    """The PING's round trips (ms) and longest wait (s) within a window."""
    rtts = [rtt * 1000 for at, rtt in watcher.rtts if start <= at <= end]
    waits = [waiting for at, waiting in watcher.waits if start <= at <= end]
    in_ms = {k: (_round(v, 2) if isinstance(v, float) else v)
             for k, v in {**distribution(rtts), "p99": percentile(rtts, 99)}.items()}
    return {"rtt_ms": in_ms, "longest_wait_s": _round(max(waits)) if waits else None}


async def measure(state: LabState, lab: Lab, directory: Path, runs: int, rest_seconds: float) -> dict[str, Any]:
    """Both monitors through the install, the rest window and the runs; the raw figures."""
    settings = Settings()
    watchers = {"ping": Watcher("ping", state, settings),
                "heartbeat": Watcher("heartbeat", state, settings.override("cadences", responsiveness_ping=0.0))}
    figures: dict[str, Any] = {"threshold_s": settings.thresholds.ping_unanswered_seconds_critical,
                               "ping_interval_s": settings.cadences.responsiveness_ping}
    for watcher in watchers.values():
        watcher.start()
    try:
        await until(lambda: all(w.latest is not None for w in watchers.values()), 60, "the first samples")
        say(f"hang: installing {len(list(directory.glob('*.yaml')))} CRDs while both monitors watch")
        install_started = time.monotonic()
        await asyncio.to_thread(apply_and_wait, state, directory)
        install_ended = time.monotonic()
        figures["install"] = {"seconds": round(install_ended - install_started, 1),
                              **ping_figures(watchers["ping"], install_started, install_ended),
                              "false_openings": {n: len([1 for t, c in w.changes if c.change == OPENED])
                                                 for n, w in watchers.items()}}
        await asyncio.to_thread(wait_until_idle, state)
        say("hang: waiting until both monitors are quiet (no CRD change for cadences.settle)")
        await until(lambda: all(w.monitor.quiet() for w in watchers.values()), settings.cadences.settle + 120,
                    "quiet monitors")
        say(f"hang: counting each monitor's requests at rest for {rest_seconds:.0f} s")
        before = {n: w.own_requests() for n, w in watchers.items()}
        connections = watchers["ping"].ping_connections() or 0
        rest_started = time.monotonic()
        await asyncio.sleep(rest_seconds)  # deliberate: the rest window is measured
        rest_ended = time.monotonic()
        rest = rest_ended - rest_started
        figures["rest"] = {"seconds": round(rest, 1), **ping_figures(watchers["ping"], rest_started, rest_ended),
                           "ping_connections": (watchers["ping"].ping_connections() or 0) - connections,
                           "requests_per_minute": {n: _per_minute(before[n], w.own_requests(), rest)
                                                   for n, w in watchers.items()}}
        runs_started = time.monotonic()
        figures["runs"] = [await one_run(i, lab, watchers) for i in range(1, runs + 1)]
        # Openings outside every freeze (from the first stop on) are false alarms.
        windows = [(r["stopped"], r["resumed"]) for r in figures["runs"]]
        figures["false_openings_between_runs"] = {
            n: len([1 for t, c in w.changes if c.change == OPENED and t >= runs_started
                    and not any(start <= t <= end for start, end in windows)]) for n, w in watchers.items()}
    finally:
        with contextlib.suppress(CrdscopeError):
            lab.start("apiserver")  # never leave the lab frozen
        for watcher in watchers.values():
            await watcher.stop()
    return figures


def _per_minute(before: dict[str, int], after: dict[str, int], seconds: float) -> dict[str, float]:
    rates = {origin: round((count - before.get(origin, 0)) * 60 / seconds, 2) for origin, count in after.items()}
    rates = {origin: rate for origin, rate in sorted(rates.items()) if rate}
    return {"total": round(sum(rates.values()), 2), **rates}


async def one_run(index: int, lab: Lab, watchers: dict[str, Watcher]) -> dict[str, Any]:
    """One freeze: the seconds until each monitor opened "not answering", and until each closed it."""
    phase = random.uniform(0.0, PHASE_SECONDS)
    await asyncio.sleep(phase)  # deliberate: a random phase against every cadence
    stopped = time.monotonic()
    lab.stop("apiserver")  # SIGSTOP: reads the small state file, sends the signal
    try:
        with contextlib.suppress(BenchError):  # a monitor that never opens it is a miss, recorded as None
            await until(lambda: all(w.opened_since(stopped) for w in watchers.values()), FREEZE_TIMEOUT,
                        "both monitors to open not answering")
    finally:
        resumed = time.monotonic()
        lab.start("apiserver")  # SIGCONT
    record: dict[str, Any] = {"run": index, "phase_s": round(phase, 2), "frozen_s": round(resumed - stopped, 2),
                              "stopped": stopped, "resumed": resumed}
    for name, watcher in watchers.items():
        opened = watcher.opened_since(stopped)
        record[f"{name}_detect_s"] = round(opened[0] - stopped, 3) if opened else None
        record[f"{name}_by_ping"] = bool(opened) and opened[1].finding.evidence[0].startswith(
            "responsiveness.ping_waiting_seconds")
    await until(lambda: all(w.closed_since(resumed) or not w.is_open() for w in watchers.values()), CLOSE_TIMEOUT,
                "both monitors to close not answering")
    for name, watcher in watchers.items():
        closed = watcher.closed_since(resumed)
        record[f"{name}_close_s"] = round(closed[0] - resumed, 3) if closed else None
    await until(lambda: all(w.settled() for w in watchers.values()), CLOSE_TIMEOUT, "the monitors to settle")
    await asyncio.sleep(SETTLE_SECONDS)  # deliberate: the monitors rest before the next freeze
    say(f"hang: run {index}: phase {phase:.2f} s, detected after " + ", ".join(
        f"{name} {record[f'{name}_detect_s']} s" for name in watchers))
    return record


def summarise(raw: dict[str, Any]) -> tuple[dict[str, Any], dict[str, bool | None], list[str]]:
    """Figures, goals and notes of the result from the raw measurements."""
    runs = raw["runs"]
    figures: dict[str, Any] = {}
    for name in ("ping", "heartbeat"):
        detected = [r[f"{name}_detect_s"] for r in runs if r[f"{name}_detect_s"] is not None]
        figures[f"{name}_detect_s"] = distribution(detected)
        figures[f"{name}_missed"] = len(runs) - len(detected)
        closed = [r[f"{name}_close_s"] for r in runs if r[f"{name}_close_s"] is not None]
        figures[f"{name}_close_s"] = distribution(closed)
    ratios = [r["ping_detect_s"] / r["heartbeat_detect_s"] for r in runs
              if r["ping_detect_s"] is not None and r["heartbeat_detect_s"]]
    figures["ping_vs_heartbeat"] = distribution(ratios)
    figures["ping_opened_by_ping"] = sum(1 for r in runs if r["ping_by_ping"])
    rates = raw["rest"]["requests_per_minute"]
    figures["requests_per_minute_at_rest"] = {n: rates[n]["total"] for n in rates}
    # The legacy discovery walk runs once after an install settles (2+N requests): the same in both.
    figures["requests_per_minute_at_rest_without_walk"] = {
        n: round(rates[n]["total"] - rates[n].get("discovery-walk", 0.0), 2) for n in rates}
    figures["responsiveness_requests_per_minute_at_rest"] = {n: rates[n].get("responsiveness", 0.0) for n in rates}
    figures["rtt_ms_install"] = raw["install"]["rtt_ms"]
    figures["longest_wait_s_install"] = raw["install"]["longest_wait_s"]
    figures["rtt_ms_rest"] = raw["rest"]["rtt_ms"]
    figures["ping_connections_at_rest"] = raw["rest"]["ping_connections"]
    figures["false_openings_install"] = raw["install"]["false_openings"]
    figures["false_openings_between_runs"] = raw["false_openings_between_runs"]
    ping = figures["ping_detect_s"]
    goals = {f"PING p50 < {GOAL_SECONDS:g} s": None if ping["p50"] is None else ping["p50"] < GOAL_SECONDS,
             f"PING max < {GOAL_SECONDS:g} s": None if ping["max"] is None or figures["ping_missed"]
             else ping["max"] < GOAL_SECONDS}
    notes = [f"threshold {raw['threshold_s']:g} s, a PING every {raw['ping_interval_s']:g} s; both monitors watch the "
             "same freezes side by side, each on its own client"]
    return figures, goals, notes


def _short(value: Any) -> Any:
    """``{"n": 20, "p50": 3.4, "p90": 3.9, "max": 3.9}`` -> ``p50 3.4 / p90 3.9 / max 3.9 (n 20)``."""
    if isinstance(value, dict) and {"p50", "p90", "max"} <= set(value):
        return f"p50 {value['p50']} / p90 {value['p90']} / max {value['max']} (n {value['n']})"
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    return value


def main(argv: list[str] | None = None) -> int:
    """``python -m bench hang [--runs N] [--size N] [--kubernetes MINOR] [--rest-seconds S]``."""
    parser = argparse.ArgumentParser(prog="python -m bench hang", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS, help=f"freezes [default: {DEFAULT_RUNS}]")
    parser.add_argument("--size", type=int, default=DEFAULT_SIZE,
                        help=f"the first N CRDs of the AWS set [default: {DEFAULT_SIZE}]")
    parser.add_argument("--kubernetes", default=None, metavar="MINOR", help="[default: the newest]")
    parser.add_argument("--rest-seconds", type=float, default=REST_SECONDS,
                        help=f"the window that counts requests at rest [default: {REST_SECONDS:.0f}]")
    parser.add_argument("--output", type=Path, default=None, help="directory of the JSON results")
    parser.add_argument("--no-results-md", action="store_true", help="do not append to bench/RESULTS.md")
    args = parser.parse_args(argv)
    options = Options(append_results_md=not args.no_results_md)
    if args.output:
        options.output = args.output
    isolate_environment()
    directory = first_crds(args.size)
    total = len(list(directory.glob("*.yaml")))
    wait_for_memory(memory_for(total, total))
    binaries = ensure_binaries(kubernetes=args.kubernetes, progress=say)
    with tempfile.TemporaryDirectory(prefix="crdscope-bench-hang-") as home:
        lab = Lab(Path(home) / "lab")
        state = lab.up(binaries, say=say)
        try:
            wait_until_idle(state)
            raw = asyncio.run(measure(state, lab, directory, max(1, args.runs), args.rest_seconds))
        finally:
            lab.down()
    figures, goals, notes = summarise(raw)
    result = Result("hang", state.kubernetes_version, size_label(SET, args.size, total), figures, goals, notes)
    # The JSON keeps every run; RESULTS.md's row gets the distributions in one short line each.
    path = result.write(dataclasses.replace(options, append_results_md=False))
    document = json.loads(path.read_text())
    document["raw"] = raw
    path.write_text(json.dumps(document, indent=2, default=str))
    if options.append_results_md:
        append_row({**document, "figures": {k: _short(v) for k, v in figures.items()}})
    print(json.dumps({"benchmark": "hang", "kubernetes": result.kubernetes, "sizes": result.sizes,
                      "result": str(path), "figures": figures, "goals": goals}, indent=2), flush=True)
    return 0
