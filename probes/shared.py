"""What probes of one monitor share beyond the ``/metrics`` scrape and the CRD watch.

One :class:`SharedState` per :class:`probes.monitor.Monitor` (``monitor.shared``): only what
probes hand each other.  The discovery probe publishes its view, the health probe the CRDs in
use, the CRD watch's listener when CRDs last changed, and the guard keeps which heavy reads
waited.  What the session knows (the memory limit, the lab's hooks, the viewers' load, the
loader's limiter, the guard's verdict) is not here: it is the core's
:class:`base.facts.ClusterFacts` (``ProbeParts.facts``).

Samples are not shared here either: a probe that reads another probe's sample reads
``Monitor.latest``, a view over the one store the session core keeps.
"""

from __future__ import annotations

from crdscope.base.samples.discovery import DiscoveryMode

import time
from dataclasses import dataclass, field

from .guard import Guard


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
    #: When the shared CRD watch last saw a change (time.time()); None: none since the monitor began.
    #: Probes idle on slower cadences and the legacy walk waits while CRDs change (an install).
    last_crd_change: float | None = None
    #: CRDs that have stored objects, as the health probe last counted them (None: not countable);
    #: the inventory tells Crossplane's active MRDs in use from those nobody uses.
    crds_in_use: frozenset[str] | None = None
    #: Holds heavy optional reads back while the session's facts say memory is near its limit
    #: (:mod:`probes.guard`); which ones waited, for the footprint.
    guard: Guard = field(default_factory=Guard)

    def crds_changing(self, settle: float) -> bool:
        """True while a CRD changed within the last ``settle`` seconds (an install in progress).

        Unlike :meth:`probes.monitor.Monitor.quiet`, the monitor's own start is not a change:
        the reads that wait on this (the legacy walk, the v3 index before 1.27) are wanted at once.
        """
        last = self.last_crd_change
        return last is not None and time.time() - last < settle
