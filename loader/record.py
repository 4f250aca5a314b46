"""The run record: an append-only journal of what a load run did, one line per outcome.

A run is one attempt to load one source into one cluster.  Its id
(``YYYYMMDD-HHMMSS-xxxxxx``: UTC start time, sortable and readable, plus 24
random bits so that two runs started in the same second differ) is written
into every CRD it applies (annotation ``crdscope.dev/load-run``) so that
``crdscope clean --run ID`` can find them.

The journal lives in ``$XDG_STATE_HOME/crdscope/loads/<run id>.jsonl``:

- line 1, ``{"run": ...}``: the run id, the source (as typed, and its content
  key), the server and context;
- ``{"attempt": n, ...}`` each time the run is started or resumed;
- ``{"name": ..., "outcome": created|updated|skipped|failed|established}`` per
  CRD outcome, ``{"entry": origin, "outcome": ...}`` for entries of the
  source that are not a CRD one can name (unreadable, duplicates);
- ``{"end": "done"|"stopped", ...}`` when an attempt ends.

Each line is flushed as it is written, so a killed process loses at most the
line being written (a torn last line is ignored on reading).  Loading the
same source (same content key) into the same server again resumes the most
recent run of it if that run did not end ``done``: the record says what is
finished, the cluster (via the CRD watch) confirms it, and only the rest is
sent.  A lock on the journal keeps two crdscope processes off one run.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args
from collections.abc import Iterator

from crdscope.base.errors import ConfigError
from crdscope.base.paths import state_dir

#: What became of a CRD or a source entry; ``established`` is recorded on top of created/updated.
Outcome = Literal["created", "updated", "skipped", "failed"]
RecordedOutcome = Literal["created", "updated", "skipped", "failed", "established"]
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)
APPLIED: tuple[Outcome, ...] = ("created", "updated")


def runs_dir() -> Path:
    """Where run journals live."""
    return state_dir() / "loads"


def new_run_id(now: float | None = None) -> str:
    """A fresh run id: UTC start time plus 6 random hex digits."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(time.time() if now is None else now))
    return f"{stamp}-{secrets.token_hex(3)}"


@dataclass
class ItemState:
    """The folded state of one CRD (by name) or one source entry (by origin)."""

    outcome: Outcome | None = None
    reason: str | None = None
    established: bool = False


@dataclass(frozen=True)
class RunInfo:
    """The first line of a journal, plus how it ended."""

    run_id: str
    source: str
    source_key: str
    server: str
    context: str
    started: float
    path: Path
    ended: str | None  # "done", "stopped" or None (killed, or in progress)


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            try:
                data = json.loads(line)
            except ValueError:
                continue  # a torn last line of a killed process
            if isinstance(data, dict):
                yield data


def read_info(path: Path) -> RunInfo | None:
    """What a journal is about (None if it is not a journal)."""
    header: dict[str, Any] | None = None
    ended = None
    try:
        for data in _lines(path):
            if header is None:
                if "run" not in data:
                    return None
                header = data
            elif "attempt" in data:
                ended = None
            elif "end" in data:
                ended = str(data["end"])
    except OSError:
        return None
    if header is None:
        return None
    return RunInfo(run_id=str(header["run"]), source=str(header.get("source", "")),
                   source_key=str(header.get("source_key", "")), server=str(header.get("server", "")),
                   context=str(header.get("context", "")), started=float(header.get("started", 0.0)),
                   path=path, ended=ended)


def list_runs(directory: Path | None = None) -> list[RunInfo]:
    """Every recorded run, most recent first."""
    directory = directory or runs_dir()
    infos = [info for path in directory.glob("*.jsonl") if (info := read_info(path)) is not None]
    return sorted(infos, key=lambda info: info.started, reverse=True)


