"""The simplest probe: the server's ``/version`` and how long it took."""

from __future__ import annotations

from crdscope.base.samples.version import VersionSample

import time
from typing import TYPE_CHECKING

from crdscope.connection.cluster import Cluster, explain, raise_for_status
from crdscope.base.errors import ClusterError
from crdscope.connection.transport import TRANSPORT_ERRORS

from .probe import Pacing, ProbeBase

if TYPE_CHECKING:
    from .probe import ProbeParts


async def probe_version(cluster: Cluster) -> VersionSample:
    """Run the version probe once; failures become a sample with ``error``."""
    started = time.perf_counter()
    try:
        response = await cluster.client.get("/version")
        raise_for_status(response)
        body = response.json()
    except TRANSPORT_ERRORS as exc:
        return VersionSample(server=cluster.server, error=explain(exc, cluster.server))
    except (ClusterError, ValueError) as exc:
        return VersionSample(server=cluster.server, error=str(exc) or "invalid /version answer")
    return VersionSample(
        server=cluster.server,
        git_version=str(body.get("gitVersion", "")),
        major=str(body.get("major", "")),
        minor=str(body.get("minor", "")),
        platform=str(body.get("platform", "")),
        go_version=str(body.get("goVersion", "")),
        seconds=time.perf_counter() - started,
    )


class VersionProbe(ProbeBase):
    """One GET /version per run."""

    name = "version"
    #: One request a run: every 30 s, every 2 min once all is quiet (budget 2/min).
    pacing = Pacing(busy=30.0, idle=120.0, budget=2.0)

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    async def run(self) -> VersionSample:
        return await probe_version(self.cluster)


def make_probe(parts: ProbeParts) -> VersionProbe:
    """The version probe on the monitor's cluster."""
    return VersionProbe(parts.cluster)
