"""Record a session: every sample of every probe, loader progress and events, as they happen.

Format: JSON Lines (one JSON object per line, UTF-8), chosen over SQLite because

* it is append-only by nature: a record is one ``write`` of one line, so a
  crash or a kill can only ever tear the *last* line, and everything before it
  stays readable (SQLite would need a journal and a checkpoint policy to say
  the same, and a torn database is all-or-nothing for simple tools);
* the replay reader can say exactly where damage starts (line and byte) and
  replay everything before it;
* people can read, ``grep`` and ``jq`` a recording, and attach it to a bug report;
* replay and reports stream it front to back, which is all they need
  (seeking inside a recording is done on the samples in memory).

Layout: the first line is the header ::

    {"type": "header", "format": "crdscope-recording", "format_version": 1,
     "crdscope_version": "...", "session_id": "...", "part": 1, "started": <unix s>,
     "cluster": {"server": "https://...", "context": "...", "kubernetes_version": "v1.37.2"}}

then one record per line: ``{"type": "sample", "probe": "<name>", "data": {...}}`` (the
sample's ``to_json()``), ``{"type": "event", "data": {...}}`` (:class:`session.events.Event`),
``{"type": "finding", "data": {"timestamp", "change", "finding"}}`` (a finding opened, closed
or changed severity: :class:`findings.model.FindingChange`), ``{"type": "limit", "data":
{"timestamp", "memory_limit_bytes", "memory_limit_origin", "memory_limit_source"}}`` (the memory
limit given from then on, ``--memory-limit`` or the lab's cap: :class:`base.facts.LimitRecord`;
without the size, none; readers before it skip it), and on a clean close
``{"type": "note", "data": {"timestamp", "line", "severity", "kind", "cast"}}`` (a line a narrated
session said: :class:`session.notes.Note`; readers before it skip it), and on a clean close
``{"type": "end", "timestamp": ..., "reason": "closed" | "rotated",
"next": "<file of the next part>"}``.  The header names the cluster by its server
address, context name and Kubernetes version only: never a user, token, key or
certificate.

Flush policy: every record is written and flushed to the kernel at once (a killed
or crashed crdscope loses nothing already recorded); a background thread
``fsync``s the file once a second when something was written, so even a machine
crash loses at most the last second.

Size cap and rotation: a file that would grow past ``max_file_bytes`` is closed
and the session continues in ``<stem>.part<N>.jsonl`` with its own header (same
session id, next part number); the replay reader follows the parts.  In the
default recordings directory (:func:`recordings_dir`) the oldest recordings are
deleted while the directory holds more than ``keep_bytes``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import threading
import time
import uuid
from pathlib import Path
from collections.abc import Set as AbstractSet
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import msgspec

from crdscope.base.version import __version__
from crdscope.base.errors import ConfigError
from crdscope.base.paths import data_dir
from crdscope.base.facts import LimitRecord
from crdscope.base.samples import Sample
from crdscope.findings.model import FindingChange

from .events import Event
from .notes import Note

FORMAT = "crdscope-recording"
FORMAT_VERSION = 1
SUFFIX = ".jsonl"
#: One file of a recording stays under this size; the session continues in a new part.
DEFAULT_MAX_FILE_BYTES = 64 * 1024 * 1024
#: The default recordings directory keeps at most this much (oldest recordings go first).
DEFAULT_KEEP_BYTES = 1024 * 1024 * 1024
#: At most this much recorded time is lost when the machine itself crashes.
FSYNC_INTERVAL_SECONDS = 1.0


@dataclasses.dataclass(frozen=True)
class ClusterInfo:
    """What a recording says about the cluster: never credentials."""

    server: str
    context: str = ""
    kubernetes_version: str = ""

    def to_json(self) -> dict[str, str]:
        return {"server": public_server(self.server), "context": self.context,
                "kubernetes_version": self.kubernetes_version}


def public_server(server: str) -> str:
    """The server address without any ``user:password@`` part."""
    try:
        parts = urlsplit(server)
    except ValueError:
        return server
    if "@" not in parts.netloc:
        return server
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


#: The one ``/version`` request that names the cluster must not hold up the monitor or the watch.
DESCRIBE_TIMEOUT_SECONDS = 5.0


async def describe_cluster(cluster: Any, timeout: float = DESCRIBE_TIMEOUT_SECONDS) -> ClusterInfo:
    """Server, context and Kubernetes version of a :class:`connection.cluster.Cluster` (one ``/version``).

    A server that does not answer within ``timeout`` (frozen, say) is still described, its
    version unknown: watching it is the point.
    """
    from crdscope.probes.version import probe_version

    try:
        sample = await asyncio.wait_for(probe_version(cluster), timeout)
    except TimeoutError:
        return ClusterInfo(server=cluster.server, context=cluster.context)
    return ClusterInfo(server=cluster.server, context=cluster.context, kubernetes_version=sample.git_version)


def recordings_dir() -> Path:
    """Where the monitor records by default: ``$XDG_DATA_HOME/crdscope/recordings``."""
    return data_dir() / "recordings"


def default_recording_path(context: str, now: float | None = None) -> Path:
    """A new file in :func:`recordings_dir` named after the time and the context."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(time.time() if now is None else now))
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", context or "cluster").strip("._") or "cluster"
    return recordings_dir() / f"{stamp}-{safe}{SUFFIX}"


