"""The guard: heavy optional reads hold back while the API server is near its memory limit.

On a control plane close to being OOM-killed, the monitor must not be what pushes it
over: the ``/openapi/v2`` fetch (the server builds the whole document), the
``/openapi/v3`` group-version documents and the legacy discovery walk (2+N requests)
wait while the memory finding says the server's memory is near its limit
(``thresholds.memory_limit_fraction_warn`` of the one limit the session knows:
:class:`base.facts.ClusterFacts`).  The guard judges nothing itself: the finding's
verdict is written into the facts by the session (``ClusterFacts.memory_pressure``)
and read here.  What is held back, and why, is in the footprint sample, so every front
end says so.
"""

from __future__ import annotations

from crdscope.base.facts import ClusterFacts


class Guard:
    """Whether heavy optional reads may run now, and which ones waited."""

    def __init__(self, facts: ClusterFacts | None = None) -> None:
        self.facts = facts if facts is not None else ClusterFacts()
        #: Feature -> the reason it last held back for, while the verdict stands.
        self._held_back: dict[str, str] = {}

    @property
    def reason(self) -> str | None:
        """Why reads hold back now (None: they may run)."""
        return self.facts.memory_pressure

    def allows(self, feature: str) -> bool:
        """True when ``feature`` may run now; otherwise remembers that it held back."""
        reason = self.reason
        if reason is None:
            self._held_back.clear()
            return True
        self._held_back[feature] = reason
        return False

    def held_back(self) -> dict[str, str]:
        """Feature -> why it held back, while the verdict stands (empty once it is lifted)."""
        if self.reason is None:
            self._held_back.clear()
        return dict(self._held_back)
