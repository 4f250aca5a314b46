"""One collector, many viewers: the stream a live core produces, as a collector serves it.

A collector (``crdscope watch --headless --serve-view ADDR``) runs the probes once; each viewer
(``crdscope attach URL``, a browser through ``serve-web``) rebuilds its own core from the stream
and sends no request to any API server.  The stream of one cluster is a recording that goes on
(:mod:`session.recorder`'s JSON Lines, so ``curl | jq`` reads it as it reads a recording file):

* the header: the recording's header (server, context, Kubernetes version; never a credential)
  plus ``stream``: the protocol and its version, the collector's crdscope version and start, the
  cluster's name, the thresholds, cadences and memory limit the collector judges by (a viewer
  judges by the same, so its findings are the collector's), whether control is allowed, and how
  many history samples follow;
* the recent history: every sample the collector's store holds (what the panels' plots need),
  oldest first;
* ``{"type": "live"}``, then each sample as the core takes it, with the events and finding
  changes it caused (viewers re-derive those, as a replay does: the records are for readers);
* ``{"type": "heartbeat", "timestamp": ...}`` when nothing else was sent for
  :data:`HEARTBEAT_SECONDS`, so a viewer tells a quiet collector from a gone one.

Each sample is encoded once, whatever the number of viewers (the recorder's own msgspec pass),
and a collector with no viewer encodes nothing.  A viewer that falls :data:`BACKLOG_LINES` behind
is dropped (it reconnects and starts again from the history) rather than held in memory.  The CPU
the collector spends on viewers is counted here (``ViewHub.load``) and shown in its footprint.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

from crdscope.base.errors import ConfigError
from crdscope.base.samples import Sample
from crdscope.base.samples.footprint import ViewerLoad
from crdscope.base.settings import Cadences, Thresholds
from crdscope.base.silences import Silence
from crdscope.base.version import __version__

from .core import Taken, WatchCore
from .recorder import ClusterInfo, encode, event_record, finding_record, header_record, sample_line

PROTOCOL = "crdscope-view"
PROTOCOL_VERSION = 1
#: A viewer hears something at least this often (a heartbeat when there is nothing else).
HEARTBEAT_SECONDS = 5.0
#: Lines a viewer may fall behind before it is dropped (it reconnects from the history).
BACKLOG_LINES = 50_000
#: History samples encoded per turn of the event loop (the probes keep their cadence meanwhile).
HISTORY_CHUNK = 200

SettingsT = TypeVar("SettingsT", Thresholds, Cadences)

#: A JSON object as decoded: a record of the stream, a control request or its answer.
JSONObject = dict[str, Any]

LIVE = encode({"type": "live"})


def read_token(path: str | Path) -> str:
    """The token in ``path`` (its first line); a one-line :class:`ConfigError` when unreadable or empty."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"token file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read token file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    token = text.strip().splitlines()[0].strip() if text.strip() else ""
    if not token:
        raise ConfigError(f"token file {path} is empty")
    return token


def heartbeat() -> bytes:
    return encode({"type": "heartbeat", "timestamp": time.time()})


@dataclasses.dataclass(frozen=True)
class StreamSettings:
    """What the collector judges by, sent in the header so that viewers judge alike."""

    thresholds: Thresholds = dataclasses.field(default_factory=Thresholds)
    cadences: Cadences = dataclasses.field(default_factory=Cadences)
    allow_control: bool = False
    #: The collector's accepted findings (``[[silence]]``): a viewer shows them accepted as it does.
    silences: tuple[Silence, ...] = ()

    def to_json(self) -> JSONObject:
        return {"thresholds": dataclasses.asdict(self.thresholds), "cadences": dataclasses.asdict(self.cadences),
                "allow_control": self.allow_control, "silences": [s.to_json() for s in self.silences]}

    @classmethod
    def from_json(cls, data: JSONObject) -> StreamSettings:
        """Tolerant: a field this crdscope does not know (a newer collector) is left out, a missing
        or mistyped one keeps its default."""
        return cls(thresholds=_known_fields(Thresholds, data.get("thresholds")),
                   cadences=_known_fields(Cadences, data.get("cadences")),
                   allow_control=data.get("allow_control") is True, silences=_silences(data.get("silences")))


def _silences(data: object) -> tuple[Silence, ...]:
    """The collector's acceptances; one that does not read is left out (it pages, the safe side)."""
    found = [Silence.from_json(item) for item in data] if isinstance(data, list) else []
    return tuple(s for s in found if s is not None)


def _known_fields(kind: type[SettingsT], data: object) -> SettingsT:
    if not isinstance(data, dict):
        return kind()
    values: JSONObject = {}
    for field in dataclasses.fields(kind):
        value = data.get(field.name)
        # A key unset by default (a probe's cadence: the probe declares it) takes a number.
        default = 0.0 if field.default is None else field.default
        if value is None or default is dataclasses.MISSING or isinstance(value, bool) != isinstance(default, bool):
            continue
        if isinstance(default, float) and isinstance(value, (int, float)):
            values[field.name] = float(value)
        elif isinstance(value, type(default)):
            values[field.name] = value
    return dataclasses.replace(kind(), **values)


