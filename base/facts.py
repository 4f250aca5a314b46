"""What a session knows of its cluster beyond the samples: one owner per fact.

One :class:`ClusterFacts` per watched cluster, made by whoever opens the core
(:func:`session.live.open_live_core`, a replay, a viewer) and owned by the core
(``WatchCore.facts``).  The probes read it through ``ProbeParts.facts``, the findings
through ``Observations.facts``, the front ends through the core.  Nobody assigns onto
a probe to tell it something: what the session knows is written here, once.

The API server's memory limit is worked out here and nowhere else, by one precedence
(docs/architecture.md, "The facts"):

1. ``--memory-limit`` (what the person running crdscope says),
2. the cap of a crdscope lab (``crdscope lab limit`` changes it while the monitor runs),
3. the container limit Prometheus reports (``--prometheus``; the health probe observes it and
   the core hands each health sample's figure to :meth:`ClusterFacts.observe_limit`).

The guard's verdict (:attr:`ClusterFacts.memory_pressure`) is judged by the memory finding's
declaration (``findings.resources``), written here by the core after each evaluation, and only
read by the probes' guard (:mod:`probes.guard`): the memory fraction is judged once.  So is
whether the server is away (:attr:`ClusterFacts.server_away`: the "not answering" finding, from
the HTTP/2 PINGs and requests in flight every half second), which the health probe reads to date
an outage from its first unanswered or refused attempt.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .restarts import PlatformRestarts
    from .samples.footprint import ViewerLoad


class LimitOrigin(enum.Enum):
    """Where a memory limit came from, in the order of precedence (the first known wins)."""

    FLAG = "--memory-limit"
    LAB = "the lab's cap"
    PROMETHEUS = "prometheus"


@dataclasses.dataclass(frozen=True)
class MemoryLimit:
    """The API server's memory limit in bytes, and where it came from."""

    bytes: int
    origin: LimitOrigin
    #: For a limit Prometheus reports: the series it was read from (the health sample's ``sources``).
    source: str = ""

    @property
    def given(self) -> bool:
        """True for a limit the person or the lab gave (not one observed through Prometheus)."""
        return self.origin is not LimitOrigin.PROMETHEUS

    def describe(self) -> str:
        """``--memory-limit``, ``the lab's cap`` or the Prometheus series."""
        return self.source or self.origin.value

    def to_json(self) -> dict[str, int | str]:
        return {"memory_limit_bytes": self.bytes, "memory_limit_origin": self.origin.name,
                "memory_limit_source": self.source}

    @classmethod
    def from_json(cls, data: object, default: LimitOrigin = LimitOrigin.FLAG) -> MemoryLimit | None:
        """Tolerant: None for anything that is no limit; an unknown origin is ``default``."""
        if not isinstance(data, dict):
            return None
        size = data.get("memory_limit_bytes")
        if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
            return None
        origin = LimitOrigin.__members__.get(str(data.get("memory_limit_origin")), default)
        source = data.get("memory_limit_source")
        return cls(size, origin, source if isinstance(source, str) else "")


@dataclasses.dataclass(frozen=True)
class ServerAway:
    """The API server is not answering (refused or silent) since ``since`` (seconds since the epoch):
    the "not answering" finding's verdict, dated from the first attempt it left unanswered."""

    since: float
    #: The finding's title ("API server unreachable: connections refused").
    why: str


class ClientBucket(Protocol):
    """crdscope's own client-side token bucket as the throttling probe reports it
    (``connection.ratelimit.TokenBucket`` is one)."""

    @property
    def qps(self) -> float: ...

    @property
    def burst(self) -> int: ...

    @property
    def acquired(self) -> int: ...

    @property
    def throttled(self) -> int: ...

    @property
    def waited_seconds(self) -> float: ...


@dataclasses.dataclass(frozen=True)
class LabHooks:
    """On crdscope's own lab only: what the lab's files tell that no request can (probes never
    import the lab; the session that recognised the lab fills these)."""

    #: Counts the API server's established connections to etcd (None: its process is not running).
    etcd_connections: Callable[[], int | None] | None = None
    #: The supervisor's account of API server deaths (read in a thread: it reads files).
    restarts: Callable[[], PlatformRestarts | None] | None = None
    #: The lab's ``--name`` ("" the default lab; None: not known to be crdscope's lab): what a remedy
    #: names in ``crdscope lab limit SIZE --name NAME``.
    name: str | None = None


