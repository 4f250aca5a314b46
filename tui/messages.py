"""Messages that carry data from feeds (any thread or task) into the widget tree."""

from __future__ import annotations

from textual.message import Message

from crdscope.base.samples import Sample


class SampleArrived(Message):
    """A probe (or the loader) produced a sample."""

    def __init__(self, sample: Sample) -> None:
        super().__init__()
        self.sample = sample
