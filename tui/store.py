"""The TUI's store: the shared sample store plus the events log the panels show."""

from __future__ import annotations

from collections import deque

from crdscope.base.store import SampleStore
from crdscope.session.events import Event

#: Events kept for the events log.
EVENTS = 500


class MonitorStore(SampleStore):
    """:class:`SampleStore` with the events detector's transitions, for the events panel."""

    def __init__(self, history: int | None = None) -> None:
        if history is None:
            super().__init__()
        else:
            super().__init__(history)
        #: Transitions from the events detector (``session.events.Event``), oldest first.
        self.events: deque[Event] = deque(maxlen=EVENTS)

    def add_event(self, event: Event) -> None:
        """Keep an event for the events log."""
        self.events.append(event)
        self.version += 1

    def clear(self) -> None:
        """Forget samples and events (replay seeks back)."""
        super().clear()
        self.events.clear()
