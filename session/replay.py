"""Read recordings back, and replay them through the same interface as the live monitor.

:class:`RecordingReader` streams a recording (all its parts) and stops at the
first damage (a torn last line, a corrupt line, a record that does not
rebuild), saying where: file, line and byte offset.  A recording written in a
newer format version is refused with a clear message.  A recording compressed
with xz or gzip (``.jsonl.xz``, ``.jsonl.gz``) reads as it is
(:func:`open_recording`); its line and byte offsets count the uncompressed text.

:class:`ReplayFeed` is a *feed* like :class:`probes.monitor.Monitor`
(``add_sink``, ``async run()``, ``pause()``, ``resume()``, ``paused``) plus
``speed``, ``step()`` and ``seek(timestamp)``, so the TUI opens a recording
exactly as it opens a cluster.  It keeps no samples: the session core it feeds
(:class:`session.core.WatchCore`) holds them.  Replayed samples are rebuilt with
``Sample.from_json`` and equal the recorded ones.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gzip
import json
import lzma
import math
import time
import zlib
from pathlib import Path
from types import ModuleType
from typing import IO, Any
from collections.abc import Callable, Generator, Iterator

from crdscope.base.version import __version__
from crdscope.base.errors import ConfigError
from crdscope.base.facts import ClusterFacts, LimitRecord, limit_at
from crdscope.probes.registry import sample_type
from crdscope.base.samples import Sample
from crdscope.base.samples import Sink, deliver

from crdscope.base.settings import Thresholds

from .core import SessionStore, WatchCore
from .durations import parse_duration
from .events import Event
from .notes import Note
from .recorder import FORMAT, FORMAT_VERSION, ClusterInfo, part_path

@dataclasses.dataclass(frozen=True)
class Damage:
    """Where reading stopped, and why."""

    path: Path
    line: int
    byte: int
    reason: str

    def message(self) -> str:
        """One line for a person: ``FILE: replayed up to line L (byte B): reason``."""
        return (f"{self.path}: damaged at line {self.line} (byte {self.byte}): {self.reason}; "
                f"replayed what came before")


#: What a compressed recording's stream raises when it is cut short or corrupt.
_STREAM_ERRORS = (EOFError, lzma.LZMAError, gzip.BadGzipFile, zlib.error)

#: Compressed recordings by their first bytes (a file's name may say nothing, or the wrong thing).
_COMPRESSED: dict[bytes, ModuleType] = {b"\xfd7zXZ\x00": lzma, b"\x1f\x8b": gzip}


def open_recording(path: str | Path) -> IO[bytes]:
    """A recording's bytes, uncompressed: xz and gzip files (``.jsonl.xz``, ``.jsonl.gz``, as
    recordings are kept and shared) are opened through :mod:`lzma` or :mod:`gzip`, by their magic
    bytes; anything else as it is.  ``OSError`` as :func:`open` raises it."""
    path = Path(path)
    with open(path, "rb") as handle:
        magic = handle.read(6)
    for prefix, module in _COMPRESSED.items():
        if magic.startswith(prefix):
            opened: IO[bytes] = module.open(path, "rb")
            return opened
    return open(path, "rb")


class _DamagedError(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class RecordingReader:
    """Iterates the samples and events of a recording, following its parts, up to any damage.

    ``header`` is read (and checked) when the reader is built; ``damage`` is set once
    iteration stopped early; ``ended`` tells whether the recorder closed it cleanly.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.damage: Damage | None = None
        self.ended = False
        self.parts: list[Path] = [self.path]
        self.header = self._read_header(self.path)
        self.session_id = str(self.header.get("session_id", ""))

    @property
    def cluster(self) -> ClusterInfo:
        data = self.header.get("cluster") or {}
        return ClusterInfo(server=str(data.get("server", "")), context=str(data.get("context", "")),
                           kubernetes_version=str(data.get("kubernetes_version", "")))

    @staticmethod
    def _read_header(path: Path) -> dict[str, Any]:
        try:
            with open_recording(path) as handle:
                first = handle.readline()
        except _STREAM_ERRORS as exc:
            raise ConfigError(f"cannot read recording {path}: its compressed data is damaged ({exc})") from None
        except FileNotFoundError:
            raise ConfigError(f"recording {path} does not exist") from None
        except IsADirectoryError:
            raise ConfigError(f"{path} is a directory, not a recording") from None
        except OSError as exc:
            raise ConfigError(f"cannot read recording {path}: {exc.strerror}") from None
        try:
            header = json.loads(first)
        except ValueError:
            header = None
        if not isinstance(header, dict) or header.get("type") != "header" or header.get("format") != FORMAT:
            raise ConfigError(f"{path} is not a crdscope recording (no header on line 1)")
        version = header.get("format_version")
        if not isinstance(version, int) or isinstance(version, bool):
            raise ConfigError(f"{path}: recording header has no valid format_version")
        if version > FORMAT_VERSION:
            raise ConfigError(
                f"{path} is in recording format version {version} (written by crdscope "
                f"{header.get('crdscope_version', '?')}); this crdscope {__version__} reads format "
                f"versions up to {FORMAT_VERSION}: upgrade crdscope to replay it"
            )
        return header

    def __iter__(self) -> Iterator[Sample | Event | LimitRecord | Note]:
        number = int(self.header.get("part", 1) or 1)
        path = self.path
        while True:
            next_name = yield from self._read_part(path)
            if self.damage is not None or next_name is None:
                return
            number += 1
            following = path.with_name(next_name) if next_name else part_path(self.path, number)
            if not following.exists():
                self.damage = Damage(following, 0, 0, "the next part of this recording is missing")
                return
            try:
                header = self._read_header(following)
            except ConfigError as exc:
                self.damage = Damage(following, 1, 0, str(exc))
                return
            if header.get("session_id") != self.session_id:
                self.damage = Damage(following, 1, 0, "the next part belongs to another session")
                return
            self.ended = False
            self.parts.append(following)
            path = following

    def _read_part(self, path: Path) -> Generator[Sample | Event | LimitRecord | Note, None, str | None]:
        """Yield one part's records; return the next part's file name ("" = by number) or None."""
        offset = line_number = 0
        with open_recording(path) as handle:
            try:
                for line_number, raw in enumerate(handle, start=1):
                    start, offset = offset, offset + len(raw)
                    if line_number == 1:
                        continue  # the header, already checked
                    try:
                        record = self._decode(raw)
                        if record is None:
                            continue
                        kind = record["type"]
                        if kind == "end":
                            self.ended = record.get("reason") != "rotated"
                            return None if self.ended else str(record.get("next") or "")
                        yield self._rebuild(record)
                    except _DamagedError as exc:
                        self.damage = Damage(path, line_number, start, exc.reason)
                        return None
            except _STREAM_ERRORS as exc:  # a compressed copy cut short: what came before still replays
                self.damage = Damage(path, line_number + 1, offset, f"compressed data damaged ({exc})")
        return None

    @staticmethod
    def _decode(raw: bytes) -> dict[str, Any] | None:
        truncated = not raw.endswith(b"\n")
        if not raw.strip():
            if truncated:
                return None
            raise _DamagedError("empty line")
        try:
            record = json.loads(raw)
        except UnicodeDecodeError:
            raise _DamagedError("not UTF-8 text") from None
        except json.JSONDecodeError as exc:
            raise _DamagedError("line cut short (the recorder was killed mid-write)" if truncated
                                else f"not valid JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(record, dict) or not isinstance(record.get("type"), str):
            raise _DamagedError("not a record (no type)")
        if record["type"] not in ("sample", "event", "limit", "note", "end"):
            return None  # a record kind of a later minor revision: skip it
        return record

    @staticmethod
    def _rebuild(record: dict[str, Any]) -> Sample | Event | LimitRecord | Note:
        data = record.get("data")
        if not isinstance(data, dict):
            raise _DamagedError(f"{record['type']} record without data")
        try:
            if record["type"] == "event":
                return Event.from_json(data)
            if record["type"] == "limit":
                return LimitRecord.from_json(data)
            if record["type"] == "note":
                return Note.from_json(data)
            sample = sample_type(str(record.get("probe", ""))).from_json(data)
        except (TypeError, ValueError, AttributeError) as exc:
            raise _DamagedError(f"{record.get('probe', 'event')} record does not rebuild: {exc}") from None
        # Replay orders and seeks by it: a sample without a numeric time cannot be placed.
        if not isinstance(sample.timestamp, (int, float)) or isinstance(sample.timestamp, bool):
            raise _DamagedError(f"{record.get('probe')} record has no numeric timestamp")
        return sample


@dataclasses.dataclass
class Recording:
    """A whole recording in memory: what :class:`ReplayFeed` plays and seeks in."""

    path: Path
    header: dict[str, Any]
    cluster: ClusterInfo
    samples: list[Sample]
    events: list[Event]
    damage: Damage | None
    ended: bool
    parts: list[Path]
    #: The memory limits given while it was recorded (``--memory-limit``, the lab's cap), in time order.
    limits: list[LimitRecord] = dataclasses.field(default_factory=list)
    #: What a narrated session said (``crdscope demo``), in time order.
    notes: list[Note] = dataclasses.field(default_factory=list)

    @property
    def start(self) -> float | None:
        return self.samples[0].timestamp if self.samples else None

    @property
    def end(self) -> float | None:
        return self.samples[-1].timestamp if self.samples else None


def read_recording(path: str | Path) -> Recording:
    """Read a whole recording (up to any damage) into memory, samples in time order."""
    reader = RecordingReader(path)
    samples: list[Sample] = []
    events: list[Event] = []
    limits: list[LimitRecord] = []
    notes: list[Note] = []
    for item in reader:
        if isinstance(item, Event):
            events.append(item)
        elif isinstance(item, LimitRecord):
            limits.append(item)
        elif isinstance(item, Note):
            notes.append(item)
        else:
            samples.append(item)
    # Probes finish out of order by a few milliseconds; replay by when each sample was taken.
    samples.sort(key=lambda s: s.timestamp)
    limits.sort(key=lambda r: r.timestamp)
    notes.sort(key=lambda n: n.timestamp)
    return Recording(path=reader.path, header=reader.header, cluster=reader.cluster, samples=samples,
                     events=events, damage=reader.damage, ended=reader.ended, parts=reader.parts, limits=limits,
                     notes=notes)



class ReplayFeed:
    """Plays a :class:`Recording` to sinks on the recording's own clock, scaled by ``speed``.

    ``speed`` 1.0 is real time, 10.0 ten times faster, ``math.inf`` (or <= 0) as fast as
    the sinks take samples.  ``step()`` delivers the next sample (at once, paused or not);
    ``seek(t)`` jumps to recording time ``t``: the samples before it are delivered quickly
    so that panels rebuild their history (a seek backwards first calls the reset
    listeners, then replays from the start).  ``run()`` returns at the end of the
    recording unless ``hold_at_end`` (the TUI keeps the feed alive for seeks).
    """

    def __init__(self, recording: Recording, *, speed: float = 1.0, hold_at_end: bool = False) -> None:
        self.recording = recording
        self.samples = recording.samples
        self.cluster = recording.cluster
        self.hold_at_end = hold_at_end
        self.sinks: list[Sink] = []
        self.reset_listeners: list[Callable[[], None]] = []
        self.position = 0
        #: The recording time the replay has reached.
        self.clock: float = recording.start or 0.0
        self.finished = asyncio.Event()
        self._speed = _valid_speed(speed)
        self._paused = False
        self._wake = asyncio.Event()
        self._steps = 0
        self._seek_to: float | None = None

    # -- the feed interface -------------------------------------------------------------
    def add_sink(self, sink: Sink) -> None:
        """Receive every replayed sample (sync or async callable)."""
        self.sinks.append(sink)

    def add_reset_listener(self, listener: Callable[[], None]) -> None:
        """Called before a backwards seek replays from the start: forget what was shown."""
        self.reset_listeners.append(listener)

    def pause(self) -> None:
        self._paused = True
        self._wake.set()

    def resume(self) -> None:
        self._paused = False
        self._wake.set()

    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def speed(self) -> float:
        return self._speed

    @speed.setter
    def speed(self, value: float) -> None:
        self._speed = _valid_speed(value)
        self._wake.set()

    def step(self) -> None:
        """Deliver the next sample now (the replay stays paused if it was)."""
        self._steps += 1
        self._wake.set()

    def seek(self, timestamp: float) -> None:
        """Jump to recording time ``timestamp`` (clamped to the recording)."""
        self._seek_to = float(timestamp)
        self._wake.set()

    @property
    def start(self) -> float | None:
        return self.recording.start

    @property
    def end(self) -> float | None:
        return self.recording.end

    @property
    def context(self) -> str:
        """The recorded cluster's context (the app's header shows it)."""
        return self.cluster.context

    @property
    def server(self) -> str:
        return self.cluster.server

    def now(self) -> float:
        """The replay clock: the recording time reached."""
        return self.clock

    @property
    def at_end(self) -> bool:
        return self.position >= len(self.samples)

    # -- playing ---------------------------------------------------------------------------
    async def run(self) -> None:
        """Replay until the end (or forever with ``hold_at_end``); cancel to stop."""
        while True:
            self._wake.clear()
            if self._seek_to is not None:
                target, self._seek_to = self._seek_to, None
                await self._seek(target)
                continue
            if self._steps:
                self._steps -= 1
                if not self.at_end:
                    await self._deliver_next()
                continue
            if self.at_end:
                self.finished.set()
                if not self.hold_at_end:
                    return
                await self._wake.wait()
                continue
            self.finished.clear()
            if self._paused:
                await self._wake.wait()
                continue
            following = self.samples[self.position]
            if math.isinf(self._speed):
                await self._deliver_next()
                await asyncio.sleep(0)  # let the sinks' consumers (and the UI) breathe
                continue
            delay = (following.timestamp - self.clock) / self._speed
            if delay > 0:
                started = time.monotonic()
                try:
                    async with asyncio.timeout(delay):  # not wait_for: it can swallow a cancellation
                        await self._wake.wait()
                except TimeoutError:
                    self.clock = following.timestamp
                else:  # woken by pause/seek/speed/step: keep the time played, then re-decide
                    self.clock = min(following.timestamp, self.clock + (time.monotonic() - started) * self._speed)
                    continue
            await self._deliver_next()

    async def _deliver_next(self) -> None:
        sample = self.samples[self.position]
        self.position += 1
        self.clock = max(self.clock, sample.timestamp)
        await deliver(self.sinks, sample)

    async def _seek(self, target: float) -> None:
        if not self.samples:
            return
        target = min(max(target, self.samples[0].timestamp), self.samples[-1].timestamp)
        if target < self.clock:
            for listener in list(self.reset_listeners):
                listener()
            self.position = 0
            self.clock = self.samples[0].timestamp
        delivered = 0
        while not self.at_end and self.samples[self.position].timestamp <= target:
            await self._deliver_next()
            delivered += 1
            if delivered % 100 == 0:
                await asyncio.sleep(0)
        self.clock = target


def replay_core(feed: ReplayFeed, thresholds: Thresholds | None = None) -> WatchCore:
    """The session core a recording's replay feeds: its own store, named after the recorded
    context; a seek backwards resets it (the store stays the same object: views keep working).

    Its facts know the memory limit given while the recording was made, as of each sample's time
    (a recording of an older crdscope carries none: its health samples held the limit).
    """
    facts = ClusterFacts()
    limits = feed.recording.limits
    if limits:
        # Before the core's own sink: each sample is judged by the limit given at its time.
        feed.add_sink(lambda sample: facts.give_limit(limit_at(limits, sample.timestamp)))
    core = WatchCore(feed, store=SessionStore(), thresholds=thresholds, cluster=feed.context, facts=facts)
    feed.add_reset_listener(core.reset)
    return core


def _valid_speed(value: float) -> float:
    value = float(value)
    if math.isnan(value):
        raise ConfigError("replay speed must be a number")
    return math.inf if value <= 0 else value


def seek_target(text: str, start: float, end: float, clock: float) -> float:
    """Where a person asked to seek: ``HH:MM[:SS]`` (recording's local time), ``+90s``/``-5m``
    (from the replay clock), or ``NN%`` of the recording; :class:`ConfigError` otherwise."""
    value = text.strip()
    if value.endswith("%"):
        try:
            fraction = float(value[:-1]) / 100.0
        except ValueError:
            raise ConfigError(f"cannot seek to '{text}': not a percentage") from None
        return start + min(1.0, max(0.0, fraction)) * (end - start)
    if value[:1] in "+-" and len(value) > 1:
        seconds = parse_duration(value[1:], flag="seek")
        return clock + seconds if value[0] == "+" else clock - seconds
    parts = value.split(":")
    if 2 <= len(parts) <= 3 and all(p.isdigit() for p in parts):
        hours, minutes, seconds = (int(p) for p in (*parts, "0")[:3])
        if hours < 24 and minutes < 60 and seconds < 60:
            day = time.localtime(start)
            candidate = time.mktime((day.tm_year, day.tm_mon, day.tm_mday, hours, minutes, seconds, 0, 0, -1))
            if candidate < start - 12 * 3600:  # a recording that runs past midnight
                candidate += 86400
            return candidate
    raise ConfigError(f"cannot seek to '{text}': use HH:MM[:SS], +90s / -5m, or 50%")
