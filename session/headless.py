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
import ssl
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO
from collections.abc import Callable, Iterable, Sequence

from crdscope.base.errors import ClusterError, ConfigError, CrdscopeError
from crdscope.base.logs import log_to_file
from crdscope.findings.engine import FindingsEngine, check_silences
from crdscope.findings.kubectl import KubectlClient
from crdscope.findings.model import format_duration
from crdscope.base.samples import Sample

from .core import Taken, WatchCore, run_each
from .events import FAIL, Event
from .durations import parse_duration
from .failif import FINDINGS, Holding, Threshold, parse_thresholds

if TYPE_CHECKING:  # the live wiring (probes, the connection) is imported when a watch starts
    from crdscope.base.settings import Settings
    from crdscope.connection.cluster import Cluster

    from .exporter import MetricsServer, SampleCollector
    from .live import LiveCore, TakenRecorder
    from .recorder import ClusterInfo, Recorder
    from .replay import Recording
    from .viewserver import ViewServer
    from .viewstream import ViewHub

@dataclasses.dataclass
class Crossing:
    """The threshold that ended the watch and the value that crossed it."""

    threshold: Threshold
    value: float
    timestamp: float

    def message(self) -> str:
        return f"threshold crossed: {self.threshold.text} ({self.threshold.name} = {self.value:g})"


class HeadlessSink:
    """What a headless watch does with each sample its core took: events and findings to lines,
    ``--fail-if`` thresholds to a stop (the crossing recorded with the rest).  The core keeps the
    samples (the metrics endpoint reads its store) and the findings."""

    def __init__(self, core: WatchCore, thresholds: Iterable[Threshold], *,
                 recording: TakenRecorder | None = None, out: TextIO | None = None, label: str = "") -> None:
        self.core = core
        #: Prefixed to each line (the context, in a fleet), so interleaved clusters stay readable.
        self.label = label
        self.thresholds = list(thresholds)
        self.holding = Holding()
        self.recording = recording
        if recording is not None:
            recording.on_failure = self.recording_failed
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

    def taken(self, taken: Taken) -> None:
        """The core's listener: a line per event and finding change, then the thresholds."""
        sample = taken.sample
        for event in taken.events:
            self.say(event.line())
            self.events.append(event)
        for change in taken.changes:  # one line as each finding opens and closes
            self.say(change.line())
        if self.crossing is None:
            for threshold in self.thresholds:
                value = self.holding.crossed(threshold, self._value(threshold, sample), sample.timestamp)
                if value is not None:
                    self.crossing = Crossing(threshold, value, sample.timestamp)
                    event = Event(sample.timestamp, "threshold-crossed", FAIL, threshold.probe,
                                  self.crossing.message())
                    self.say(event.line())
                    if self.recording is not None:
                        self.recording.record(event)
                    self.done.set()
                    break

    def _value(self, threshold: Threshold, sample: Sample) -> float | None:
        if threshold.probe != FINDINGS:
            return threshold.value(sample)
        counts = {severity.value: n for severity, n in self.findings.counts().items()}
        field = threshold.path[0]
        return float(sum(counts.values()) if field == "any" else counts[field])

    def recording_failed(self, recorder: Recorder, exc: Exception) -> None:
        """A failing disk stops the recording, not the watch: one line says so."""
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        self.say(f"recording stopped: cannot write {recorder.path}: {why}")

    def say(self, line: str, *, plain: bool = False) -> None:
        """One line on stdout (after the sink's label unless ``plain``); a closed pipe (``| head``)
        ends the watch."""
        if self.out_closed:
            return
        try:
            print(f"{self.label}: {line}" if self.label and not plain else line, file=self.out, flush=True)
        except BrokenPipeError:
            self.out_closed = True
            self.done.set()
            _discard_output(self.out)


#: How long a headless watch asks a cluster that does not answer at start before it gives up (exit 3),
#: unless ``--wait-for-cluster`` says otherwise.
WAIT_FOR_CLUSTER_SECONDS = 10.0


