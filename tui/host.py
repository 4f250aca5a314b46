"""What the monitor's screens, dialogs and actions may ask of the app they run in.

:class:`tui.app.CrdscopeApp` is a :class:`MonitorHost`.  A screen or an action types its app as
the host (``host_of(widget)``) instead of importing the app: the app imports its screens, and the
screens never import the app, so the imports go one way.  What a widget shows of one cluster it
reads from that cluster's :class:`tui.sessions.ClusterSession`, handed to it when it is built.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from textual.app import App
from textual.dom import DOMNode

if TYPE_CHECKING:
    from .sessions import ClusterSession

#: A palette entry: its name, its help line, what it does.
PaletteCommand = tuple[str, str, Callable[[], object]]


class MonitorHost(App[None]):
    """The monitor app as its screens and actions see it (the app implements every method)."""

    #: Every watched cluster, in the order given (a fleet when several).
    sessions: list[ClusterSession]
    #: The cluster the monitor screen shows, and the one ``e``, ``f`` and ``l`` act on.
    session: ClusterSession
    #: A label before the header's first line ("REPLAY", "DEMO"), or "".
    mode_label: str = ""

    def open_session(self, session: ClusterSession) -> None:
        """Show ``session``'s full monitor (from the fleet or compare screen)."""
        raise NotImplementedError

    def hold_collections(self, until: Callable[[Callable[[], None]], object] | None = None) -> None:
        """Hold the garbage collector off until the next frame (or ``until`` calls back)."""
        raise NotImplementedError

    def palette_commands(self) -> list[PaletteCommand]:
        """Every action for the command palette."""
        raise NotImplementedError

    def load_everywhere(self) -> None:
        """The same source into every cluster at the same pace (the fleet and compare screens' ``l``)."""
        raise NotImplementedError


def host_of(node: DOMNode) -> MonitorHost:
    """The monitor app ``node`` runs in (crdscope's screens only run in one)."""
    return cast(MonitorHost, node.app)
