"""Messages that carry what happened in a cluster's core into the widget tree."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.message import Message

from crdscope.session.core import Taken

if TYPE_CHECKING:
    from .sessions import ClusterSession


class SampleTaken(Message):
    """A cluster's core took a sample (a probe's, or the loader's): what it caused, for the screens
    that show ``session``."""

    def __init__(self, taken: Taken, session: ClusterSession) -> None:
        super().__init__()
        self.taken = taken
        self.session = session