@dataclasses.dataclass(frozen=True)
class WatchPlan:
    """What a headless watch does, every flag checked before anything connects."""

    seconds: float | None
    record: str | None
    thresholds: list[Threshold]
    listen: tuple[str, int] | None
    out: TextIO
    memory_limit: int | None = None
    view: ViewOptions | None = None
    #: ``--context`` spelled out: a viewer's load or clean may write to that cluster (as `load` would).
    contexts_named: bool = False
    #: How long to ask a cluster that does not answer at start (``--wait-for-cluster``).
    wait_seconds: float = WAIT_FOR_CLUSTER_SECONDS
    #: ``--wait-for-cluster`` given: the wait is said as it begins (it may be long).
    wait_given: bool = False


def run_headless(kubeconfig: str | None = None, context: str | None = None, duration: str | None = None,
                 record: str | None = None, fail_if: Iterable[str] = (), serve_metrics: str | None = None,
                 prometheus_url: str | None = None, *, out: TextIO | None = None,
                 memory_limit: int | None = None, openapi_v2: bool = False,
                 contexts: Sequence[str] = (), view: ViewOptions | None = None,
                 wait_for_cluster: str | None = None) -> None:
    """Watch a cluster without a screen; raises :class:`CrdscopeError` (exit 1) when a threshold is crossed.

    ``contexts`` (two or more) watches a fleet from one process: one core, probe set and (with
    ``record``) recording per cluster, one metrics endpoint whose series carry ``cluster``, each
    line prefixed with its context; a threshold crossed in any cluster ends the watch.

    ``view`` (``--serve-view``): serve every cluster's stream to viewers (``crdscope attach``).

    A cluster that never answers at start (``wait_for_cluster``, default 10 s) ends the watch with
    :class:`ClusterError` (exit 3); in a fleet, only when no cluster answered.
    """
    from crdscope.base.settings import load_settings, with_openapi_v2

    from .exporter import parse_listen

    # Everything a person can get wrong is checked before anything connects or runs.
    names: list[str | None] = list(contexts) or [context]
    plan = WatchPlan(seconds=parse_duration(duration) if duration else None, record=record,
                     thresholds=parse_thresholds(fail_if),
                     listen=parse_listen(serve_metrics) if serve_metrics else None, out=out or sys.stdout,
                     memory_limit=memory_limit, view=view, contexts_named=any(name is not None for name in names),
                     wait_seconds=(parse_duration(wait_for_cluster, "--wait-for-cluster") if wait_for_cluster
                                   else WAIT_FOR_CLUSTER_SECONDS), wait_given=wait_for_cluster is not None)
    settings = with_openapi_v2(load_settings(), openapi_v2)
    check_silences(settings.silences)
    if prometheus_url:
        settings = dataclasses.replace(settings, prometheus_url=prometheus_url)
    repeated = next((name for name in names if names.count(name) > 1), None)
    if repeated is not None:
        raise ConfigError(f"--context {repeated} is given twice")
    # Connecting sends nothing: a bad context fails here, before any cluster is watched.
    clusters = [_connect(kubeconfig, name, fleet=len(names) > 1) for name in names]
    log_to_file(errors_to_stderr=True)  # probe transitions are event lines already
    outcome = asyncio.run(_watch(clusters, settings, plan))
    if outcome == "crossed":
        raise CrdscopeError("a --fail-if threshold was crossed", exit_code=1)
    if outcome == "interrupted":
        raise CrdscopeError("interrupted", exit_code=130)


def _connect(kubeconfig: str | None, context: str | None, *, fleet: bool) -> Cluster:
    """One cluster of the watch; in a fleet, an error names the context it is about."""
    from crdscope.connection.cluster import Cluster

    try:
        return Cluster.connect(kubeconfig, context)
    except CrdscopeError as exc:
        if fleet:
            raise exc.about(f"context {context}") from None
        raise


@dataclasses.dataclass
class Watched:
    """One cluster of a headless watch: its live core, description and sink."""

    live: LiveCore
    info: ClusterInfo
    sink: HeadlessSink

    @property
    def core(self) -> WatchCore:
        return self.live.core

    @property
    def probes(self) -> list[str]:
        return [p.name for p in self.live.monitor.scheduler.probes]


