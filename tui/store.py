"""The samples the monitor has seen: the panels' shared model.

Panels are views over this store, so a layout change (grid <-> tabs) rebuilds
widgets without losing history, and replay's seek can start over with
:meth:`SampleStore.clear`.
"""

from __future__ import annotations

from collections import deque
from typing import TypeVar

from crdscope.base.samples import Sample
from crdscope.probes.scheduler import ProbeHealth
from crdscope.session.events import Event

SampleT = TypeVar("SampleT", bound=Sample)

#: Samples kept per probe: an hour of a 5-second cadence.
HISTORY = 720
#: Events kept for the events log.
EVENTS = 500


class SampleStore:
    """Latest, last good and recent samples of each probe, with a change counter."""

    def __init__(self, history: int = HISTORY) -> None:
        self._size = history
        self._history: dict[str, deque[Sample]] = {}
        self._last_good: dict[str, Sample] = {}
        self._health: dict[str, ProbeHealth] = {}
        #: Transitions from the events detector (``session.events.Event``), oldest first.
        self.events: deque[Event] = deque(maxlen=EVENTS)
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

    def add_event(self, event: Event) -> None:
        """Keep an event for the events log."""
        self.events.append(event)
        self.version += 1

    def clear(self) -> None:
        """Forget everything (replay seeks back)."""
        self._history.clear()
        self._last_good.clear()
        self._health.clear()
        self.events.clear()
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

    def history_of(self, kind: type[SampleT]) -> list[SampleT]:
        """Recent samples of ``kind``'s probe, oldest first."""
        return [s for s in self._history.get(kind.probe, ()) if isinstance(s, kind)]

    def good_history_of(self, kind: type[SampleT]) -> list[SampleT]:
        """Recent samples of ``kind``'s probe without an error, oldest first."""
        return [s for s in self._history.get(kind.probe, ()) if isinstance(s, kind) and not s.error]

    def health(self) -> dict[str, ProbeHealth]:
        """Per-probe health derived from the samples seen (for feeds without a scheduler)."""
        return dict(self._health)
