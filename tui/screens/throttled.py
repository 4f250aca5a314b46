"""A screen over every watched cluster that redraws at most every ``MIN_REDRAW_SECONDS`` (the fleet
and compare screens): however many samples arrive, a key press never waits behind a redraw per sample."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, ClassVar, cast

from textual.screen import Screen
from textual.timer import Timer

if TYPE_CHECKING:
    from ..app import CrdscopeApp
    from ..sessions import ClusterSession


class ThrottledScreen(Screen[None]):
    """A screen over every cluster that redraws at most every ``MIN_REDRAW_SECONDS``."""

    MIN_REDRAW_SECONDS: ClassVar[float] = 0.5

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._redraw_timer: Timer | None = None
        self._drawn_at = 0.0
        #: Redraws so far (tests and the benchmark count them).
        self.draws = 0

    @property
    def monitor_app(self) -> CrdscopeApp:
        """The app this screen belongs to (always crdscope's; typed for the checker, not imported)."""
        return cast("CrdscopeApp", self.app)

    def on_mount(self) -> None:
        self.redraw()

    def on_screen_resume(self) -> None:
        self.redraw()  # back from a cluster's monitor: samples arrived meanwhile

    def cluster_changed(self, session: ClusterSession) -> None:
        """A sample of ``session`` arrived: redraw soon (merged with the others of the moment)."""
        if self._redraw_timer is not None or not self.is_current:
            return
        delay = max(0.05, self._drawn_at + self.MIN_REDRAW_SECONDS - time.monotonic())
        self._redraw_timer = self.set_timer(delay, self.redraw)

    def redraw(self) -> None:
        """Draw from the stores now."""
        self._redraw_timer = None
        self._drawn_at = time.monotonic()
        self.draws += 1
        self.draw()

    def draw(self) -> None:
        """Update the widgets (subclasses)."""
