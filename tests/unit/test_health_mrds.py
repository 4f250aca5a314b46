"""The health probe's memory per CRD where Crossplane's MRDs arrive too (issue 39: MRDs are not free).

A mock API server whose RSS is a known function of its CRDs and MRDs: the probe must give the CRDs
their own share, and the memory finding must judge that share, not the one with the MRDs in it.
"""

from __future__ import annotations

import httpx
import pytest

from crdscope.connection.cluster import Cluster, ClusterConfig
from crdscope.connection.metrics import MetricsSource
from crdscope.findings.observations import Observations
from crdscope.findings.resources import memory
from crdscope.probes.health import HealthProbe

SERVER = "https://lab.test"
MIB = float(1 << 20)


class Server:
    """Answers /metrics with RSS = 300 MiB + crd_mib x CRDs + mrd_mib x MRDs; every check with ok."""

    def __init__(self, points: list[tuple[int, int]], crd_mib: float, mrd_mib: float) -> None:
        self.points, self.crd_mib, self.mrd_mib, self.at = points, crd_mib, mrd_mib, 0

    @property
    def current(self) -> tuple[int, int]:
        return self.points[min(self.at, len(self.points) - 1)]

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path != "/metrics":
            return httpx.Response(200, text="ok")
        crds, mrds = self.current
        rss = (300 + self.crd_mib * crds + self.mrd_mib * mrds) * MIB
        text = (f"process_resident_memory_bytes {rss:.0f}\nprocess_start_time_seconds 1000\n"
                'apiserver_resource_objects{group="apiextensions.crossplane.io",resource="managedresourcedefinitions"}'
                f" {mrds}\n"
                f'apiserver_resource_objects{{group="apiextensions.k8s.io",resource="customresourcedefinitions"}} {crds}\n')
        return httpx.Response(200, text=text)


async def _samples(server: Server) -> list:
    cluster = Cluster(ClusterConfig(server=SERVER, context="mock", user="mock", kubeconfig=()))
    await cluster.client.aclose()
    cluster.client = httpx.AsyncClient(base_url=SERVER, transport=httpx.MockTransport(server))

    async def crds() -> tuple[int | None, str | None]:
        return server.current[0], None

    probe = HealthProbe(cluster, MetricsSource(cluster), crd_count=crds, cadence=0.0)
    samples = []
    for at in range(len(server.points)):
        server.at = at
        samples.append(await probe.run())
    await cluster.client.aclose()
    return samples


async def test_mrds_that_arrive_apart_from_the_crds_get_their_own_slope():
    points = [(0, m) for m in range(0, 801, 100)] + [(c, 800) for c in range(0, 201, 25)]
    last = (await _samples(Server(points, crd_mib=2.0, mrd_mib=0.8)))[-1]
    assert last.mrds == 800 and last.own_share_by == "fit"
    assert last.mib_per_crd_own == pytest.approx(2.0, rel=1e-3) and last.mib_per_mrd == pytest.approx(0.8, rel=1e-3)


async def test_mrds_that_grow_with_the_crds_are_taken_out_at_their_measured_cost():
    points = [(n, n) for n in range(0, 201, 20)]
    samples = await _samples(Server(points, crd_mib=3.6, mrd_mib=0.8))
    last = samples[-1]
    assert last.mib_per_crd == pytest.approx(4.4, rel=1e-3)  # the line through CRDs alone charges both
    assert last.own_share_by == "mrd-cost" and last.mib_per_crd_own == pytest.approx(3.6, rel=1e-3)
    assert "grew together" in last.unobservable["mib_per_mrd"]
    obs = Observations()
    obs.add(last)
    [finding] = [f for f in memory(obs) if f.id == "memory-per-crd"]
    assert "3.60 MiB per CRD" in finding.title and "MRDs' own share taken out" in finding.title
    assert any("health.mib_per_crd_own = 3.60 with 200 Crossplane MRDs" in e for e in finding.evidence)


async def test_without_mrds_the_crds_slope_is_theirs_and_nothing_is_taken_out():
    last = (await _samples(Server([(c, 0) for c in range(0, 201, 25)], crd_mib=3.5, mrd_mib=0.8)))[-1]
    assert last.mrds == 0 and last.mib_per_crd_own is None and last.mib_per_crd == pytest.approx(3.5, rel=1e-3)
    obs = Observations()
    obs.add(last)
    [finding] = [f for f in memory(obs) if f.id == "memory-per-crd"]
    assert "3.50 MiB per CRD (over 3)" in finding.title and "own share" not in finding.title
