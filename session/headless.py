"""``crdscope watch --headless``: the probes without a screen, for CI pipelines and fleets.

One line per notable event (:class:`session.events.EventDetector`) on stdout,
an optional recording, an optional Prometheus endpoint, and ``--fail-if``
thresholds: the watch ends with exit code 1 as soon as one is crossed, 0 when
``--duration`` runs out without a crossing, and 130 on Ctrl-C (or SIGTERM);
every path closes the recording and the endpoint first.  Bad flags (an unknown
``--fail-if`` field, a bad duration or address) fail with exit code 2 before
anything connects.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import signal
import sys
import time
from pathlib import Path
from typing import Any, TextIO
from collections.abc import Callable, Iterable

from crdscope.base.errors import CrdscopeError
from crdscope.base.logs import log_to_file
from crdscope.findings.engine import FindingsEngine
from crdscope.findings.model import FindingChange, format_duration
from crdscope.base.samples import Sample

from .events import FAIL, Event, EventDetector
from .durations import parse_duration
from .failif import FINDINGS, Holding, Threshold, parse_thresholds

@dataclasses.dataclass
class Crossing:
    """The threshold that ended the watch and the value that crossed it."""

    threshold: Threshold
    value: float
    timestamp: float

    def message(self) -> str:
        return f"threshold crossed: {self.threshold.text} ({self.threshold.name} = {self.value:g})"


class HeadlessSink:
    """The monitor sink of a headless watch: events and findings to lines (and the recording),
    samples to the metrics endpoint, ``--fail-if`` thresholds to a stop."""

    def __init__(self, detector: EventDetector, thresholds: Iterable[Threshold], *,
                 recorder: Any = None, collector: Any = None, out: TextIO | None = None,
                 findings: FindingsEngine | None = None) -> None:
        self.detector = detector
        self.thresholds = list(thresholds)
        self.findings = findings or FindingsEngine(detector.thresholds)
        self.holding = Holding()
        self.recorder = recorder
        self.collector = collector
        self.out = out or sys.stdout
        self.crossing: Crossing | None = None
        self.samples = 0
        self.events: list[Event] = []
        self.done = asyncio.Event()
        self.out_closed = False

    def __call__(self, sample: Sample) -> None:
        """The monitor sink."""
        self.samples += 1
        self.record(sample)
        if self.collector is not None:
            self.collector(sample)
        for event in self.detector.observe(sample):
            self.say(event.line())
            self.events.append(event)
            self.record(event)
        for change in self.findings.observe(sample):  # one line as each finding opens and closes
            self.say(change.line())
            self.record(change)
        if self.crossing is None:
            for threshold in self.thresholds:
                value = self.holding.crossed(threshold, self._value(threshold, sample), sample.timestamp)
                if value is not None:
                    self.crossing = Crossing(threshold, value, sample.timestamp)
                    event = Event(sample.timestamp, "threshold-crossed", FAIL, threshold.probe,
                                  self.crossing.message())
                    self.say(event.line())
                    self.record(event)
                    self.done.set()
                    break

    def _value(self, threshold: Threshold, sample: Sample) -> float | None:
        if threshold.probe != FINDINGS:
            return threshold.value(sample)
        counts = {severity.value: n for severity, n in self.findings.counts().items()}
        field = threshold.path[0]
        return float(sum(counts.values()) if field == "any" else counts[field])

    def record(self, item: Sample | Event | FindingChange) -> None:
        """Record a sample or an event; a failing disk stops the recording, not the watch."""
        if self.recorder is None:
            return
        try:
            self.recorder(item)
        except OSError as exc:
            self.say(f"recording stopped: cannot write {self.recorder.path}: {exc.strerror or exc}")
            self.recorder = None

    def say(self, line: str) -> None:
        """One line on stdout; a closed pipe (``| head``) ends the watch."""
        if self.out_closed:
            return
        try:
            print(line, file=self.out, flush=True)
        except BrokenPipeError:
            self.out_closed = True
            self.done.set()
            _discard_output(self.out)


def run_headless(kubeconfig: str | None = None, context: str | None = None, duration: str | None = None,
                 record: str | None = None, fail_if: Iterable[str] = (), serve_metrics: str | None = None,
                 prometheus_url: str | None = None, *, out: TextIO | None = None,
                 memory_limit: int | None = None, openapi_v2: bool = False) -> None:
    """Watch a cluster without a screen; raises :class:`CrdscopeError` (exit 1) when a threshold is crossed."""
    from crdscope.probes.cluster import Cluster
    from crdscope.base.settings import load_settings, with_openapi_v2

    from .exporter import parse_listen

    # Everything a person can get wrong is checked before anything connects or runs.
    seconds = parse_duration(duration) if duration else None
    thresholds = parse_thresholds(fail_if)
    listen = parse_listen(serve_metrics) if serve_metrics else None
    settings = with_openapi_v2(load_settings(), openapi_v2)
    if prometheus_url:
        settings = dataclasses.replace(settings, prometheus_url=prometheus_url)
    cluster = Cluster.connect(kubeconfig, context)
    out = out or sys.stdout
    log_to_file(errors_to_stderr=True)  # probe transitions are event lines already
    outcome = asyncio.run(_watch(cluster, settings, seconds, record, thresholds, listen, out, memory_limit))
    if outcome == "crossed":
        raise CrdscopeError("a --fail-if threshold was crossed", exit_code=1)
    if outcome == "interrupted":
        raise CrdscopeError("interrupted", exit_code=130)


async def _watch(cluster: Any, settings: Any, seconds: float | None, record: str | None,
                 thresholds: list[Threshold], listen: tuple[str, int] | None, out: TextIO,
                 memory_limit: int | None = None) -> str:
    from crdscope.probes.footprint import FootprintSample, one_line
    from crdscope.probes.monitor import Monitor

    from .exporter import MetricsServer, SampleCollector
    from .recorder import Recorder, describe_cluster

    collector = server = recorder = None
    stack = contextlib.ExitStack()
    stopped = asyncio.Event()
    started = time.monotonic()
    try:
        if listen is not None:  # a port in use fails before anything talks to the cluster
            collector = SampleCollector()
            server = MetricsServer(collector, *listen)
            stack.callback(server.close)
        from crdscope.probes.cluster import first_contact

        await first_contact(cluster)
        info = await describe_cluster(cluster)  # a frozen server: watched anyway, its version unknown
        if collector is not None:
            collector.cluster = info
        if record:
            recorder = Recorder(record, info)
            stack.callback(recorder.close)
        monitor = Monitor(cluster, settings)
        wire_lab(monitor)
        sink = HeadlessSink(EventDetector(settings.thresholds), thresholds, recorder=recorder,
                            collector=collector, out=out)
        await add_local_kubectl(sink.findings)
        observations = sink.findings.observations
        observations.memory_limit_bytes = known_memory_limit(cluster.server, memory_limit)
        monitor.set_memory_limit(observations.memory_limit_bytes)

        def new_limit(limit: int | None) -> None:
            observations.memory_limit_bytes = limit
            monitor.set_memory_limit(limit)

        if not memory_limit:  # a lab's cap can change while the watch runs
            follower = asyncio.create_task(follow_memory_limit(
                cluster.server, None, observations.memory_limit_bytes, new_limit), name="memory-limit")
            stack.callback(follower.cancel)
        if collector is not None:
            collector.findings = sink.findings.current
        monitor.add_sink(sink)
        version = info.kubernetes_version or "version unknown"
        sink.say(f"watching {info.server} ({version}, context {info.context}); probes: "
                  f"{', '.join(p.name for p in monitor.scheduler.probes)}"
                  + (f"; for {format_duration(seconds)}" if seconds else ""))
        if recorder is not None:
            sink.say(f"recording to {recorder.path}")
        if server is not None:
            sink.say(f"serving metrics on {server.url}")
        _install_signals(stopped.set)
        stack.callback(_remove_signals)
        running = asyncio.create_task(monitor.run(), name="monitor")
        waiters = [asyncio.create_task(sink.done.wait()), asyncio.create_task(stopped.wait())]
        done, _ = await asyncio.wait([running, *waiters], timeout=seconds,
                                     return_when=asyncio.FIRST_COMPLETED)
        for task in (running, *waiters):
            task.cancel()
        await asyncio.gather(running, *waiters, return_exceptions=True)
        failure = running.exception() if running in done and not running.cancelled() else None
        if failure is not None:
            raise failure
        elapsed = format_duration(time.monotonic() - started)
        if sink.crossing is not None:
            outcome = "crossed"
        elif stopped.is_set():
            outcome = "interrupted"
        else:
            outcome = "completed"
        sink.say(f"watch {outcome} after {elapsed}: {sink.samples} samples, {len(sink.events)} events"
                  + ("" if sink.crossing else ", no threshold crossed"))
        footprint = monitor.scheduler.latest.get("footprint")
        if isinstance(footprint, FootprintSample):
            sink.say(one_line(footprint))
        return outcome
    finally:
        stack.close()
        await cluster.aclose()


def replay_headless(recording: Any, *, speed: float = 0.0, as_json: bool = False,
                    out: TextIO | None = None) -> None:
    """``crdscope replay --headless``: play a recording as event lines (as the live watch prints
    them), or every sample and event as JSON lines; a closed pipe (``| head``) ends it quietly."""
    import json

    from crdscope.base.settings import load_settings

    from .recorder import event_record, finding_record, sample_record
    from .replay import ReplayFeed

    out = out or sys.stdout
    log_to_file(errors_to_stderr=True)  # probe transitions are event lines already
    detector = EventDetector(load_settings().thresholds)
    findings = FindingsEngine(detector.thresholds)  # re-derived from the samples, as events are
    feed = ReplayFeed(recording, speed=speed)
    closed: list[bool] = []
    playing: asyncio.Task[Any] | None = None

    def sink(sample: Sample) -> None:
        try:
            if as_json:
                print(json.dumps(sample_record(sample)), file=out, flush=True)
            for event in detector.observe(sample):
                print(json.dumps(event_record(event)) if as_json else event.line(), file=out, flush=True)
            for change in findings.observe(sample):
                print(json.dumps(finding_record(change)) if as_json else change.line(), file=out, flush=True)
        except BrokenPipeError:  # the reader has had enough
            closed.append(True)
            if playing is not None:
                playing.cancel()

    async def main() -> None:
        nonlocal playing
        playing = asyncio.current_task()
        try:
            await feed.run()
        except asyncio.CancelledError:
            if not closed:
                raise

    feed.add_sink(sink)
    cluster = recording.cluster
    if not as_json:
        print(f"replaying {recording.path} ({cluster.server}, {cluster.kubernetes_version or 'version unknown'})",
              file=out, flush=True)
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        raise CrdscopeError("interrupted", exit_code=130) from None
    if closed:
        _discard_output(out)
        return
    if not as_json:
        span = (recording.end - recording.start) if recording.samples else 0.0
        print(f"replayed {len(recording.samples)} samples covering {format_duration(span)}"
              + ("" if recording.ended else " (the recording was not closed cleanly)"), file=out, flush=True)


def _discard_output(out: TextIO) -> None:
    """After a closed pipe, point the stream at /dev/null (as Python's docs advise) so that
    exiting does not complain about the unflushed rest."""
    import os

    with contextlib.suppress(OSError, ValueError, AttributeError):  # not a real file (tests)
        os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())


async def add_local_kubectl(engine: FindingsEngine) -> None:
    """Let the findings judge discovery as the local kubectl lives it (its version read in a thread)."""
    from crdscope.findings.kubectl import kubectl_check, read_local_kubectl

    engine.observations.kubectl = await asyncio.to_thread(read_local_kubectl)
    if engine.observations.kubectl is not None:
        engine.checks.append(kubectl_check)


def known_memory_limit(server: str, explicit: int | None = None, lab_home: Path | None = None) -> int | None:
    """The API server's memory limit: the one given (``--memory-limit``), else the lab's cap when
    ``server`` is a capped crdscope lab, else None (unknown: no headroom finding)."""
    if explicit:
        return explicit
    try:
        from crdscope.lab.lookup import lab_memory_limit
    except ImportError:
        return None
    return lab_memory_limit(server, lab_home)


#: How often a running monitor re-reads a crdscope lab's memory cap (``crdscope lab limit`` resizes it live).
LIMIT_REFRESH_SECONDS = 5.0


async def follow_memory_limit(server: str, lab_home: Path | None, known: int | None,
                              apply: Callable[[int | None], None], *,
                              every: float = LIMIT_REFRESH_SECONDS) -> None:
    """Tell ``apply`` each new memory limit of the lab serving ``server`` until cancelled.

    ``crdscope lab limit`` changes a lab's cap under a running monitor, as a provider resizes a
    control plane; ``known`` is the limit the caller already uses.  Only a capped lab's cap can
    change (``lab limit`` refuses an uncapped one), so with ``known`` None, or ``server`` no lab,
    this returns at once.  The lab is found once; each turn reads its state file alone, in a
    thread: a slow disk never holds the event loop.  Callers given ``--memory-limit`` do not follow.
    """
    if known is None:
        return
    from crdscope.lab.lookup import lab_for_server, lab_memory_limit

    found = await asyncio.to_thread(lab_for_server, server, lab_home)
    if found is None:
        return
    home = found[0].home
    while True:
        await asyncio.sleep(every)  # a cadence, not a wait for a condition
        try:
            now = await asyncio.to_thread(lab_memory_limit, server, home)
        except Exception:  # noqa: BLE001 - an unreadable state file keeps the limit already known
            continue
        if now != known:
            known = now
            apply(now)


def wire_lab(monitor: Any, lab_home: Path | None = None) -> None:
    """When the monitor watches crdscope's lab, give the health probe the lab's etcd connection count
    and its supervisor's account of restarts.

    The health probe reads ``monitor.shared.lab_etcd_connections`` (a callable) if set;
    only lab-aware callers (the headless watch, the TUI's ``build_app``) set it, since
    probes never import ``lab``.  ``lab_home`` is the lab's directory when the caller
    holds the lab (``crdscope lab``); otherwise the default lab's is looked up.
    """
    try:
        from crdscope.lab.sockets import etcd_connection_counter
    except ImportError:
        return
    from crdscope.lab.restarts import restart_reader

    counter: Callable[[], Any] | None = etcd_connection_counter(monitor.cluster.server, lab_home)
    if counter is not None:
        monitor.shared.lab_etcd_connections = counter
    monitor.shared.lab_restarts = restart_reader(monitor.cluster.server, lab_home)


def _install_signals(callback: Callable[[], None]) -> None:
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signum, callback)


def _remove_signals() -> None:
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.remove_signal_handler(signum)