@dataclasses.dataclass(frozen=True)
class ViewOptions:
    """``--serve-view ADDR`` and its flags, checked before anything connects (:func:`view_options`)."""

    host: str
    port: int
    token: str
    #: Where the token is (the one given, or the one generated).
    token_file: Path
    generated: bool
    tls: ssl.SSLContext | None = None
    allow_control: bool = False


def view_options(listen: str, token_file: str | None = None, tls_cert: str | None = None,
                 tls_key: str | None = None, allow_control: bool = False) -> ViewOptions:
    """``--serve-view`` checked: the address, the token (read, or generated into the state
    directory, mode 0600), the TLS pair; one-line :class:`ConfigError` otherwise."""
    from .viewserver import default_token_path, new_token, parse_view_listen, server_tls
    from .viewstream import read_token

    host, port = parse_view_listen(listen)
    tls = server_tls(tls_cert, tls_key)
    if token_file is not None:
        return ViewOptions(host, port, read_token(token_file), Path(token_file), False, tls, allow_control)
    path = default_token_path()
    return ViewOptions(host, port, new_token(path), path, True, tls, allow_control)


@dataclasses.dataclass
class _Serving:
    """What a headless watch serves beside its lines: the metrics endpoint (``--serve-metrics``) and the
    view (``--serve-view``), each opened before anything talks to a cluster (a port in use fails first)."""

    collector: SampleCollector | None = None
    metrics: MetricsServer | None = None
    hub: ViewHub | None = None
    view: ViewServer | None = None

    @classmethod
    async def open(cls, plan: WatchPlan, settings: Settings, stack: contextlib.ExitStack) -> _Serving:
        from .exporter import MetricsServer, SampleCollector
        from .viewserver import ViewServer
        from .viewstream import StreamSettings, ViewHub

        serving = cls()
        if plan.listen is not None:
            serving.collector = SampleCollector()
            serving.metrics = MetricsServer(serving.collector, *plan.listen)
            stack.callback(serving.metrics.close)
        if plan.view is not None:
            serving.hub = ViewHub(StreamSettings(settings.thresholds, settings.cadences, plan.view.allow_control,
                                                 settings.silences))
            serving.view = ViewServer(serving.hub, plan.view.host, plan.view.port, plan.view.token, tls=plan.view.tls)
            await serving.view.start()
        return serving

    def watch(self, each: Watched, settings: Settings, plan: WatchPlan) -> None:
        """Serve one watched cluster: its series, its stream (and, if allowed, its control)."""
        if self.collector is not None:
            self.collector.watch(each.core, each.info)
        if self.hub is None or self.view is None or plan.view is None:
            return
        self.hub.watch(each.core, each.info)
        each.live.facts.viewer_load = self.hub.load
        if plan.view.allow_control:
            from .control import ClusterControl

            self.view.controls[each.core.cluster or each.info.context] = ClusterControl(
                each.live, settings.loader, context_flag=each.core.cluster if plan.contexts_named else None)

    def say_where(self, sink: HeadlessSink, plan: WatchPlan, clusters: int) -> None:
        """Where the metrics and the view are served (and the command a viewer runs)."""
        if self.metrics is not None:
            sink.say(f"serving metrics on {self.metrics.url}"
                     + (f" ({clusters} clusters, label cluster)" if clusters > 1 else ""), plain=True)
        if self.view is not None and plan.view is not None:
            made = "generated " if plan.view.generated else ""
            mode = "control allowed" if plan.view.allow_control else "read-only"
            sink.say(f"serving the view on {self.view.url} ({mode}; {made}token in {plan.view.token_file}): "
                     f"crdscope attach {self.view.url} --token-file {plan.view.token_file}", plain=True)

    async def close(self) -> None:
        if self.view is not None:
            await self.view.close()


