"""Messages that carry data from feeds (any thread or task) into the widget tree."""

from __future__ import annotations

from textual.message import Message

from crdscope.probes.samples import Sample


class SampleArrived(Message):
    """A probe (or the loader) produced a sample."""

    def __init__(self, sample: Sample) -> None:
        super().__init__()
        self.sample = sample


class EventArrived(Message):
    """A transition worth a person's attention (an ``session.events.Event``-like object)."""

    def __init__(self, event: object) -> None:
        super().__init__()
        self.event = event
