"""A viewer of a collector's stream: ``crdscope attach URL``'s source of samples.

:class:`StreamFeed` is a :class:`session.core.SampleSource` like the live monitor and a replay:
it reads one cluster's stream from a collector (:mod:`session.viewstream`) and hands each sample to
its core, which judges them by the thresholds the collector sent (so the viewer's findings are
the collector's).  It sends no request to any API server.  When the stream breaks (the collector
restarts, the network drops), it says so (:meth:`StreamFeed.describe`), reconnects with a growing
pause, resets the core and takes the history again; the token file is read again on each try, so a
collector restarted with a new token is followed.  A wrong token or an unreachable collector on
the first contact is a one-line :class:`AttachError` (exit 3): :func:`collector_clusters`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
from collections.abc import Callable
from typing import TYPE_CHECKING
from dataclasses import dataclass
from pathlib import Path

import httpx

from crdscope.base.errors import ClusterError, CrdscopeError
from crdscope.base.samples import Sample, Sink, deliver
from crdscope.base.version import USER_AGENT
from crdscope.connection.transport import TRANSPORT_ERRORS
from crdscope.base.silences import Silence
from crdscope.findings.engine import finding_kinds
from crdscope.findings.kubectl import KubectlClient
from crdscope.base.facts import ClusterFacts, MemoryLimit
from crdscope.probes.registry import sample_type

from .core import SessionStore, WatchCore
from .recorder import ClusterInfo
from .viewstream import HEARTBEAT_SECONDS, PROTOCOL, PROTOCOL_VERSION, JSONObject, StreamSettings, read_token

if TYPE_CHECKING:
    from .live import TakenRecorder

log = logging.getLogger("crdscope.attach")

#: A stream silent this long (three heartbeats) is taken as broken.
SILENCE_SECONDS = 3 * HEARTBEAT_SECONDS
CONNECT_SECONDS = 5.0
#: Pauses between reconnection tries (the last one repeats).
RETRY_PAUSES = (0.5, 1.0, 2.0, 3.0)


class AttachError(ClusterError):
    """The collector cannot be reached, or refused the token (exit 3)."""


@dataclass(frozen=True)
class Collector:
    """Where a collector is and how to reach it."""

    url: str
    token_file: Path
    #: A CA bundle for an https collector with a private certificate (None: the system's).
    ca_file: str | None = None

    def token(self) -> str:
        return read_token(self.token_file)

    def verify(self) -> ssl.SSLContext | bool:
        """The collector's certificate is checked: against ``ca_file`` when given, else the system's."""
        return ssl.create_default_context(cafile=self.ca_file) if self.ca_file else True

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url.rstrip("/"), verify=self.verify(),
                                 headers={"User-Agent": USER_AGENT},
                                 timeout=httpx.Timeout(CONNECT_SECONDS, read=SILENCE_SECONDS))


@dataclass(frozen=True)
class CollectorCluster:
    """One cluster a collector serves, as ``/v1/clusters`` names it."""

    name: str
    info: ClusterInfo


def refused(response: httpx.Response, url: str) -> AttachError | None:
    if response.status_code == 401:
        return AttachError(f"the collector at {url} refused the token (wrong or old token file?)")
    if response.status_code != 200:
        return AttachError(f"the collector at {url} answered HTTP {response.status_code}")
    return None


async def collector_clusters(collector: Collector) -> tuple[list[CollectorCluster], StreamSettings]:
    """The clusters a collector serves and what it judges by; a one-line :class:`AttachError` when
    it cannot say."""
    token = collector.token()
    try:
        async with collector.client() as client:
            response = await client.get("/v1/clusters", headers={"Authorization": f"Bearer {token}"})
    except TRANSPORT_ERRORS as exc:
        raise AttachError(f"cannot reach the collector at {collector.url}: {type(exc).__name__}: {exc}") from None
    problem = refused(response, collector.url)
    if problem is not None:
        raise problem
    try:
        data = response.json()
        if data.get("protocol") != PROTOCOL:
            raise ValueError("not a crdscope collector")
        if int(data.get("version", 0)) > PROTOCOL_VERSION:
            raise AttachError(f"the collector at {collector.url} speaks view protocol {data['version']}; "
                              f"this crdscope reads up to {PROTOCOL_VERSION}: upgrade it")
        found = [CollectorCluster(str(c["name"]), ClusterInfo(server=str(c.get("server", "")),
                                                              context=str(c.get("context", "")),
                                                              kubernetes_version=str(c.get("kubernetes_version", ""))))
                 for c in data["clusters"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise AttachError(f"{collector.url} is not a crdscope collector ({exc})") from None
    if not found:
        raise AttachError(f"the collector at {collector.url} serves no cluster yet")
    return found, StreamSettings.from_json(data)


class StreamFeed:
    """One cluster's samples from a collector (see the module docstring)."""

    def __init__(self, collector: Collector, cluster: CollectorCluster, settings: StreamSettings | None = None, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.collector = collector
        self.cluster = cluster
        self.sinks: list[Sink] = []
        self._reset_listeners: list[Callable[[], None]] = []
        self._paused = False
        self._held: list[Sample] = []
        self._flushing: set[asyncio.Task[None]] = set()
        self._clock = clock
        #: What the collector judges by (``/v1/clusters``, then each stream's header).
        self.settings = settings or StreamSettings()
        #: The memory limit given to the collector (``--memory-limit``, its lab's cap; None: none).
        self.memory_limit: MemoryLimit | None = None
        #: The collector's local kubectl (its findings judge discovery by it).
        self.kubectl: KubectlClient | None = None
        #: True while the stream is open and live.
        self.connected = False
        #: Connections made (the first included); tries since the stream last broke.
        self.connections = 0
        self.failed_tries = 0
        self.last_error = ""
        #: Timestamp of the newest sample received (the collector's clock).
        self.newest: float | None = None
        self.collector_session = ""
        #: Set once the first stream is live (the history taken).
        self.live = asyncio.Event()
        #: Told one line when the stream breaks and when it is back (a headless viewer prints them).
        self.status_listeners: list[Callable[[str], None]] = []

    # -- SampleSource ------------------------------------------------------------------
    def add_sink(self, sink: Sink) -> None:
        self.sinks.append(sink)

    def add_reset_listener(self, listener: Callable[[], None]) -> None:
        """Told before a reconnection's history arrives (the core forgets what it had)."""
        self._reset_listeners.append(listener)

    def pause(self) -> None:
        """Hold samples back (the screen stays still); the stream keeps being read."""
        self._paused = True

    def resume(self) -> None:
        """Deliver what was held back at once (not at the next sample: a quiet cluster sends few)."""
        self._paused = False
        if self._held:
            held, self._held = self._held, []
            task = asyncio.get_running_loop().create_task(self._deliver_all(held))
            self._flushing.add(task)
            task.add_done_callback(self._flushing.discard)

    async def _deliver_all(self, samples: list[Sample]) -> None:
        for sample in samples:
            await deliver(self.sinks, sample)

    @property
    def paused(self) -> bool:
        return self._paused

    def now(self) -> float:
        return self._clock()

    @property
    def context(self) -> str:
        return self.cluster.info.context or self.cluster.name

    @property
    def server(self) -> str:
        return self.cluster.info.server

    # -- what the header says ---------------------------------------------------------
    def describe(self, now: float) -> str:
        """``ATTACHED http://host:port · newest 1.2 s ago`` or why not."""
        if self.connected:
            age = "no sample yet" if self.newest is None else f"newest {max(0.0, now - self.newest):.1f} s ago"
            return f"ATTACHED {self.collector.url} · {age}"
        if self.failed_tries == 0:
            return f"ATTACHING {self.collector.url}"
        if self.connections == 0:
            return f"NOT ATTACHED {self.collector.url}: {self.last_error} (try {self.failed_tries})"
        return f"COLLECTOR LOST {self.collector.url}: reconnecting (try {self.failed_tries}): {self.last_error}"

    # -- the stream ---------------------------------------------------------------------
    async def run(self) -> None:
        """Read the stream until cancelled, reconnecting whenever it breaks."""
        async with self.collector.client() as client:
            while True:
                try:
                    await self._read(client)
                    self.last_error = "the collector closed the stream"
                except CrdscopeError as exc:  # refused, or the token file unreadable mid-rewrite: tried again
                    self.last_error = str(exc)
                except TRANSPORT_ERRORS as exc:
                    self.last_error = f"{type(exc).__name__}: {exc}".rstrip(": ")
                except _StreamBrokenError as exc:
                    self.last_error = str(exc)
                if self.connected:
                    self._status(f"collector lost: {self.last_error}; reconnecting")
                self.connected = False
                self.failed_tries += 1
                await asyncio.sleep(RETRY_PAUSES[min(self.failed_tries, len(RETRY_PAUSES)) - 1])

    async def _read(self, client: httpx.AsyncClient) -> None:
        headers = {"Authorization": f"Bearer {self.collector.token()}"}
        async with client.stream("GET", "/v1/stream", params={"cluster": self.cluster.name},
                                 headers=headers) as response:
            if response.status_code != 200:
                await response.aread()
                problem = refused(response, self.collector.url)
                raise problem or AttachError(f"HTTP {response.status_code}")
            lines = response.aiter_lines()
            first = await anext(lines, None)
            if first is None:
                raise _StreamBrokenError("the collector closed the stream before its header")
            header = _record(first)
            self._take_header(header)
            # Every connection starts from the collector's history: what the core had goes.
            for listener in list(self._reset_listeners):
                listener()
            self.connections += 1
            async for line in lines:
                record = _record(line)
                kind = record.get("type")
                if kind == "sample":
                    await self._sample(record)
                elif kind == "live":
                    self.connected = True
                    self.failed_tries = 0
                    if self.connections > 1:
                        self._status(f"collector back: attached again to {self.collector.url} "
                                     f"(connection {self.connections})")
                    self.live.set()
                # events, findings and heartbeats: the core derives the first two itself

    def _status(self, line: str) -> None:
        log.warning("%s: %s", self.cluster.name, line)
        for listener in list(self.status_listeners):
            listener(line)

    def _take_header(self, header: JSONObject) -> None:
        stream = header.get("stream")
        if header.get("type") != "header" or not isinstance(stream, dict) or stream.get("protocol") != PROTOCOL:
            raise _StreamBrokenError("the collector's stream has no header")
        self.settings = StreamSettings.from_json(stream)
        # A collector before the limit's origin was sent: its limit was given, so taken as a flag's.
        self.memory_limit = MemoryLimit.from_json({"memory_limit_bytes": stream.get("memory_limit"),
                                                   "memory_limit_origin": stream.get("memory_limit_origin")})
        self.collector_session = str(header.get("session_id", ""))
        self.kubectl = _kubectl(stream.get("kubectl"))

    async def _sample(self, record: JSONObject) -> None:
        data = record.get("data")
        try:
            sample = sample_type(str(record.get("probe", ""))).from_json(data)  # type: ignore[arg-type]
        except (TypeError, ValueError, AttributeError, KeyError) as exc:
            log.warning("a %s sample from the collector does not rebuild: %s", record.get("probe"), exc)
            return
        self.newest = max(self.newest or 0.0, float(sample.timestamp))
        if self._paused:
            self._held.append(sample)
            return
        await deliver(self.sinks, sample)


def _kubectl(data: object) -> KubectlClient | None:
    if not isinstance(data, dict):
        return None
    try:
        return KubectlClient(path=str(data["path"]), git_version=str(data["git_version"]),
                             major=int(data["major"]), minor=int(data["minor"]))
    except (KeyError, TypeError, ValueError):
        return None


class _StreamBrokenError(Exception):
    pass


def _record(line: str) -> JSONObject:
    try:
        record = json.loads(line)
    except ValueError:
        raise _StreamBrokenError("the collector sent a line that is not JSON") from None
    if not isinstance(record, dict):
        raise _StreamBrokenError("the collector sent a line that is not a record")
    return record


def attach_core(feed: StreamFeed) -> WatchCore:
    """The viewer's core for one cluster: judged by the collector's thresholds and memory limit,
    reset (and refilled from the history) on each reconnection."""
    facts = ClusterFacts()
    facts.give_limit(feed.memory_limit)
    core = WatchCore(feed, store=SessionStore(), thresholds=feed.settings.thresholds, cluster=feed.cluster.name,
                     facts=facts)
    core.accept(known_silences(feed.settings.silences))

    def judge_as_the_collector() -> None:
        core.thresholds = feed.settings.thresholds
        core.facts.give_limit(feed.memory_limit)
        core.silences = known_silences(feed.settings.silences)
        core.reset()
        if feed.kubectl is not None:
            core.know_kubectl(feed.kubectl)

    feed.add_reset_listener(judge_as_the_collector)
    return core


def known_silences(silences: tuple[Silence, ...]) -> tuple[Silence, ...]:
    """A collector's acceptances of the finding kinds this crdscope knows (a newer collector's other
    kinds have no finding here to accept)."""
    kinds = finding_kinds()
    return tuple(s for s in silences if s.kind in kinds)


def open_collector(url: str, token_file: str | Path, ca_file: str | None = None
                   ) -> tuple[Collector, list[CollectorCluster], StreamSettings]:
    """The collector at ``url`` and what it serves, asked once before any screen opens (a wrong
    token or an unreachable collector: one line, exit 3)."""
    if not url.startswith(("http://", "https://")):
        raise AttachError(f"{url} is not a collector's URL (http://HOST:PORT or https://HOST:PORT)", exit_code=2)
    collector = Collector(url.rstrip("/"), Path(token_file), ca_file)
    clusters, settings = asyncio.run(collector_clusters(collector))
    return collector, clusters, settings


def record_core(core: WatchCore, cluster: CollectorCluster, record: str | None, *,
                fleet: bool) -> TakenRecorder | None:
    """A viewer's ``--record``: what its core takes, recorded as a live monitor records (in a fleet,
    ``FILE.<context>.jsonl`` per cluster); None without ``record``.  The caller closes it."""
    if not record:
        return None
    from .live import TakenRecorder, log_record_failure
    from .recorder import Recorder, recording_path

    recorder = Recorder(Path(recording_path(record, cluster.info.context or cluster.name, fleet)), cluster.info)
    recording = TakenRecorder(recorder, log_record_failure)
    core.add_listener(recording)
    recording.follow_limits(core.facts)  # the collector's given limit, for a replay to judge by
    return recording