async def _watch(clusters: list[Cluster], settings: Settings, plan: WatchPlan) -> str:
    """The watch, from its first request to its last line: "crossed", "interrupted" or "completed"."""
    stack = contextlib.ExitStack()
    stopped = asyncio.Event()
    serving: _Serving | None = None
    fleet = len(clusters) > 1
    try:
        serving = await _Serving.open(plan, settings, stack)
        _install_signals(stopped.set)
        stack.callback(_remove_signals)
        unanswered = await _first_answers(clusters, plan, stopped)
        if stopped.is_set():
            return "interrupted"
        watched = [await _start_one(cluster, settings, plan, stack, fleet) for cluster in clusters]
        for each, cluster in zip(watched, clusters, strict=True):
            serving.watch(each, settings, plan)
            _say_watching(each, plan, unanswered.get(cluster))
        serving.say_where(watched[0].sink, plan, len(watched))
        started = time.monotonic()
        done = [each.sink.done.wait() for each in watched]
        _, failure = await run_each([each.live for each in watched], plan.seconds, *done, stopped.wait())
        if failure is not None:
            raise failure
        if any(each.sink.crossing is not None for each in watched):
            outcome = "crossed"
        else:
            outcome = "interrupted" if stopped.is_set() else "completed"
        _say_ended(watched, outcome, time.monotonic() - started)
        return outcome
    finally:
        if serving is not None:
            await serving.close()
        stack.close()
        for cluster in clusters:
            await cluster.aclose()


async def _first_answers(clusters: list[Cluster], plan: WatchPlan, stopped: asyncio.Event) -> dict[Cluster, str]:
    """Wait (at most ``plan.wait_seconds``) for every cluster's first answer; the clusters that gave
    none, with why.  None answering is a :class:`ClusterError` (exit 3): nothing could be watched.  A
    cluster that answers later is a finding of the watch, as one lost after it answered is."""
    from crdscope.connection.cluster import first_answer

    fleet = len(clusters) > 1

    def waiting(cluster: Cluster) -> Callable[[str], None] | None:
        if not plan.wait_given:
            return None
        where = f"{cluster.context}: " if fleet else ""
        return lambda why: print(f"{where}waiting up to {format_duration(plan.wait_seconds)} for the API server "
                                 f"at {cluster.server} ({_reason(why)})", file=plan.out, flush=True)

    async def answer(cluster: Cluster) -> str | None:
        try:
            return await first_answer(cluster, plan.wait_seconds, waiting=waiting(cluster))
        except CrdscopeError as exc:
            raise (exc.about(f"context {cluster.context or cluster.server}") if fleet else exc) from None

    asking = asyncio.ensure_future(asyncio.gather(*(answer(cluster) for cluster in clusters)))
    interrupted: asyncio.Future[object] = asyncio.ensure_future(stopped.wait())
    await asyncio.wait((asking, interrupted), return_when=asyncio.FIRST_COMPLETED)
    interrupted.cancel()
    if not asking.done():  # Ctrl-C while waiting
        asking.cancel()
        await asyncio.gather(asking, return_exceptions=True)
        return {}
    reasons = {cluster: why for cluster, why in zip(clusters, asking.result(), strict=True) if why is not None}
    if len(reasons) == len(clusters):
        raise ClusterError(_never_answered(reasons, plan.wait_seconds))
    return reasons


def _reason(why: str) -> str:
    """What a failed request says, without the server it names ("connection refused")."""
    return why.split(": ")[-1] if ": " in why else "no answer"


def _never_answered(reasons: dict[Cluster, str], seconds: float) -> str:
    """One line: no cluster of the watch answered in ``seconds``, and why."""
    waited = format_duration(seconds)
    if len(reasons) == 1:
        cluster, why = next(iter(reasons.items()))
        return (f"the API server at {cluster.server} did not answer in {waited} ({_reason(why)}): it is down, "
                "stopped or not at that address; nothing was watched (--wait-for-cluster DURATION waits longer)")
    each = "; ".join(f"context {cluster.context} at {cluster.server} ({_reason(why)})"
                     for cluster, why in reasons.items())
    return f"no context answered in {waited}: {each}; nothing was watched (--wait-for-cluster DURATION waits longer)"


