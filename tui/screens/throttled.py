"""A screen over every watched cluster that redraws at most every ``MIN_REDRAW_SECONDS`` (the fleet
and compare screens): however many samples arrive, a key press never waits behind a redraw per sample."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual.screen import Screen

from ..host import MonitorHost, host_of
from ..throttle import RedrawThrottle

if TYPE_CHECKING:
    from ..sessions import ClusterSession


class ThrottledScreen(Screen[None]):
    """A screen over every cluster that redraws at most every ``MIN_REDRAW_SECONDS``."""

    MIN_REDRAW_SECONDS: ClassVar[float] = 0.5

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._throttle = RedrawThrottle(self, self.redraw, self.MIN_REDRAW_SECONDS)
        #: Redraws so far (tests and the benchmark count them).
        self.draws = 0

    @property
    def monitor_app(self) -> MonitorHost:
        """The monitor app this screen runs in."""
        return host_of(self)

    def on_mount(self) -> None:
        self.redraw()

    def on_screen_resume(self) -> None:
        # Back from a cluster's monitor: samples arrived meanwhile.  The screen appears at once
        # with what it last drew, the catch-up follows after that frame (as a panel's on_show).
        self.call_after_refresh(self.redraw)

    def cluster_changed(self, session: ClusterSession) -> None:
        """A sample of ``session`` arrived: redraw soon (merged with the others of the moment)."""
        if self.is_current:
            self._throttle.request()

    def redraw(self) -> None:
        """Draw from the stores now."""
        self._throttle.drawn()
        self.draws += 1
        self.draw()

    def draw(self) -> None:
        """Update the widgets (subclasses)."""
