"""What probes of one monitor share beyond the ``/metrics`` scrape and the CRD watch.

One :class:`SharedState` per :class:`probes.monitor.Monitor` (``monitor.shared``):
the discovery probe publishes its view there, and callers that know more than
probes may (the loader, the lab) fill the hooks.  Probes never import the
loader or the lab: they read these fields, None meaning "not here".

Samples are not shared here: a probe that reads another probe's sample reads
``Scheduler.latest``, a view over the one store the session core keeps.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .guard import Guard

if TYPE_CHECKING:
    from .discovery import DiscoveryView
    from crdscope.connection.ratelimit import TokenBucket
    from crdscope.base.restarts import PlatformRestarts


@dataclass
class SharedState:
    """Typed slots; each is None until its producer fills it."""

    #: The discovery probe's latest view (the OpenAPI probe reads it instead of fetching /apis again).
    discovery: DiscoveryView | None = None
    #: crdscope's own client-side token bucket: whoever starts the loader on a monitor puts the
    #: loader's bucket here, and the throttling probe reports it.
    client_limiter: TokenBucket | None = None
    #: On crdscope's lab only: counts the API server's etcd connections (the health probe reports it).
    lab_etcd_connections: Callable[[], int | None] | None = None
    #: On crdscope's lab only: the supervisor's account of API server deaths (read in a thread).
    lab_restarts: Callable[[], PlatformRestarts | None] | None = None
    #: When the shared CRD watch last saw a change (time.time()); None: none since the monitor began.
    #: Probes idle on slower cadences and the legacy walk waits while CRDs change (an install).
    last_crd_change: float | None = None
    #: CRDs that have stored objects, as the health probe last counted them (None: not countable);
    #: the inventory tells Crossplane's active MRDs in use from those nobody uses.
    crds_in_use: frozenset[str] | None = None
    #: Holds heavy optional reads back while the server is near its memory limit (:mod:`probes.guard`).
    guard: Guard = field(default_factory=Guard)

    def crds_changing(self, settle: float) -> bool:
        """True while a CRD changed within the last ``settle`` seconds (an install in progress).

        Unlike :meth:`probes.monitor.Monitor.quiet`, the monitor's own start is not a change:
        the reads that wait on this (the legacy walk, the v3 index before 1.27) are wanted at once.
        """
        last = self.last_crd_change
        return last is not None and time.time() - last < settle
