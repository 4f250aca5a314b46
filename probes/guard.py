"""The guard: heavy optional reads hold back while the API server is near its memory limit.

On a control plane close to being OOM-killed, the monitor must not be what pushes it
over: the ``/openapi/v2`` fetch (the server builds the whole document), the
``/openapi/v3`` group-version documents and the legacy discovery walk (2+N requests)
wait while the server's resident memory is at or over
``thresholds.memory_limit_fraction_warn`` of a known limit (``--memory-limit``, a
lab's cap, or the container limit Prometheus reports).  What is held back, and why,
is in the footprint sample, so every front end says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Guard:
    """Whether heavy optional reads may run now, and which ones waited."""

    #: Fraction of the memory limit from which reads hold back.
    fraction: float = 0.8
    #: The limit a front end knows (``--memory-limit``, a lab's cap); Prometheus' comes with samples.
    known_limit_bytes: int | None = None
    #: Why reads hold back now (None: they may run).
    reason: str | None = None
    #: Feature -> the reason it last held back for, while the guard holds.
    held_back: dict[str, str] = field(default_factory=dict)

    def observe_memory(self, rss_bytes: int | None, sample_limit_bytes: int | None) -> None:
        """Update from a health sample's resident memory and the limit it reports, if any."""
        limit = self.known_limit_bytes or sample_limit_bytes
        if rss_bytes is None or not limit:
            return  # unknown: keep the last verdict (a server away keeps holding back)
        share = rss_bytes / limit
        if share >= self.fraction:
            self.reason = (f"API server memory at {share:.0%} of its {limit / 2**20:,.0f} MiB limit: "
                           "heavy optional reads wait")
        else:
            self.reason = None
            self.held_back.clear()

    def allows(self, feature: str) -> bool:
        """True when ``feature`` may run now; otherwise remembers that it held back."""
        if self.reason is None:
            return True
        self.held_back[feature] = self.reason
        return False
