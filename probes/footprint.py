"""The monitor's own footprint: what watching costs the server, read from crdscope's own counts.

No request of its own: every run reads the shared client's counts
(:class:`connection.traffic.Traffic`, kept by the transport), so the figures are exact
for crdscope's side and cost nothing.  The loader's requests (the install being
watched) are counted apart.

Each part of the monitor has a request budget (each probe declares its own beside its
cadences, ``pacing``; ``[budgets]`` in config.toml overrides it and holds the shared parts'
ones, :class:`base.settings.RequestBudgets`); the sample names the parts over theirs, averaged over the last
:data:`BUDGET_WINDOW_SECONDS`, and what the guard holds back (heavy optional reads
while the server is near its memory limit, see :mod:`probes.guard`).
"""

from __future__ import annotations

from crdscope.base.samples.footprint import FootprintSample, Tally

import time
from collections import deque
from typing import TYPE_CHECKING

from crdscope.connection.traffic import LOADER, Traffic

from .probe import Pacing, ProbeBase

if TYPE_CHECKING:
    from .probe import ProbeParts

#: Rates (requests and bytes per second) are over this window.
RATE_WINDOW_SECONDS = 60.0
#: Budgets are checked over this window, once the monitor has run that long (start-up reads the
#: whole state once: the CRD list, a first legacy walk, cold discovery figures).
BUDGET_WINDOW_SECONDS = 300.0
#: The walk's requests are budgeted as walks per hour: each walk reads ``/api/v1`` once.
WALK_MARKER = "GET /api/v1"


def summarize(traffic: Traffic) -> tuple[dict[str, Tally], dict[str, Tally], Tally, Tally, int]:
    """(by path, by origin, monitor total, loader total, legacy walks) of the counts so far."""
    by_path: dict[str, list[int]] = {}
    by_origin: dict[str, list[int]] = {}
    loader = [0, 0]
    walks = 0
    for (origin, path), tally in traffic.by_origin_and_path().items():
        if origin == LOADER:
            loader[0] += tally.requests
            loader[1] += tally.bytes
            continue
        for table, key in ((by_path, path), (by_origin, origin)):
            cell = table.setdefault(key, [0, 0])
            cell[0] += tally.requests
            cell[1] += tally.bytes
        if path == WALK_MARKER:
            walks += tally.requests
    total = Tally(requests=sum(c[0] for c in by_origin.values()), bytes=sum(c[1] for c in by_origin.values()))
    return ({k: Tally(requests=c[0], bytes=c[1]) for k, c in sorted(by_path.items())},
            {k: Tally(requests=c[0], bytes=c[1]) for k, c in sorted(by_origin.items())},
            total, Tally(requests=loader[0], bytes=loader[1]), walks)


class FootprintProbe(ProbeBase):
    """Reads the shared client's counts every few seconds; sends nothing."""

    name = "footprint"
    #: No request: reads the shared client's counts.
    pacing = Pacing(busy=5.0)

    def __init__(self, monitor: ProbeParts) -> None:
        self.monitor = monitor
        self.budgets = monitor.settings.budgets
        self._started = time.monotonic()
        #: (monotonic time, monitor total, by origin) per run, for windowed rates.
        self._history: deque[tuple[float, Tally, dict[str, Tally], int]] = deque()
        #: (monotonic time, viewer CPU seconds) per run, for the viewers' share of a core.
        self._viewer_cpu: deque[tuple[float, float]] = deque()

    async def run(self) -> FootprintSample:
        by_path, by_origin, total, loader, walks = summarize(self.monitor.cluster.traffic)
        now = time.monotonic()
        self._history.append((now, total, by_origin, walks))
        while self._history and now - self._history[0][0] > BUDGET_WINDOW_SECONDS:
            self._history.popleft()
        rate_base = next((h for h in self._history if now - h[0] <= RATE_WINDOW_SECONDS), self._history[0])
        window = now - rate_base[0]
        per_minute: dict[str, float] = {}
        over: list[str] = []
        oldest = self._history[0]
        span = now - oldest[0]
        # Budgets hold once a whole window is seen past start-up (its first reads are one-off).
        if now - self._started >= BUDGET_WINDOW_SECONDS and span >= BUDGET_WINDOW_SECONDS * 0.9:
            for origin, tally in by_origin.items():
                before = oldest[2].get(origin, Tally())
                per_minute[origin] = (tally.requests - before.requests) * 60.0 / span
                budget = self.monitor.budget_of(origin)
                if budget is not None and per_minute[origin] > budget:
                    over.append(origin)
            if (walks - oldest[3]) * 3600.0 / span > self.budgets.legacy_walks_per_hour:
                over.append("legacy-walks")
        viewers, viewer_cpu, viewer_share = self._viewers(now)
        return FootprintSample(
            requests_total=total.requests, bytes_total=total.bytes,
            requests_per_second=(total.requests - rate_base[1].requests) / window if window > 0 else 0.0,
            bytes_per_second=(total.bytes - rate_base[1].bytes) / window if window > 0 else 0.0,
            window_seconds=window, by_path=by_path, by_origin=by_origin, per_minute=per_minute,
            over_budget=tuple(over), legacy_walks=walks,
            loader_requests_total=loader.requests, loader_bytes_total=loader.bytes,
            openapi_v2=self.monitor.settings.cadences.openapi_v2 > 0,
            held_back=self.monitor.shared.guard.held_back(),
            viewers=viewers, viewer_cpu_seconds_total=viewer_cpu, viewer_cpu_share=viewer_share,
        )

    def _viewers(self, now: float) -> tuple[int, float, float]:
        """Viewers and their CPU (a collector's): how many, seconds since start, the share of a core
        over the rate window."""
        hook = self.monitor.facts.viewer_load
        if hook is None:
            return 0, 0.0, 0.0
        load = hook()
        self._viewer_cpu.append((now, load.cpu_seconds))
        while len(self._viewer_cpu) > 1 and now - self._viewer_cpu[0][0] > RATE_WINDOW_SECONDS:
            self._viewer_cpu.popleft()
        then, spent = self._viewer_cpu[0]
        share = (load.cpu_seconds - spent) / (now - then) if now > then else 0.0
        return load.viewers, load.cpu_seconds, share


def make_probe(parts: ProbeParts) -> FootprintProbe:
    """The footprint probe of a monitor (reads its cluster's traffic counts)."""
    return FootprintProbe(parts)


# --------------------------------------------------------------------------- words for people


