"""crdscope's own requests, counted by origin and path at the shared client's transport."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from crdscope.connection.cluster import GoawayRetryTransport
from crdscope.base.facts import ClusterFacts
from crdscope.base.samples.health import HealthSample
from crdscope.base.settings import Settings
from crdscope.probes.footprint import summarize
from crdscope.probes.guard import Guard
from crdscope.probes.monitor import request_budgets
from crdscope.connection.ratelimit import Allowance
from crdscope.session.core import SessionStore, WatchCore
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
    budgets = request_budgets(Settings())
    for part in ("version", "inventory", "discovery", "throttling", "openapi", "health", "latency",
                 "responsiveness", "metrics", "crd-watch"):
        assert budgets.get(part) is not None, part
    assert "no-such-part" not in budgets and "footprint" not in budgets  # it sends nothing
    # config.toml's [budgets] replace a probe's declaration and the shared parts' budgets.
    assert request_budgets(Settings().override("budgets", discovery=3.0, metrics=1.0))["discovery"] == 3.0


def test_an_allowance_refuses_past_its_burst_and_never_waits():
    allowance = Allowance(per_minute=6.0, burst=2)
    assert [allowance.take() for _ in range(4)] == [True, True, False, False]
    assert allowance.denied == 2
    assert not Allowance(per_minute=0.0, burst=4).take()


def test_the_guard_holds_heavy_reads_back_while_the_memory_finding_is_open_and_lets_go_after():
    # The memory fraction is judged once, by the memory finding; the core writes its verdict into the
    # facts and the guard only reads it.
    mib = 2**20
    facts = ClusterFacts(flag_limit=1000 * mib)
    core = WatchCore(None, store=SessionStore(), facts=facts)
    guard = Guard(facts)
    core.take(HealthSample(timestamp=1.0, rss_bytes=500 * mib, crds=10))
    assert guard.allows("openapi_v2") and not guard.held_back()
    core.take(HealthSample(timestamp=2.0, rss_bytes=850 * mib, crds=10))
    assert not guard.allows("openapi_v2")
    assert guard.held_back()["openapi_v2"] == ("API server memory at 85% of its 1,000 MiB limit: "
                                               "heavy optional reads wait")
    core.take(HealthSample(timestamp=3.0, error="connection refused", down=True))  # away: the verdict stands
    assert not guard.allows("discovery_walk")
    core.take(HealthSample(timestamp=4.0, rss_bytes=700 * mib, crds=10))
    assert guard.allows("openapi_v2") and not guard.held_back()
    # Without a given limit, the one Prometheus shows (a health sample's) is the facts' limit.
    shown = ClusterFacts()
    WatchCore(None, store=SessionStore(), facts=shown).take(
        HealthSample(timestamp=1.0, rss_bytes=900 * mib, crds=10, memory_limit_bytes=1000 * mib))
    assert not Guard(shown).allows("openapi_v3_documents")
    assert Guard(ClusterFacts()).allows("openapi_v2")  # no limit known: nothing judged, nothing held
