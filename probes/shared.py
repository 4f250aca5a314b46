"""What probes of one monitor share beyond the ``/metrics`` scrape and the CRD watch.

One :class:`SharedState` per :class:`probes.monitor.Monitor` (``monitor.shared``):
the discovery probe publishes its view there, and callers that know more than
probes may (the loader, the lab) fill the hooks.  Probes never import the
loader or the lab: they read these fields, None meaning "not here".

Samples are not shared here: a probe that reads another probe's sample reads
``Monitor.latest``, a view over the one store the session core keeps.
"""

from __future__ import annotations

from crdscope.base.samples.discovery import DiscoveryMode

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .guard import Guard

if TYPE_CHECKING:
    from crdscope.connection.ratelimit import TokenBucket
    from crdscope.base.restarts import PlatformRestarts
    from crdscope.base.samples.footprint import ViewerLoad


@dataclass(frozen=True)
class DiscoveryView:
    """What the discovery probe publishes as ``monitor.shared.discovery`` after every successful run.

    - ``timestamp``: when the view was taken (``time.time()``)
    - ``mode``: ``"aggregated"`` or ``"legacy"``
    - ``visible_since``: every fresh group-version in discovery (``"v1"``,
      ``"<group>/<version>"``) -> the wall-clock time (``time.time()``) this probe
      first saw it; group-versions present when the probe started carry its first
      run's time; one that vanishes and comes back starts again
    - ``stale``: group-versions listed with ``freshness: Stale``
    - ``served``: ``(group, version, resource)`` of every resource (not subresource)
      in a fresh group-version (``group`` is ``""`` for core)
    - ``resources``: ``kubectl api-resources -o name`` as a set

    ``timestamp`` is taken when the discovery answers were in, before anything
    else the run does.  A new object replaces the old one on every successful run:
    readers may keep a reference.
    """

    timestamp: float
    mode: DiscoveryMode
    visible_since: dict[str, float]
    stale: frozenset[str]
    served: frozenset[tuple[str, str, str]]
    resources: frozenset[str]


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
    #: On a collector serving viewers (``--serve-view``): what they cost it (the footprint reports it).
    viewer_load: Callable[[], ViewerLoad] | None = None
    #: Holds heavy optional reads back while the server is near its memory limit (:mod:`probes.guard`).
    guard: Guard = field(default_factory=Guard)

    def crds_changing(self, settle: float) -> bool:
        """True while a CRD changed within the last ``settle`` seconds (an install in progress).

        Unlike :meth:`probes.monitor.Monitor.quiet`, the monitor's own start is not a change:
        the reads that wait on this (the legacy walk, the v3 index before 1.27) are wanted at once.
        """
        last = self.last_crd_change
        return last is not None and time.time() - last < settle
