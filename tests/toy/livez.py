"""The toy probe: ``GET /livez`` through the monitor's shared client, as a new probe module would be.

Everything a probe needs is here: its sample (a frozen dataclass with ``probe``; a built-in probe
keeps it in ``base/samples/<name>.py``, where other rooms read it), its one-shot form, its class
(declaring its name, its cadence and its request budget: ``pacing``) and its factory.
docs/architecture.md walks through it; tests/e2e/test_toy_probe.py registers it (one row of
``probes.registry.PROBES``) and finds it in the TUI, the exporter and a recording.
"""

from __future__ import annotations

import dataclasses
import time

from crdscope.base.errors import ClusterError
from crdscope.base.samples import Sample
from crdscope.connection.cluster import Cluster, explain, raise_for_status
from crdscope.connection.transport import TRANSPORT_ERRORS
from crdscope.probes.probe import Pacing, ProbeBase, ProbeParts


@dataclasses.dataclass(frozen=True)
class LivezSample(Sample):
    """``GET /livez``: did the server say it is live, and how long it took."""

    probe = "livez"

    live: bool = False
    seconds: float = 0.0
    answers: int = 0


async def once(cluster: Cluster, answers: int = 0) -> LivezSample:
    """Ask once; a failure is a sample with ``error``."""
    started = time.perf_counter()
    try:
        response = await cluster.client.get("/livez")
        raise_for_status(response)
    except TRANSPORT_ERRORS as exc:
        return LivezSample(error=explain(exc, cluster.server), answers=answers)
    except ClusterError as exc:
        return LivezSample(error=str(exc), answers=answers)
    return LivezSample(live=response.text.strip() == "ok", seconds=time.perf_counter() - started,
                       answers=answers + 1)


class LivezProbe(ProbeBase):
    """One ``GET /livez`` a run; the scheduler runs it on its pacing (from the end of one run to the
    start of the next), ``ProbeBase`` gives the rest of the contract its defaults (deadline, busy,
    aclose)."""

    name = "livez"
    #: Every second while CRDs change, every 5 s once all is quiet; one request a run: at most 60/min.
    pacing = Pacing(busy=1.0, idle=5.0, budget=60.0)

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.answers = 0

    async def run(self) -> LivezSample:
        sample = await once(self.cluster, self.answers)
        self.answers = sample.answers
        return sample


def make_probe(parts: ProbeParts) -> LivezProbe:
    """The toy probe on the monitor's shared client."""
    return LivezProbe(parts.cluster)
