"""What a probe is, and what a probe's factory is built from: the contract between the monitor and
its probes, below both (the registry, the scheduler and every probe module import it; it imports
none of them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from crdscope.base.samples import Sample

if TYPE_CHECKING:
    from crdscope.base.settings import Settings
    from crdscope.connection.cluster import Cluster
    from crdscope.connection.crdwatch import CRDWatch
    from crdscope.connection.metrics import MetricsSource

    from .shared import SharedState


class Probe(Protocol):
    """What the scheduler runs: a name, a cadence and one async run per call.

    An optional ``deadline`` attribute (seconds) overrides the scheduler's default deadline.
    """

    name: str
    cadence: float  # seconds from the end of one run to the start of the next

    async def run(self) -> Sample:
        """Observe once and return a sample; expected failures return a sample with ``error``."""


class ProbeParts(Protocol):
    """What a probe's ``make_probe(parts)`` reads: one monitor's cluster, settings and shared sources
    (:class:`probes.monitor.Monitor` is one)."""

    cluster: Cluster
    settings: Settings
    metrics: MetricsSource
    crds: CRDWatch
    shared: SharedState
    #: Probe name -> its latest sample (where the samples are kept; a monitor keeps none).
    latest: Mapping[str, Sample]

    def quiet(self) -> bool:
        """True once nothing changed for a while (probes with an idle cadence slow down)."""