class Subscriber:
    """One viewer's place in one cluster's stream: the history still to send, then live lines."""

    def __init__(self, history: list[Sample]) -> None:
        self.history = history
        self.lines: deque[bytes] = deque()
        self.ready = asyncio.Event()
        #: True once the viewer fell too far behind: the server closes its stream.
        self.dropped = False

    def offer(self, data: bytes, lines: int) -> None:
        if self.dropped:
            return
        if len(self.lines) + lines > BACKLOG_LINES:
            self.dropped = True
            self.lines.clear()
        else:
            self.lines.append(data)
        self.ready.set()

    def history_chunks(self) -> Iterator[bytes]:
        """The history, encoded :data:`HISTORY_CHUNK` samples at a time."""
        for start in range(0, len(self.history), HISTORY_CHUNK):
            yield b"".join(sample_line(s) for s in self.history[start:start + HISTORY_CHUNK])
        self.history = []

    async def next_lines(self, timeout: float) -> bytes | None:
        """Every live line queued so far, waiting up to ``timeout`` for one (None: nothing came)."""
        if not self.lines and not self.dropped:
            self.ready.clear()
            try:
                async with asyncio.timeout(timeout):  # no task per wait, as wait_for would make
                    await self.ready.wait()
            except TimeoutError:
                return None
        data = b"".join(self.lines)
        self.lines.clear()
        return data


class ViewChannel:
    """One watched cluster's stream: the core's header, history and live records for its subscribers."""

    def __init__(self, core: WatchCore, info: ClusterInfo, settings: StreamSettings, hub: ViewHub) -> None:
        self.core = core
        self.info = info
        self.settings = settings
        self.hub = hub
        self.name = core.cluster or info.context or info.server
        self.subscribers: set[Subscriber] = set()
        core.add_listener(self._taken)

    def header(self, history: int) -> bytes:
        record = header_record(self.info, self.hub.session_id, 1, self.hub.started)
        kubectl = self.core.kubectl
        given = self.core.facts.given_limit  # viewers observe Prometheus' limit in the health samples
        record["stream"] = {"protocol": PROTOCOL, "version": PROTOCOL_VERSION, "collector": __version__,
                            "cluster": self.name, "memory_limit": given.bytes if given else None,
                            "memory_limit_origin": given.origin.name if given else None, "history": history,
                            # the collector's kubectl judges discovery (its cache TTL): so do its viewers
                            "kubectl": dataclasses.asdict(kubectl) if kubectl is not None else None,
                            **self.settings.to_json()}
        return encode(record)

    def subscribe(self) -> Subscriber:
        """A new viewer: the store's history now and every record from now on (one step of the
        event loop, so no sample is missed or sent twice)."""
        store = self.core.store
        history = sorted((s for probe in store.health() for s in store.history(probe)), key=lambda s: s.timestamp)
        subscriber = Subscriber(history)
        self.subscribers.add(subscriber)
        return subscriber

    def unsubscribe(self, subscriber: Subscriber) -> None:
        self.subscribers.discard(subscriber)

    def _taken(self, taken: Taken) -> None:
        if not self.subscribers:
            return  # no viewer: nothing encoded, nothing spent
        started = time.thread_time()
        parts = [sample_line(taken.sample)]
        parts.extend(encode(event_record(event)) for event in taken.events)
        parts.extend(encode(finding_record(change)) for change in taken.changes)
        data = b"".join(parts)
        for subscriber in list(self.subscribers):
            subscriber.offer(data, len(parts))
        self.hub.spent(time.thread_time() - started, 0)


class ViewHub:
    """Every cluster a collector serves, and what its viewers cost it."""

    def __init__(self, settings: StreamSettings | None = None) -> None:
        self.settings = settings or StreamSettings()
        self.session_id = uuid.uuid4().hex
        self.started = time.time()
        self.channels: dict[str, ViewChannel] = {}
        self._cpu_seconds = 0.0
        self._bytes_sent = 0

    def watch(self, core: WatchCore, info: ClusterInfo) -> ViewChannel:
        channel = ViewChannel(core, info, self.settings, self)
        self.channels[channel.name] = channel
        return channel

    def channel(self, name: str | None) -> ViewChannel | None:
        """The cluster ``name`` (None or empty: the first one)."""
        if not name:
            return next(iter(self.channels.values()), None)
        return self.channels.get(name)

    def describe(self) -> JSONObject:
        """What ``/v1/clusters`` answers: the collector and the clusters it serves."""
        return {"protocol": PROTOCOL, "version": PROTOCOL_VERSION, "collector": __version__,
                "session_id": self.session_id, "started": self.started,
                **self.settings.to_json(),
                "clusters": [{"name": name, **channel.info.to_json(), "viewers": len(channel.subscribers)}
                             for name, channel in self.channels.items()]}

    def spent(self, cpu_seconds: float, sent: int) -> None:
        self._cpu_seconds += max(0.0, cpu_seconds)
        self._bytes_sent += sent

    def load(self) -> ViewerLoad:
        return ViewerLoad(viewers=sum(len(c.subscribers) for c in self.channels.values()),
                          cpu_seconds=self._cpu_seconds, bytes_sent=self._bytes_sent)
