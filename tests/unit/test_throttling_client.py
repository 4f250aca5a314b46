"""The throttling probe beyond APF parsing: crdscope's own token bucket, the discovery client
models, and rates behind a load balancer (scrapes recorded from a two-replica lab, tests/data/ha)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from crdscope.probes.apf import APF_FAMILIES
from crdscope.connection.cluster import RequestLog
from crdscope.base.errors import ClusterError
from crdscope.connection.metrics import MetricsSource, parse_text
from crdscope.connection.ratelimit import TokenBucket
from crdscope.base.samples.discovery import ClientModel, DiscoverySample
from crdscope.base.facts import ClusterFacts
from crdscope.probes.throttling import ThrottlingProbe
from crdscope.base.samples.throttling import ThrottlingSample

EXPOSITION = 'apiserver_flowcontrol_nominal_limit_seats{priority_level="global-default"} 49\n'
HA_SCRAPES = Path(__file__).parent.parent / "data" / "ha"


def offline_cluster():
    """What the probe touches of a cluster; the flowcontrol API answers 403 here."""

    async def get_json(path: str):
        raise ClusterError("forbidden (403): no flowcontrol for you")

    return SimpleNamespace(server="https://stand-in", requests=RequestLog(), get_json=get_json)


async def test_limiter_waits_and_client_models_reach_the_sample():
    cluster = offline_cluster()
    bucket = TokenBucket(200.0, 1)
    models = (ClientModel("kubectl >=1.24", 50.0, 300, 1.5, 0.25),)
    facts = ClusterFacts()
    facts.client_limiter = bucket  # what the loader's control does when the monitor's loader starts
    latest = {"discovery": DiscoverySample(client_models=models)}
    probe = ThrottlingProbe(cluster, MetricsSource(cluster), facts=facts, latest=latest)
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


def recorded_exempt_dispatched(name: str) -> tuple[float, float]:
    """(process start time, requests dispatched at the exempt level) as written in a recorded scrape."""
    text = (HA_SCRAPES / f"{name}.txt").read_text()
    start = re.search(r"^process_start_time_seconds (\S+)$", text, re.MULTILINE)
    counts = re.findall(r'^apiserver_flowcontrol_dispatched_requests_total\{[^}]*priority_level="exempt"[^}]*\} (\S+)$',
                        text, re.MULTILINE)
    assert start and counts, name
    return float(start.group(1)), sum(map(float, counts))


async def test_behind_a_balancer_rates_compare_two_scrapes_of_one_replica_and_name_it():
    probe = ThrottlingProbe(offline_cluster(), MetricsSource(offline_cluster()))
    samples = {}
    # Round robin: the replicas answer in turns, a minute apart.
    for turn, name in enumerate(("first-apiserver", "first-apiserver-2", "later-apiserver", "later-apiserver-2")):
        # The recorded files hold the process families and dispatched counts; the limit line marks APF on.
        text = EXPOSITION + (HA_SCRAPES / f"{name}.txt").read_text()
        scrape = dataclasses.replace(parse_text(text), timestamp=1000.0 + 30 * turn)
        samples[name] = await probe.observe(scrape)
    for replica in ("apiserver", "apiserver-2"):
        first, later = samples[f"first-{replica}"], samples[f"later-{replica}"]
        (start, before), (_, after) = recorded_exempt_dispatched(f"first-{replica}"), \
            recorded_exempt_dispatched(f"later-{replica}")
        assert first.process_start_time_seconds == later.process_start_time_seconds == start
        assert "rates" in first.unobservable  # the other replica's scrape is no baseline
        assert later.interval_seconds == 60.0
        (exempt,) = [level for level in later.priority_levels if level.name == "exempt"]
        assert exempt.dispatched == after - before
        assert exempt.dispatched_per_s == pytest.approx((after - before) / 60.0)
