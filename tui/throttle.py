"""One redraw per moment however many samples arrive: the panels' and the fleet screens' throttle."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from textual.timer import Timer

#: Textual timers cannot take a zero delay; 50 ms also merges a burst of samples into one redraw.
FLOOR_SECONDS = 0.05


class TimerOwner(Protocol):
    """What can run a timer (a widget, a screen)."""

    def set_timer(self, delay: float, callback: Callable[[], object]) -> Timer: ...


class RedrawThrottle:
    """Schedules ``redraw`` at most every ``min_seconds``: a request while one is pending is merged.

    The owner calls :meth:`request` when something it shows is new, and :meth:`drawn` at the top of
    its redraw (also a redraw made directly, which takes the place of a pending one).
    """

    def __init__(self, owner: TimerOwner, redraw: Callable[[], None], min_seconds: float) -> None:
        self._owner = owner
        self._redraw = redraw
        self.min_seconds = min_seconds
        self._timer: Timer | None = None
        self._drawn_at = 0.0

    @property
    def pending(self) -> bool:
        """A redraw is scheduled."""
        return self._timer is not None

    def request(self) -> None:
        """Redraw soon: at once if the last one is ``min_seconds`` old, else when it will be."""
        if self._timer is not None:
            return
        delay = max(FLOOR_SECONDS, self._drawn_at + self.min_seconds - time.monotonic())
        self._timer = self._owner.set_timer(delay, self._redraw)

    def drawn(self) -> None:
        """The owner is redrawing now: a pending timer is spent (or no longer needed)."""
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self._drawn_at = time.monotonic()