class ClusterFacts:
    """One cluster's facts beyond the samples (see the module docstring); one per core."""

    def __init__(self, *, flag_limit: int | None = None, lab_limit: int | None = None,
                 lab: LabHooks | None = None) -> None:
        self._flag = MemoryLimit(flag_limit, LimitOrigin.FLAG) if flag_limit else None
        self._lab = MemoryLimit(lab_limit, LimitOrigin.LAB) if lab_limit else None
        self._observed: MemoryLimit | None = None
        #: The lab's hooks (empty hooks: not a lab, or the lab could not be read).
        self.lab = lab or LabHooks()
        #: On a collector serving viewers (``--serve-view``): what they cost it (the footprint reports it).
        self.viewer_load: Callable[[], ViewerLoad] | None = None
        #: crdscope's own client-side limiter: the loader's bucket while the monitor's loader runs.
        self.client_limiter: ClientBucket | None = None
        #: Why heavy optional reads wait now (None: they may run): the memory finding's verdict.
        self.memory_pressure: str | None = None
        #: Since when the server does not answer (None: it answers): the "not answering" finding's verdict.
        self.server_away: ServerAway | None = None
        #: Told each new memory limit (the TUI redraws its panels).
        self.limit_listeners: list[Callable[[MemoryLimit | None], None]] = []

    # -- the memory limit -----------------------------------------------------------------
    @property
    def memory_limit(self) -> MemoryLimit | None:
        """The limit, by the one precedence: the flag, else the lab's cap, else Prometheus'."""
        return self._flag or self._lab or self._observed

    @property
    def memory_limit_bytes(self) -> int | None:
        limit = self.memory_limit
        return limit.bytes if limit is not None else None

    @property
    def given_limit(self) -> MemoryLimit | None:
        """The limit given rather than observed (the flag, else the lab's cap): what recordings and
        a collector's viewers carry (they observe Prometheus' through the health samples)."""
        return self._flag or self._lab

    def give_limit(self, limit: MemoryLimit | None) -> None:
        """A given limit (``LimitOrigin.FLAG`` or ``LAB``) read from elsewhere: a recording, a
        collector's stream (None: none given)."""
        before = self.memory_limit
        self._flag = limit if limit is not None and limit.origin is LimitOrigin.FLAG else None
        self._lab = limit if limit is not None and limit.origin is LimitOrigin.LAB else None
        self._tell(before)

    def set_lab_limit(self, limit_bytes: int | None) -> None:
        """The lab's cap now (``crdscope lab limit`` resized it; None or 0: no cap)."""
        before = self.memory_limit
        self._lab = MemoryLimit(limit_bytes, LimitOrigin.LAB) if limit_bytes else None
        self._tell(before)

    def observe_limit(self, limit_bytes: int | None, source: str = "") -> None:
        """The limit Prometheus reports (a health sample's ``memory_limit_bytes``); None keeps
        the last one seen (a reading that missed it does not lift the limit)."""
        if limit_bytes:
            before = self.memory_limit
            self._observed = MemoryLimit(limit_bytes, LimitOrigin.PROMETHEUS, source)
            self._tell(before)

    def forget_observed(self) -> None:
        """Forget what the samples said (a replay seeking back); given limits stay."""
        before = self.memory_limit
        self._observed = None
        self._tell(before)

    def _tell(self, before: MemoryLimit | None) -> None:
        now = self.memory_limit
        if now != before:
            for listener in list(self.limit_listeners):
                listener(now)


@dataclasses.dataclass(frozen=True)
class LimitRecord:
    """The given memory limit from ``timestamp`` on (None: none given): what a recording carries so
    that its replay judges by the limit the watch knew (``{"type": "limit", "data": ...}``)."""

    timestamp: float
    limit: MemoryLimit | None

    def to_json(self) -> dict[str, object]:
        return {"timestamp": self.timestamp, **(self.limit.to_json() if self.limit is not None else {})}

    @classmethod
    def from_json(cls, data: dict[str, object]) -> LimitRecord:
        when = data.get("timestamp")
        if not isinstance(when, (int, float)) or isinstance(when, bool):
            raise ValueError("a limit record without a numeric timestamp")
        return cls(float(when), MemoryLimit.from_json(data))


def limit_at(records: list[LimitRecord], timestamp: float) -> MemoryLimit | None:
    """The given limit in force at ``timestamp`` (``records`` in time order; None before the first)."""
    found = None
    for record in records:
        if record.timestamp > timestamp:
            break
        found = record.limit
    return found
