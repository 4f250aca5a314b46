"""The TUI's store is the session core's (:class:`session.core.SessionStore`): samples plus the events log."""

from __future__ import annotations

from crdscope.session.core import SessionStore

#: The name the panels and screens use for the store they view.
MonitorStore = SessionStore

__all__ = ["MonitorStore"]
