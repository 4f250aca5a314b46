"""The throttling probe's client side: crdscope's own token bucket and the discovery client models."""

from __future__ import annotations

from types import SimpleNamespace

from crdscope.probes.apf import APF_FAMILIES
from crdscope.probes.cluster import RequestLog
from crdscope.probes.errors import ClusterError
from crdscope.probes.metrics import MetricsSource, parse_text
from crdscope.probes.ratelimit import ClientModel, TokenBucket
from crdscope.probes.shared import SharedState
from crdscope.probes.throttling import ThrottlingProbe, ThrottlingSample

EXPOSITION = 'apiserver_flowcontrol_nominal_limit_seats{priority_level="global-default"} 49\n'


def offline_cluster():
    """What the probe touches of a cluster; the flowcontrol API answers 403 here."""

    async def get_json(path: str):
        raise ClusterError("forbidden (403): no flowcontrol for you")

    return SimpleNamespace(server="https://stand-in", requests=RequestLog(), get_json=get_json)


async def test_limiter_waits_and_client_models_reach_the_sample():
    cluster = offline_cluster()
    bucket = TokenBucket(200.0, 1)
    models = (ClientModel("kubectl >=1.24", 50.0, 300, 1.5, 0.25),)
    shared = SharedState(client_limiter=bucket)
    latest = {"discovery": SimpleNamespace(client_models=models)}
    probe = ThrottlingProbe(cluster, MetricsSource(cluster), shared=shared, latest=latest)
    for _ in range(3):  # the burst of 1 is spent at once: the next two wait about 5 ms each
        await bucket.acquire()
    first = await probe.observe(parse_text(EXPOSITION, APF_FAMILIES))
    limiter = first.client_limiter
    assert (limiter.qps, limiter.burst, limiter.acquired, limiter.throttled) == (200.0, 1, 3, bucket.throttled)
    assert limiter.waited_seconds == bucket.waited_seconds > 0
    assert limiter.waited_seconds_since_last_run is None
    assert first.client_models == models
    assert "client_limiter" not in first.unobservable and "client_models" not in first.unobservable
    assert "403" in first.unobservable["names"] and first.error is None

    before = bucket.waited_seconds
    await bucket.acquire()
    second = await probe.observe(parse_text(EXPOSITION, APF_FAMILIES))
    assert second.client_limiter.waited_seconds_since_last_run == bucket.waited_seconds - before
    assert ThrottlingSample.from_json(second.to_json()) == second


async def test_without_hooks_the_client_side_is_unobservable():
    cluster = offline_cluster()
    probe = ThrottlingProbe(cluster, MetricsSource(cluster))
    sample = await probe.observe(parse_text(EXPOSITION, APF_FAMILIES))
    assert sample.client_limiter is None and sample.client_models == ()
    assert set(sample.unobservable) >= {"client_limiter", "client_models", "rates"}
    (level,) = sample.priority_levels
    assert (level.name, level.nominal_limit_seats, level.limit_response) == ("global-default", 49, None)
