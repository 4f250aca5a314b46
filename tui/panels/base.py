"""What every panel shares: a status line, staleness, throttled redraws, no tracebacks.

A panel is a view over one cluster (:class:`tui.sessions.ClusterSession`: its
:class:`session.core.SessionStore`, clock, thresholds, loader), handed to it when it is built: it
never fetches, and never asks the app.  The app tells it that a sample of one of its probes arrived
(:meth:`ProbePanel.changed`); the panel redraws at most every
``MIN_REDRAW_SECONDS`` so that a burst of samples costs one redraw, and its
status line is refreshed once a second so that "last good sample N s ago" keeps
counting while the API server is away.

A panel that is not displayed (an inactive tab) neither draws nor refreshes its
status: it remembers that it is behind and catches up when it is shown.  The
benchmark of key-press latency found hidden panels' redraws and per-second
layout passes to be most of the monitor's rendering time.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, ClassVar
from collections.abc import Iterable

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.dom import DOMNode
from ..format import escape
from textual.widget import Widget
from textual.widgets import Static

from ..format import age
from ..throttle import RedrawThrottle

if TYPE_CHECKING:
    from ..sessions import ClusterSession

log = logging.getLogger("crdscope.tui")


def one_line(text: str) -> str:
    """An error message as one line of markup-safe text."""
    return escape(" ".join(str(text).split()))


class ProbePanel(Vertical):
    """Base of the panels: subclasses set ``probes``/``panel_title`` and implement ``draw``."""

    #: Probes whose samples this panel renders; the first one owns the status line.
    probes: ClassVar[tuple[str, ...]] = ()
    panel_title: ClassVar[str] = ""
    #: Short label for the tab at 80 columns.
    tab_label: ClassVar[str] = ""
    #: What the panel shows, for the help screen (a second line after a newline).
    shows: ClassVar[str] = ""
    MIN_REDRAW_SECONDS: ClassVar[float] = 0.5

    def __init__(self, cluster: ClusterSession, *, id: str | None = None, wide: bool = False) -> None:
        # wide: it spans two columns of the monitor's grid (monitor.tcss styles the class).
        super().__init__(id=id or f"panel-{self.key()}", classes="probe-panel -wide" if wide else "probe-panel")
        #: The cluster this panel shows (its store, clock, thresholds, loader).
        self.cluster = cluster
        self.store = cluster.store
        self._throttle = RedrawThrottle(self, self.redraw, self.MIN_REDRAW_SECONDS)
        self._draw_error: str | None = None
        self._behind = False  # samples arrived while hidden
        self._status_shown: str | None = None
        self.draws = 0

    @classmethod
    def key(cls) -> str:
        """The panel's identifier (its first probe)."""
        return cls.probes[0]

    # -- composition ---------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static("", classes="panel-status", id=f"{self.key()}-status", markup=True)
        yield from self.compose_body()

    def compose_body(self) -> Iterable[Widget]:
        """The panel's own widgets, below the status line."""
        return ()

    def on_mount(self) -> None:
        self.border_title = self.panel_title
        self.set_interval(1.0, self.refresh_status)
        # Plots take their colours from the theme when drawn: draw again on a theme change.
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.redraw())
        self.redraw()

    # -- data in -----------------------------------------------------------------------
    def hidden(self) -> bool:
        """True while this panel or a container of it (an inactive tab) is not displayed."""
        node: DOMNode | None = self
        while node is not None:
            if not node.display:
                return True
            node = node.parent
        return False

    def on_show(self) -> None:
        """Catch up on what arrived while hidden, after the frame that shows the panel.

        The tab appears at once with what it last drew (its status line gives the age), and the
        catch-up draw follows in the next frame: a key press is answered by a frame, not held
        until every plot and table of the panel has been rebuilt.
        """
        self.refresh_status()
        if self._behind:
            self._behind = False
            self.call_after_refresh(self.redraw)

    def changed(self) -> None:
        """Something this panel renders is new in the store: redraw soon (throttled)."""
        if self.hidden():
            self._behind = True
            return
        self._throttle.request()

    def redraw(self) -> None:
        """Draw now from the store; a display bug becomes a one-line status, never a traceback."""
        self._throttle.drawn()
        try:
            self.draw()
            self._draw_error = None
        except Exception as exc:
            log.exception("panel %s failed to draw", self.key())
            self._draw_error = f"display error: {type(exc).__name__}: {exc}"
        self.draws += 1
        self.refresh_status()

    def draw(self) -> None:
        """Update the panel's widgets from the store (subclasses)."""

    # -- status line -----------------------------------------------------------------
    def now(self) -> float:
        """The feed's clock (replay time in a replay)."""
        return self.cluster.now()

    def refresh_status(self) -> None:
        """Show the status line again if its text changed (it is one row high: no layout pass)."""
        if self.hidden():
            return
        try:
            status = self.query_one(".panel-status", Static)
        except Exception:  # noqa: BLE001 - not composed yet, or being removed
            return
        markup = self.status_markup()
        if markup != self._status_shown:
            self._status_shown = markup
            status.update(markup, layout=False)

    def status_markup(self) -> str:
        """One line: fresh, stale, paused or failing, with the age of the last good sample."""
        if self._draw_error:
            return f"[$probe-fail]✗ {one_line(self._draw_error)}[/]"
        probe = self.probes[0]
        latest = self.store.latest(probe)
        good = self.store.last_good(probe)
        now = self.now()
        paused = self.cluster.probes_paused
        if latest is None:
            return "[$probe-idle]probes paused: no sample yet[/]" if paused else \
                "[$probe-idle]waiting for the first sample…[/]"
        if latest.error:
            last = f"{age(now - good.timestamp)} since last good sample" if good else "no good sample yet"
            return f"[$probe-fail]✗ {last} · {one_line(latest.error)}[/]"
        elapsed = now - latest.timestamp
        if paused:
            return f"[$probe-idle]⏸ probes paused · last sample {age(elapsed)} ago[/]"
        if elapsed > self.cluster.stale_after(probe):
            return f"[$probe-warn]● stale: last sample {age(elapsed)} ago[/]"
        return f"[$probe-ok]●[/] updated {age(elapsed)} ago"
