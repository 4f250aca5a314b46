"""The health sample's CRD count and its unused CRDs come from one moment (issue 25).

During a load of the GCP set the strip read "770 of 760 CRDs have no objects": the count was read
before the names the unused CRDs were taken from, while CRDs were being added.
"""

from __future__ import annotations

import httpx

from crdscope.connection.cluster import Cluster, ClusterConfig
from crdscope.probes.health import HealthProbe
from crdscope.connection.metrics import MetricsSource

SERVER = "https://apiserver.test"
#: A scrape with the object counts the unused CRDs are read from: one CRD has objects.
METRICS = """# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 1.5e+09
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1.7e+09
# TYPE apiserver_resource_objects gauge
apiserver_resource_objects{group="example.com",resource="things0"} 3
apiserver_resource_objects{group="",resource="pods"} 10
"""


def server(request: httpx.Request) -> httpx.Response:
    if request.url.path == "/metrics":
        return httpx.Response(200, text=METRICS)
    if request.url.path.endswith("/leases"):
        return httpx.Response(200, json={"kind": "LeaseList", "items": []})
    return httpx.Response(200, text="ok")


async def test_unused_crds_never_outnumber_the_crds_counted_beside_them():
    cluster = Cluster(ClusterConfig(server=SERVER, context="mock", user="mock", kubeconfig=()))
    await cluster.client.aclose()
    cluster.client = httpx.AsyncClient(base_url=SERVER, transport=httpx.MockTransport(server))
    metrics = MetricsSource(cluster)
    metrics.spread = cluster
    installed = [f"things{i}.example.com" for i in range(760)]

    async def count() -> tuple[int | None, str | None]:
        counted = len(installed)
        installed.extend(f"later{i}.example.com" for i in range(10))  # ten more arrive meanwhile
        return counted, None

    probe = HealthProbe(cluster, metrics, crd_count=count, crd_names=lambda: installed, cadence=0.0)
    sample = await probe.run()
    await cluster.client.aclose()
    assert sample.crds_without_objects is not None, sample.unobservable
    assert sample.crds == len(installed) == 770
    assert sample.crds_without_objects <= sample.crds
