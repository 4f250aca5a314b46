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
from crdscope.findings.kubectl import KubectlClient
from crdscope.findings.model import FindingChange, format_duration
from crdscope.base.samples import Sample

from .core import Taken, WatchCore, run_for
from .events import FAIL, Event
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
    """What a headless watch does with each sample its core took: events and findings to lines
    (and the recording), ``--fail-if`` thresholds to a stop.  The core keeps the samples (the
    metrics endpoint reads its store) and the findings."""

    def __init__(self, core: WatchCore, thresholds: Iterable[Threshold], *,
                 recorder: Any = None, out: TextIO | None = None) -> None:
        self.core = core
        self.thresholds = list(thresholds)
        self.holding = Holding()
        self.recorder = recorder
        self.out = out or sys.stdout
        self.crossing: Crossing | None = None
        self.events: list[Event] = []
        self.done = asyncio.Event()
        self.out_closed = False
        core.add_listener(self.taken)

    @property
    def findings(self) -> FindingsEngine:
        """The core's findings engine."""
        return self.core.findings

    @property
    def samples(self) -> int:
        """Samples the core took."""
        return self.core.samples

    def __call__(self, sample: Sample) -> None:
        """Hand a sample to the core (whose listener this sink is)."""
        self.core.take(sample)

    def taken(self, taken: Taken) -> None:
        """The core's listener: a line per event and finding change, then the thresholds."""
        sample = taken.sample
        self.record(sample)
        for event in taken.events:
            self.say(event.line())
            self.events.append(event)
            self.record(event)
        for change in taken.changes:  # one line as each finding opens and closes
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
        core = WatchCore(monitor, thresholds=settings.thresholds, cluster=info.context,
                         memory_limit=known_memory_limit(cluster.server, memory_limit))
        monitor.set_memory_limit(core.memory_limit)
        sink = HeadlessSink(core, thresholds, recorder=recorder, out=out)
        await core.learn_local_kubectl()
        if not memory_limit:  # a lab's cap can change while the watch runs
            follower = asyncio.create_task(follow_memory_limit(
                cluster.server, None, core.memory_limit, core.set_memory_limit), name="memory-limit")
            stack.callback(follower.cancel)
        if collector is not None:
            collector.watch(core)
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
        _, failure = await run_for(core, seconds, sink.done.wait(), stopped.wait())
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
        footprint = core.store.latest_of(FootprintSample)
        if footprint is not None:
            sink.say(one_line(footprint))
        return outcome
    finally:
        stack.close()
        await cluster.aclose()


def replay_headless(recording: Any, *, speed: float = 0.0, as_json: bool = False,
                    out: TextIO | None = None, kubectl: KubectlClient | None | bool = True) -> WatchCore:
    """``crdscope replay --headless``: play a recording as event lines (as the live watch prints
    them), or every sample and event as JSON lines; a closed pipe (``| head``) ends it quietly.

    Events and findings are re-derived from the samples by a core, the local kubectl included
    (``kubectl`` True: the one on PATH; a client: that one; None: none).  Returns the core.
    """
    import json

    from crdscope.base.settings import load_settings

    from .recorder import event_record, finding_record, sample_record
    from .replay import ReplayFeed

    out = out or sys.stdout
    log_to_file(errors_to_stderr=True)  # probe transitions are event lines already
    feed = ReplayFeed(recording, speed=speed)
    core = WatchCore(feed, thresholds=load_settings().thresholds, cluster=recording.cluster.context)
    closed: list[bool] = []
    playing: asyncio.Task[Any] | None = None

    def lines(taken: Taken) -> None:
        try:
            if as_json:
                print(json.dumps(sample_record(taken.sample)), file=out, flush=True)
            for event in taken.events:
                print(json.dumps(event_record(event)) if as_json else event.line(), file=out, flush=True)
            for change in taken.changes:
                print(json.dumps(finding_record(change)) if as_json else change.line(), file=out, flush=True)
        except BrokenPipeError:  # the reader has had enough
            closed.append(True)
            if playing is not None:
                playing.cancel()

    async def main() -> None:
        nonlocal playing
        playing = asyncio.current_task()
        if kubectl is True:
            await core.learn_local_kubectl()
        elif isinstance(kubectl, KubectlClient):
            core.know_kubectl(kubectl)
        try:
            await core.run()
        except asyncio.CancelledError:
            if not closed:
                raise

    core.add_listener(lines)
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
        return core
    if not as_json:
        span = (recording.end - recording.start) if recording.samples else 0.0
        print(f"replayed {len(recording.samples)} samples covering {format_duration(span)}"
              + ("" if recording.ended else " (the recording was not closed cleanly)"), file=out, flush=True)
    return core


def _discard_output(out: TextIO) -> None:
    """After a closed pipe, point the stream at /dev/null (as Python's docs advise) so that
    exiting does not complain about the unflushed rest."""
    import os

    with contextlib.suppress(OSError, ValueError, AttributeError):  # not a real file (tests)
        os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())


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
