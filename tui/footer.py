"""Textual's key footer, rebuilt only when the keys it shows change.

Textual's ``Footer`` recomposes (a new widget per key, each styled one by one) every time its
screen publishes a bindings update, and a screen publishes one for every focus change: opening
a cluster's monitor from the fleet (its panels mount and take focus in turn) rebuilt the footer
eight times, a third of the CPU of that key press (``bench fleet_ui``, profiled).  This one
merges the updates of a frame into one look, and rebuilds only when the shown keys differ.
"""

from __future__ import annotations

from textual.screen import Screen
from textual.widgets import Footer


class KeyFooter(Footer):
    """A ``Footer`` that recomposes at most once a frame, and only when the shown keys changed."""

    def __init__(self) -> None:
        super().__init__()
        self._look_pending = False
        self._shown: tuple[tuple[str, str, bool, str], ...] | None = None

    def bindings_changed(self, screen: Screen[object]) -> None:
        """The screen's bindings may have changed: look once, after this frame."""
        # As Footer.bindings_changed does: Footer.compose shows nothing until this is set (a private
        # attribute; tests/tui/test_key_footer.py fails should Textual rename it).
        self._bindings_ready = True
        if not screen.app.app_focus or self._look_pending:
            return
        if self.is_attached and screen is self.screen:
            self._look_pending = True
            self.call_after_refresh(self._look)

    async def _look(self) -> None:
        self._look_pending = False
        if not self.is_attached:
            return
        shown = tuple((binding.key, binding.description, enabled, tooltip)
                      for (_, binding, enabled, tooltip) in self.screen.active_bindings.values() if binding.show)
        if shown == self._shown:
            return
        self._shown = shown
        await self.recompose()
