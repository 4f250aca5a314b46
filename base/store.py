"""The one store of samples: latest, last good and recent samples of each probe, read by type.

Every front end keeps its samples here (the TUI's panels, the headless watch, ``doctor``, replay,
the exporter, the report) and the findings engine reads the same store, so what one of them knows,
all know.  Typed reads name the sample class (``store.good(HealthSample)``), so a type checker sees
the fields a reader uses.  The TUI's panels are views over it: a layout change rebuilds widgets
without losing history, and replay's seek starts over with :meth:`SampleStore.clear`.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TypeVar

from .samples import Sample

SampleT = TypeVar("SampleT", bound=Sample)

#: Samples kept per probe: an hour of a 5-second cadence.
HISTORY = 720


@dataclass
class ProbeHealth:
    """How one probe is doing, for the header and the events log."""

    name: str
    runs: int = 0
    failures: int = 0
    consecutive_failures: int = 0
    last_run: float | None = None
    last_ok: float | None = None
    last_error: str | None = None
    last_seconds: float = 0.0

    @property
    def down(self) -> bool:
        return self.consecutive_failures > 0

    def record(self, error: str | None, when: float) -> None:
        """Count one run that ended at ``when``: failed with ``error``, or succeeded (None).

        The one place runs are counted: the scheduler counts what it runs, and the TUI's store
        counts the samples a feed without a scheduler (replay) delivers.
        """
        self.runs += 1
        self.last_run = when
        if error:
            self.failures += 1
            self.consecutive_failures += 1
            self.last_error = error
        else:
            self.consecutive_failures = 0
            self.last_ok = when
            self.last_error = None


class SampleStore:
    """Latest, last good and recent samples of each probe, with a change counter."""

    def __init__(self, history: int = HISTORY) -> None:
        self._size = history
        self._history: dict[str, deque[Sample]] = {}
        self._last_good: dict[str, Sample] = {}
        self._health: dict[str, ProbeHealth] = {}
        #: Bumped on every sample, so a view can tell whether it has something new to draw.
        self.version = 0

    def add(self, sample: Sample) -> None:
        """Keep a sample (the oldest one of its probe falls out past the history size)."""
        name = sample.probe
        self._history.setdefault(name, deque(maxlen=self._size)).append(sample)
        self._health.setdefault(name, ProbeHealth(name)).record(sample.error, sample.timestamp)
        if not sample.error:
            self._last_good[name] = sample
        self.version += 1

    def clear(self) -> None:
        """Forget everything (replay seeks back)."""
        self._history.clear()
        self._last_good.clear()
        self._health.clear()
        self.version += 1

    def latest(self, probe: str) -> Sample | None:
        """The newest sample of ``probe``, good or failed."""
        history = self._history.get(probe)
        return history[-1] if history else None

    def last_good(self, probe: str) -> Sample | None:
        """The newest sample of ``probe`` without an error."""
        return self._last_good.get(probe)

    def history(self, probe: str) -> list[Sample]:
        """Recent samples of ``probe``, oldest first."""
        return list(self._history.get(probe, ()))

    # -- typed reads: the sample class names the probe, and a type checker sees its fields ----------
    def latest_of(self, kind: type[SampleT]) -> SampleT | None:
        """The newest sample of ``kind``'s probe, good or failed (None if none, or of another class)."""
        found = self.latest(kind.probe)
        return found if isinstance(found, kind) else None

    def last_good_of(self, kind: type[SampleT]) -> SampleT | None:
        """The newest sample of ``kind``'s probe without an error."""
        found = self._last_good.get(kind.probe)
        return found if isinstance(found, kind) else None

    good = last_good_of  # ``store.good(HealthSample)``: what the findings read

    def history_of(self, kind: type[SampleT]) -> list[SampleT]:
        """Recent samples of ``kind``'s probe, oldest first."""
        return [s for s in self._history.get(kind.probe, ()) if isinstance(s, kind)]

    def good_history_of(self, kind: type[SampleT]) -> list[SampleT]:
        """Recent samples of ``kind``'s probe without an error, oldest first."""
        return [s for s in self._history.get(kind.probe, ()) if isinstance(s, kind) and not s.error]

    def health(self) -> dict[str, ProbeHealth]:
        """Per-probe health derived from the samples seen (for feeds without a scheduler)."""
        return dict(self._health)
