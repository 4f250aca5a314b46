"""Messages that carry data from feeds (any thread or task) into the widget tree."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.message import Message

from crdscope.base.samples import Sample

if TYPE_CHECKING:
    from .sessions import ClusterSession


class SampleArrived(Message):
    """A probe (or the loader) produced a sample; ``session``: the cluster it is about (None: the
    app's current one)."""

    def __init__(self, sample: Sample, session: ClusterSession | None = None) -> None:
        super().__init__()
        self.sample = sample
        self.session = session