def part_path(first: Path, number: int) -> Path:
    """The file of part ``number`` (1 is the first file itself)."""
    if number <= 1:
        return first
    stem = first.name[: -len(first.suffix)] if first.suffix else first.name
    return first.with_name(f"{stem}.part{number}{first.suffix}")


def recording_path(record: str, context: str, fleet: bool) -> str:
    """Where a cluster's recording goes: ``record`` itself, or in a fleet ``NAME.<context>.EXT``
    beside it (one recording per cluster; a context's unsafe characters become ``_``)."""
    if not fleet:
        return record
    path = Path(record)
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", context) or "context"
    return str(path.with_name(f"{path.stem}.{safe}{path.suffix}"))


def header_record(cluster: ClusterInfo, session_id: str, part: int, started: float) -> dict[str, Any]:
    """The first line of every part."""
    return {"type": "header", "format": FORMAT, "format_version": FORMAT_VERSION,
            "crdscope_version": __version__, "session_id": session_id, "part": part,
            "started": started, "cluster": cluster.to_json()}


def sample_record(sample: Sample) -> dict[str, Any]:
    """The record of one sample (any probe, including the loader's progress)."""
    return {"type": "sample", "probe": type(sample).probe, "data": sample.to_json()}


#: Writes a sample's line in one pass: msgspec encodes the Sample dataclass itself, as
#: ``Sample.to_json`` sees it (NaN and infinities as null), with no dict built in between.
_LINE_ENCODER = msgspec.json.Encoder()


def sample_line(sample: Sample) -> bytes:
    """``encode(sample_record(sample))`` in one msgspec pass: every sample of every probe is recorded.

    Readers get the same record; the bytes differ from :func:`encode`'s only where JSON has two
    spellings of one value (non-ASCII text as UTF-8 rather than ``\\u`` escapes, ``1e-05`` as ``0.00001``).
    """
    return _LINE_ENCODER.encode({"type": "sample", "probe": type(sample).probe, "data": sample}) + b"\n"


def event_record(event: Event) -> dict[str, Any]:
    return {"type": "event", "data": event.to_json()}


def finding_record(change: FindingChange) -> dict[str, Any]:
    """A finding opening, closing or changing severity (:mod:`findings`)."""
    return {"type": "finding", "data": change.to_json()}


def encode(record: dict[str, Any]) -> bytes:
    """One line of strict JSON (no NaN: samples already turn it into null)."""
    return json.dumps(record, separators=(",", ":"), allow_nan=False).encode("utf-8") + b"\n"