def _say_watching(each: Watched, plan: WatchPlan, unanswered: str | None) -> None:
    """The watch's first lines for one cluster: what, where, which probes; its recording; a cluster of the
    fleet that has not answered yet (its probes say when it does)."""
    version = each.info.kubernetes_version or "version unknown"
    each.sink.say(f"watching {each.info.server} ({version}, context {each.info.context}); probes: "
                  f"{', '.join(each.probes)}" + (f"; for {format_duration(plan.seconds)}" if plan.seconds else ""))
    if each.live.recording is not None:
        each.sink.say(f"recording to {each.live.recording.opened.path}")
    for silence in each.core.acceptances(time.time()):
        each.sink.say(f"accepting {silence.finding} until {silence.until_text}: {silence.why}")
    if unanswered is not None:
        each.sink.say(f"not answering after {format_duration(plan.wait_seconds)} ({_reason(unanswered)}): "
                      "watched anyway, its probes say when it answers")


def _say_ended(watched: list[Watched], outcome: str, seconds: float) -> None:
    """Each cluster's last lines: how the watch ended, what it saw, what it cost the server, and what the
    cost model puts on its CRDs (by their own schemas) and MRDs."""
    from crdscope.base.samples.attribution import AttributionSample, attribution_summary
    from crdscope.base.samples.footprint import FootprintSample, one_line

    elapsed = format_duration(seconds)
    for each in watched:
        sink = each.sink
        sink.say(f"watch {outcome} after {elapsed}: {sink.samples} samples, {len(sink.events)} events"
                 + ("" if sink.crossing else ", no threshold crossed"))
        footprint = each.core.store.latest_of(FootprintSample)
        if footprint is not None:
            sink.say(one_line(footprint))
        memory = attribution_summary(each.core.store.last_good_of(AttributionSample))
        if memory:
            sink.say(f"memory by the cost model: {memory}")


async def _start_one(cluster: Cluster, settings: Settings, plan: WatchPlan, stack: contextlib.ExitStack,
                     fleet: bool) -> Watched:
    """One cluster's live core and sink (its recording closed by ``stack``)."""
    from .live import open_live_core
    from .recorder import Recorder, describe_cluster, recording_path

    info = await describe_cluster(cluster)  # a frozen server: watched anyway, its version unknown
    recorder = None
    if plan.record:
        recorder = Recorder(recording_path(plan.record, info.context, fleet), info)
        stack.callback(recorder.close)
    live = open_live_core(cluster, settings, memory_limit=plan.memory_limit, recorder=recorder)
    sink = HeadlessSink(live.core, plan.thresholds, recording=live.recording, out=plan.out,
                        label=info.context if fleet else "")
    await live.core.learn_local_kubectl()
    return Watched(live, info, sink)


class _ReplayLines:
    """``replay --headless``'s listener: each sample's events and finding changes as lines (``as_json``:
    every sample too, as JSON lines); a closed pipe (``| head``) stops the replay quietly."""

    def __init__(self, out: TextIO, as_json: bool) -> None:
        self.out = out
        self.as_json = as_json
        self.closed = False
        #: The task playing the recording: cancelled when the reader goes away.
        self.playing: asyncio.Task[None] | None = None

    def __call__(self, taken: Taken) -> None:
        import json

        from .recorder import event_record, finding_record, sample_line

        out, as_json = self.out, self.as_json
        try:
            if as_json:
                out.write(sample_line(taken.sample).decode())  # the recorder's own encoding, one pass
                out.flush()
            for event in taken.events:
                print(json.dumps(event_record(event)) if as_json else event.line(), file=out, flush=True)
            for change in taken.changes:
                print(json.dumps(finding_record(change)) if as_json else change.line(), file=out, flush=True)
        except BrokenPipeError:  # the reader has had enough
            self.closed = True
            if self.playing is not None:
                self.playing.cancel()

    async def play(self, core: WatchCore, kubectl: KubectlClient | None | bool) -> None:
        """Run the replay's core to the recording's end (or until the pipe closes)."""
        self.playing = asyncio.current_task()
        if kubectl is True:
            await core.learn_local_kubectl()
        elif isinstance(kubectl, KubectlClient):
            core.know_kubectl(kubectl)
        try:
            await core.run()
        except asyncio.CancelledError:
            if not self.closed:
                raise