class RunRecord:
    """The journal of one run, open for appending, with its folded state and counts."""

    def __init__(self, path: Path, info: RunInfo, handle: Any, *, resumed: bool) -> None:
        self.path = path
        self.info = info
        self.run_id = info.run_id
        self.resumed = resumed
        self._handle = handle
        self.crds: dict[str, ItemState] = {}
        self.entries: dict[str, ItemState] = {}
        self.counts = dict.fromkeys(OUTCOMES, 0)
        self.established = 0
        self.attempts = 0
        #: Changes whenever an outcome does (lets readers cache derived lists).
        self.version = 0

    # -- opening -------------------------------------------------------------------
    @classmethod
    def open(cls, *, source: str, source_key: str, server: str, context: str,
             options: dict[str, Any] | None = None, directory: Path | None = None,
             resume: bool = True) -> RunRecord:
        """Resume the latest unfinished run of this source on this server, or start a new one."""
        directory = directory or runs_dir()
        directory.mkdir(parents=True, exist_ok=True)
        if resume:
            for info in list_runs(directory):
                if info.source_key == source_key and info.server == server:
                    if info.ended != "done":
                        return cls._attach(info, options)
                    break  # the latest run of this source finished: start a new one
        run_id = new_run_id()
        path = directory / f"{run_id}.jsonl"
        info = RunInfo(run_id=run_id, source=source, source_key=source_key, server=server,
                       context=context, started=time.time(), path=path, ended=None)
        handle = cls._lock(open(path, "a", encoding="utf-8"), run_id)  # noqa: SIM115 - held (locked) for the run
        record = cls(path, info, handle, resumed=False)
        record._write({"run": run_id, "source": source, "source_key": source_key, "server": server,
                       "context": context, "started": info.started})
        record._start_attempt(options)
        return record

    @classmethod
    def _attach(cls, info: RunInfo, options: dict[str, Any] | None) -> RunRecord:
        handle = cls._lock(open(info.path, "a", encoding="utf-8"), info.run_id)  # noqa: SIM115 - held for the run
        with open(info.path, "rb") as existing:
            existing.seek(0, os.SEEK_END)
            if existing.tell():
                existing.seek(-1, os.SEEK_END)
                if existing.read(1) != b"\n":
                    handle.write("\n")  # end a torn last line so that the next one stays whole
        record = cls(info.path, info, handle, resumed=True)
        for data in _lines(info.path):
            if "attempt" in data:
                record.attempts = max(record.attempts, int(data["attempt"]))
            elif "outcome" in data:
                record._fold(data)
        record._start_attempt(options)
        return record

    @staticmethod
    def _lock(handle: Any, run_id: str) -> Any:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            raise ConfigError(f"load run {run_id} is in progress in another crdscope process") from None
        return handle

    def _start_attempt(self, options: dict[str, Any] | None) -> None:
        self.attempts += 1
        self._write({"attempt": self.attempts, "t": time.time(), "options": options or {}})

    # -- writing -------------------------------------------------------------------
    def _write(self, data: dict[str, Any]) -> None:
        self._handle.write(json.dumps(data, separators=(",", ":")) + "\n")
        self._handle.flush()

    def _fold(self, data: dict[str, Any]) -> None:
        self.version += 1
        if "name" in data:
            table, key = self.crds, str(data["name"])
        else:
            table, key = self.entries, str(data.get("entry", ""))
        state = table.setdefault(key, ItemState())
        outcome = data["outcome"]
        if outcome == "established":
            if not state.established and state.outcome in APPLIED:
                self.established += 1
            state.established = True
            return
        if outcome not in OUTCOMES:
            return
        if state.outcome is not None:
            self.counts[state.outcome] -= 1
        if state.established and state.outcome in APPLIED:
            self.established -= 1
        state.outcome = outcome
        state.reason = data.get("reason")
        state.established = False
        self.counts[outcome] += 1

    def note(self, name: str) -> None:
        """Count CRD ``name`` as part of the run (pending until it has an outcome); not written."""
        self.crds.setdefault(name, ItemState())

    def crd(self, name: str, outcome: str, reason: str | None = None, **extra: Any) -> None:
        """Record the outcome of the CRD ``name`` (created, updated, skipped, failed, established)."""
        data = {"t": round(time.time(), 3), "name": name, "outcome": outcome, **extra}
        if reason:
            data["reason"] = reason
        self._fold(data)
        self._write(data)

    def entry(self, origin: str, outcome: str, reason: str) -> None:
        """Record the outcome of a source entry that is not a nameable CRD."""
        data = {"t": round(time.time(), 3), "entry": origin, "outcome": outcome, "reason": reason}
        self._fold(data)
        self._write(data)

    def end(self, state: str, **summary: Any) -> None:
        """Close the attempt: ``done`` (nothing left to do) or ``stopped``; syncs to disk."""
        self._write({"end": state, "t": time.time(), **summary})
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        """Release the journal (and its lock)."""
        if not self._handle.closed:
            self._handle.close()

    # -- reading -------------------------------------------------------------------
    def outcome(self, name: str) -> ItemState | None:
        """What the record says about CRD ``name`` (None: nothing yet)."""
        return self.crds.get(name)

    def problems(self, outcome: str) -> list[tuple[str, str]]:
        """(name or origin, reason) of every item whose outcome is ``outcome``."""
        found = [(name, state.reason or "") for name, state in self.crds.items() if state.outcome == outcome]
        found += [(origin, state.reason or "") for origin, state in self.entries.items() if state.outcome == outcome]
        return found
