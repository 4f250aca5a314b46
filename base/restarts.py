"""API server restarts as every source reports them: the sources' names, one restart, a platform's count.

The contract between whoever sees restarts (the health probe's sources, crdscope's lab supervisor)
and whoever judges them (the crash-loop finding, the panels): :mod:`probes.restarts` keeps the
ledger of each source, the lab hands in a :class:`PlatformRestarts`, findings read
:class:`RestartEvent`.
"""

from __future__ import annotations

from dataclasses import dataclass

START_TIME = "process start time"
IDENTITY_LEASE = "identity lease"
LAB_SUPERVISOR = "lab supervisor"
KUBE_STATE_METRICS = "kube-state-metrics"
#: When two sources count as many, the one whose events say more wins (exact times, OOM evidence).
PREFERENCE = (LAB_SUPERVISOR, START_TIME, KUBE_STATE_METRICS, IDENTITY_LEASE)
#: Restart events kept per source (a crash loop of a day at one restart a minute keeps the last hours).
KEEP_EVENTS = 200


@dataclass(frozen=True)
class RestartEvent:
    """One restart of an API server process, as one source saw it."""

    #: When the process died, or (where the death is not seen) when its successor was first seen.
    at: float
    source: str
    #: The replica: a Lease's host name, a lab component, a scrape slot ("r1"); "" when unknown.
    replica: str = ""
    #: True where the platform says the kernel OOM-killed it; None where nothing says.
    oom_killed: bool | None = None
    #: How long the dead process had served (None: not known).
    uptime_seconds: float | None = None
    #: The resident memory crdscope last saw of the dead process (None: never scraped).
    rss_bytes_at_death: int | None = None


@dataclass(frozen=True)
class PlatformRestarts:
    """What the platform running the API server counts (crdscope's lab supervisor).

    ``restarts`` counts since the platform began; ``events`` are the latest deaths, oldest first.
    """

    source: str
    restarts: int
    events: tuple[RestartEvent, ...] = ()
    #: The kernel's OOM kills in the API servers' memory groups (None: not counted).
    oom_kills: int | None = None