def replay_headless(recording: Recording, *, speed: float = 0.0, as_json: bool = False,
                    out: TextIO | None = None, kubectl: KubectlClient | None | bool = True) -> WatchCore:
    """``crdscope replay --headless``: play a recording as event lines (as the live watch prints
    them), or every sample and event as JSON lines; a closed pipe (``| head``) ends it quietly.

    Events and findings are re-derived from the samples by a core, the local kubectl included
    (``kubectl`` True: the one on PATH; a client: that one; None: none).  Returns the core.
    """
    from crdscope.base.settings import load_settings

    from .replay import ReplayFeed, replay_core

    out = out or sys.stdout
    log_to_file(errors_to_stderr=True)  # probe transitions are event lines already
    core = replay_core(ReplayFeed(recording, speed=speed), load_settings().thresholds)
    lines = _ReplayLines(out, as_json)
    core.add_listener(lines)
    cluster = recording.cluster
    if not as_json:
        print(f"replaying {recording.path} ({cluster.server}, {cluster.kubernetes_version or 'version unknown'})",
              file=out, flush=True)
    try:
        asyncio.run(lines.play(core, kubectl))
    except KeyboardInterrupt:
        raise CrdscopeError("interrupted", exit_code=130) from None
    if lines.closed:
        _discard_output(out)
        return core
    if not as_json:
        start, end = recording.start, recording.end
        span = end - start if start is not None and end is not None else 0.0
        print(f"replayed {len(recording.samples)} samples covering {format_duration(span)}"
              + ("" if recording.ended else " (the recording was not closed cleanly)"), file=out, flush=True)
    return core


def _discard_output(out: TextIO) -> None:
    """After a closed pipe, point the stream at /dev/null (as Python's docs advise) so that
    exiting does not complain about the unflushed rest."""
    import os

    with contextlib.suppress(OSError, ValueError, AttributeError):  # not a real file (tests)
        os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())


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


def attach_headless(url: str, token_file: str, *, ca_file: str | None = None, duration: str | None = None,
                    record: str | None = None, out: TextIO | None = None) -> None:
    """``crdscope attach --headless``: a collector's stream as the lines a headless watch prints
    (events and finding changes, each cluster's prefixed in a fleet), with no probe of its own;
    ``--duration`` ends it (exit 0), Ctrl-C exits 130."""
    from .attach import StreamFeed, attach_core, open_collector, record_core

    seconds = parse_duration(duration) if duration else None
    collector, clusters, settings = open_collector(url, token_file, ca_file)
    out = out or sys.stdout
    log_to_file(errors_to_stderr=True)
    fleet = len(clusters) > 1
    stopped = asyncio.Event()

    async def main() -> str:
        feeds, sinks, recordings = [], [], []
        try:
            for cluster in clusters:
                feed = StreamFeed(collector, cluster, settings)
                core = attach_core(feed)
                recording = record_core(core, cluster, record, fleet=fleet)
                if recording is not None:
                    recordings.append(recording)
                sink = HeadlessSink(core, (), recording=recording, out=out, label=cluster.name if fleet else "")
                feed.status_listeners.append(sink.say)
                sink.say(f"attached to {collector.url}: {cluster.info.server} (context {cluster.info.context})")
                feeds.append(feed)
                sinks.append(sink)
            _install_signals(stopped.set)
            try:
                _, failure = await run_each(feeds, seconds, stopped.wait(), *(s.done.wait() for s in sinks))
            finally:
                _remove_signals()
            if failure is not None:
                raise failure
            return "interrupted" if stopped.is_set() else "completed"
        finally:
            for recording in recordings:
                recording.close()

    if asyncio.run(main()) == "interrupted":
        raise CrdscopeError("interrupted", exit_code=130)
