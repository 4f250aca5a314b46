"""The command palette: every action of the monitor, its themes and (on a lab) its faults.

The list itself comes from :meth:`tui.app.CrdscopeApp.palette_commands`, so a
key binding and its palette entry cannot drift apart.
"""

from __future__ import annotations

from textual.command import DiscoveryHit, Hit, Hits, Provider

from .host import MonitorHost, PaletteCommand


class CrdscopeCommands(Provider):
    """Palette entries for the monitor's actions (``name``, ``help``, callback)."""

    def _commands(self) -> list[PaletteCommand]:
        return self.app.palette_commands() if isinstance(self.app, MonitorHost) else []

    async def discover(self) -> Hits:
        for name, help_text, callback in self._commands():
            yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help_text, callback in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, help=help_text)