class Recorder:
    """Appends records to a session file; usable directly as a monitor sink (``recorder(sample)``).

    Thread-safe: the monitor's loop and a loader callback may record at the same time.
    """

    def __init__(self, path: str | Path, cluster: ClusterInfo, *,
                 max_file_bytes: int = DEFAULT_MAX_FILE_BYTES, keep_bytes: int | None = None,
                 fsync_interval: float = FSYNC_INTERVAL_SECONDS) -> None:
        self.first_path = Path(path)
        self.cluster = cluster
        self.session_id = uuid.uuid4().hex
        self.started = time.time()
        self.max_file_bytes = max_file_bytes
        #: Prune the recordings' directory down to this many bytes (None: never delete anything).
        self.keep_bytes = keep_bytes
        self.paths: list[Path] = []
        self.records = 0
        self._lock = threading.Lock()
        self._handle: Any = None
        self._size = 0
        self._dirty = False
        self._closed = False
        self._open_part(1)
        self._stop = threading.Event()
        self._syncer = threading.Thread(target=self._sync_loop, args=(fsync_interval,),
                                        name="recorder-fsync", daemon=True)
        self._syncer.start()

    # -- writing --------------------------------------------------------------------
    def __call__(self, item: Sample | Event) -> None:
        """Record a sample or an event (the monitor's sink signature)."""
        self.record(item)

    def record(self, item: Sample | Event | FindingChange | LimitRecord | Note) -> None:
        """Record a sample, an event, a finding's transition, a given memory limit or a narrator's line now."""
        if isinstance(item, Event):
            self.write(event_record(item))
        elif isinstance(item, FindingChange):
            self.write(finding_record(item))
        elif isinstance(item, LimitRecord):
            self.write({"type": "limit", "data": item.to_json()})
        elif isinstance(item, Note):
            self.write({"type": "note", "data": item.to_json()})
        else:
            self._append(sample_line(item))

    def write(self, record: dict[str, Any]) -> None:
        """Append one record (rotating to a new part first if this one would pass the cap)."""
        self._append(encode(record))

    def _append(self, line: bytes) -> None:
        with self._lock:
            if self._closed:
                return
            if self._size + len(line) + self._end_reserve > self.max_file_bytes and self.records_in_part > 0:
                self._rotate()
            self._handle.write(line)
            self._handle.flush()  # in the kernel: a kill or a crash of crdscope loses nothing
            self._size += len(line)
            self.records += 1
            self.records_in_part += 1
            self._dirty = True

    def close(self, reason: str = "closed") -> None:
        """Write the end record, fsync and close (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._end(reason)
            self._closed = True
        self._stop.set()
        if self._syncer.is_alive() and threading.current_thread() is not self._syncer:
            self._syncer.join(timeout=5)

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def synced(self) -> bool:
        """True when everything written so far has been fsynced (the background thread's job)."""
        return not self._dirty

    @property
    def path(self) -> Path:
        """The file being written now (the last part)."""
        return self.paths[-1]

    # -- parts ------------------------------------------------------------------------
    def _open_part(self, number: int) -> None:
        path = part_path(self.first_path, number)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        except OSError as exc:
            raise ConfigError(f"cannot record to {path}: {exc.strerror}") from None
        self._handle = os.fdopen(fd, "wb")
        self.paths.append(path)
        self.part = number
        line = encode(header_record(self.cluster, self.session_id, number, self.started))
        self._handle.write(line)
        self._handle.flush()
        self._size = len(line)
        self.records_in_part = 0
        self._dirty = True
        # Room for the end record, so that a part stays under the cap once closed.
        self._end_reserve = len(encode(self._end_record("rotated", part_path(self.first_path, number + 1))))
        if self.keep_bytes is not None:
            # Every part of this session stays: pruning is for older sessions, and a replay
            # follows the parts from the first.
            prune(path.parent, self.keep_bytes, keep=set(self.paths))

    @staticmethod
    def _end_record(reason: str, next_path: Path | None = None) -> dict[str, Any]:
        end: dict[str, Any] = {"type": "end", "timestamp": time.time(), "reason": reason}
        if next_path is not None:
            end["next"] = next_path.name
        return end

    def _end(self, reason: str, next_path: Path | None = None) -> None:
        try:
            self._handle.write(encode(self._end_record(reason, next_path)))
            self._handle.flush()
            os.fsync(self._handle.fileno())
        finally:
            self._handle.close()
        self._dirty = False

    def _rotate(self) -> None:
        self._end("rotated", part_path(self.first_path, self.part + 1))
        self._open_part(self.part + 1)

    def _sync_loop(self, interval: float) -> None:
        while not self._stop.wait(interval):
            with self._lock:
                if self._closed:
                    return
                if not self._dirty:
                    continue
                # fsync outside the lock (it can take a while on a busy disk, and writers are on
                # the event loop); a duplicate descriptor keeps the file open across a rotation.
                fd = os.dup(self._handle.fileno())
                self._dirty = False
            try:
                os.fsync(fd)
            except OSError:
                pass  # a full disk shows up on the next write, with its own message
            finally:
                os.close(fd)


def prune(directory: Path, keep_bytes: int, keep: AbstractSet[Path] = frozenset()) -> list[Path]:
    """Delete the oldest recordings in ``directory`` while it holds more than ``keep_bytes``.

    Only crdscope recordings (``*.jsonl`` files) are considered; ``keep`` is never deleted.
    Returns the deleted files.
    """
    try:
        files = [p for p in directory.iterdir() if p.is_file() and p.suffix == SUFFIX]
    except OSError:
        return []
    stats = {}
    for path in files:
        try:
            stats[path] = path.stat()
        except OSError:
            continue
    total = sum(s.st_size for s in stats.values())
    deleted: list[Path] = []
    for path in sorted(stats, key=lambda p: (stats[p].st_mtime, p.name)):
        if total <= keep_bytes:
            break
        if path in keep:
            continue
        try:
            path.unlink()
        except OSError:
            continue
        total -= stats[path].st_size
        deleted.append(path)
    return deleted
