"""crdscope's own requests, counted by origin and path at the shared client's transport."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from crdscope.connection.cluster import GoawayRetryTransport
from crdscope.probes.footprint import budget_of, summarize
from crdscope.probes.guard import Guard
from crdscope.connection.ratelimit import Allowance
from crdscope.base.settings import RequestBudgets
from crdscope.connection.traffic import LOADER, Traffic, origin, path_class


@pytest.mark.parametrize(("path", "expected"), [
    ("/openapi/v2", "GET /openapi/v2"),
    ("/openapi/v3/apis/ec2.aws.upbound.io/v1beta1", "GET /openapi/v3/{group-version}"),
    ("/apis/ec2.aws.upbound.io/v1beta1", "GET /apis/{group}/{version}"),
    ("/apis/ec2.aws.upbound.io/v1beta1/instances", "GET /apis/{group}/{version}/{resource}"),
    ("/apis/ec2.aws.upbound.io/v1beta1/namespaces/team-a/instances/web",
     "GET /apis/{group}/{version}/namespaces/{namespace}/{resource}/{name}"),
    ("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/instances.ec2.aws.upbound.io",
     "GET /apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"),
    ("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
     "GET /apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"),
    ("/api/v1/namespaces/default", "GET /api/v1/namespaces/{namespace}"),
    ("/api/v1", "GET /api/v1"),
    ("/readyz/etcd", "GET /readyz/{check}"),
    ("/apis", "GET /apis"),
    ("/debug/pprof", "GET /{other}"),
])
def test_path_classes_keep_no_object_names(path, expected):
    assert path_class("GET", path) == expected


def _server(request: httpx.Request) -> httpx.Response:
    # A stream, as a real transport answers (content= would hand the body over already read).
    return httpx.Response(200, stream=httpx.ByteStream(b"x" * (1000 if request.url.path == "/metrics" else 10)))


async def test_requests_are_counted_by_origin_and_path_with_their_bytes():
    traffic = Traffic()
    transport = GoawayRetryTransport(httpx.MockTransport(_server), httpx.MockTransport(_server), traffic)
    async with httpx.AsyncClient(transport=transport, base_url="https://stand-in") as client:
        with origin("health"):
            await client.get("/metrics")
            # A task started inside counts for the same origin (tasks copy their context).
            await asyncio.create_task(client.get("/readyz"))
        with origin(LOADER):
            await client.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/a.b.io")
        await client.get("/version")
    counts = traffic.by_origin_and_path()
    assert counts[("health", "GET /metrics")].requests == 1
    assert counts[("health", "GET /metrics")].bytes >= 1000
    assert counts[("health", "GET /readyz")].requests == 1
    assert counts[("other", "GET /version")].requests == 1
    by_path, by_origin, total, loader, walks = summarize(traffic)
    assert total.requests == 3 and loader.requests == 1, "the loader's install is not the monitor's cost"
    assert "GET /apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}" not in by_path
    assert set(by_origin) == {"health", "other"} and walks == 0


def test_every_part_of_a_default_monitor_has_a_budget():
    budgets = RequestBudgets()
    for part in ("version", "inventory", "discovery", "throttling", "openapi", "health", "latency",
                 "responsiveness", "metrics", "crd-watch"):
        assert budget_of(budgets, part) is not None, part
    assert budget_of(budgets, "no-such-part") is None


def test_an_allowance_refuses_past_its_burst_and_never_waits():
    allowance = Allowance(per_minute=6.0, burst=2)
    assert [allowance.take() for _ in range(4)] == [True, True, False, False]
    assert allowance.denied == 2
    assert not Allowance(per_minute=0.0, burst=4).take()


def test_the_guard_holds_heavy_reads_back_near_the_limit_and_lets_go_below():
    guard = Guard(fraction=0.8, known_limit_bytes=1000 * 2**20)
    guard.observe_memory(500 * 2**20, None)
    assert guard.allows("openapi_v2") and not guard.held_back
    guard.observe_memory(850 * 2**20, None)
    assert not guard.allows("openapi_v2")
    assert "85%" in guard.held_back["openapi_v2"] and "1,000 MiB" in guard.held_back["openapi_v2"]
    guard.observe_memory(None, None)  # the server away: the verdict stands
    assert not guard.allows("discovery_walk")
    guard.observe_memory(700 * 2**20, None)
    assert guard.allows("openapi_v2") and not guard.held_back
    # Without a known limit, the one a sample reports (Prometheus' container limit) counts.
    unknown = Guard(fraction=0.8)
    unknown.observe_memory(900, 1000)
    assert not unknown.allows("openapi_v3_documents")
