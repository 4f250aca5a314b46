"""The throttling probe against the lab: a priority level squeezing the restricted user.

A FlowSchema routes every request of ``crdscope-restricted`` to a priority level
of its own with 3 seats that rejects instead of queueing; a burst of concurrent
requests as that user then gets 429s.  The admin's throttling probe must report
the same rejections as the server's counters read independently (kubectl +
prometheus_client) and as the 429s the restricted client received.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
import uuid

import pytest
from prometheus_client.parser import text_string_to_metric_families

from crdscope.probes.monitor import Monitor
from crdscope.base.settings import Settings
from crdscope.probes.throttling import once
from crdscope.base.samples.throttling import ThrottlingSample
from tests.apf_squeeze import LIST_CRDS, squeeze_manifests
from tests.helpers import async_wait_for, steady_cadences

pytestmark = pytest.mark.lab

BURST = 40
MAX_ROUNDS = 5
WAIT_FAMILY = "apiserver_flowcontrol_request_wait_duration_seconds"


def server_counters(lab) -> dict[str, dict]:
    """APF figures per priority level from ``kubectl get --raw /metrics``, parsed by prometheus_client."""
    text = lab.kubectl("get", "--raw", "/metrics").stdout
    levels: dict[str, dict] = {}
    for family in text_string_to_metric_families(text):
        if not family.name.startswith("apiserver_flowcontrol_"):
            continue
        for sample in family.samples:
            level = sample.labels.get("priority_level")
            if level is None:
                continue
            figures = levels.setdefault(level, {"rejected": 0.0, "rejected_by_reason": {}, "dispatched": 0.0,
                                                "nominal": None, "current": None, "wait_buckets": {}})
            if sample.name == "apiserver_flowcontrol_rejected_requests_total":
                figures["rejected"] += sample.value
                reason = sample.labels["reason"]
                figures["rejected_by_reason"][reason] = figures["rejected_by_reason"].get(reason, 0) + sample.value
            elif sample.name == "apiserver_flowcontrol_dispatched_requests_total":
                figures["dispatched"] += sample.value
            elif sample.name == "apiserver_flowcontrol_nominal_limit_seats":
                figures["nominal"] = sample.value
            elif sample.name == "apiserver_flowcontrol_current_limit_seats":
                figures["current"] = sample.value
            elif sample.name == WAIT_FAMILY + "_bucket":
                bound = float(sample.labels["le"])
                figures["wait_buckets"][bound] = figures["wait_buckets"].get(bound, 0) + sample.value
    return levels


def bracket_of_p99(before: dict[float, float], after: dict[float, float]) -> tuple[float, float]:
    """The bucket (lower, upper bound) that holds the 99th percentile of the observations in between."""
    bounds = sorted(after)
    deltas = [after[b] - before.get(b, 0.0) for b in bounds]
    rank = 0.99 * deltas[-1]
    lower = 0.0
    for bound, count in zip(bounds, deltas, strict=True):
        if count >= rank:
            return lower, bound
        lower = bound
    return lower, math.inf


async def kubectl_json(lab, *args: str):
    return await asyncio.to_thread(lab.kubectl_json, *args)


async def test_squeezed_user_gets_429s_the_probe_reports(lab):
    name = f"crdscope-test-squeeze-{uuid.uuid4().hex[:6]}"
    user = "crdscope-restricted"
    await asyncio.to_thread(lab.kubectl, "apply", "-f", "-", input=squeeze_manifests(name, user))
    restricted = lab.cluster(lab.restricted_context)
    admin = lab.cluster()
    try:
        schema = await kubectl_json(lab, "get", "flowschema", name)
        level_config = await kubectl_json(lab, "get", "prioritylevelconfiguration", name)
        uids = (schema["metadata"]["uid"], level_config["metadata"]["uid"])

        async def classified_into_the_squeeze():
            response = await restricted.client.get(LIST_CRDS, params={"limit": "1"})
            return (response.headers.get("X-Kubernetes-PF-FlowSchema-UID"),
                    response.headers.get("X-Kubernetes-PF-PriorityLevel-UID")) == uids

        await async_wait_for(classified_into_the_squeeze, timeout=60, message="APF to use the new flow schema")

        # Cadence 0: every run scrapes afresh, so the two runs below bracket the burst.
        monitor = Monitor(admin, Settings().override("cadences", **steady_cadences(throttling=0.0)), probes=["throttling"], latest={})
        probe = monitor.probe("throttling")
        first = await probe.run()
        before = (await asyncio.to_thread(server_counters, lab)).get(name, {"rejected": 0.0, "dispatched": 0.0,
                                                                             "rejected_by_reason": {},
                                                                             "wait_buckets": {}})

        statuses: list[int] = []
        retry_after: set[str] = set()
        for _ in range(MAX_ROUNDS):
            responses = await asyncio.gather(*(restricted.client.get(LIST_CRDS) for _ in range(BURST)))
            statuses += [r.status_code for r in responses]
            retry_after |= {r.headers["Retry-After"] for r in responses if r.status_code == 429}
            if 429 in statuses:
                break

        after = (await asyncio.to_thread(server_counters, lab))[name]
        second = await probe.run()

        # 429s happened, and every count of them agrees.
        throttled = statuses.count(429)
        assert throttled > 0, f"no 429 in {len(statuses)} requests"
        assert set(statuses) <= {200, 429}
        assert restricted.requests.throttled_total == throttled
        assert after["rejected"] - before["rejected"] == throttled

        assert first.ok and second.ok, (first.error, second.error)
        assert "rates" in first.unobservable
        (level,) = [p for p in second.priority_levels if p.name == name]
        assert level.rejected == throttled
        assert level.rejected_by_reason == {reason: int(count - before["rejected_by_reason"].get(reason, 0))
                                            for reason, count in after["rejected_by_reason"].items()
                                            if count - before["rejected_by_reason"].get(reason, 0)}
        assert level.rejected_total == after["rejected"]
        assert level.dispatched == after["dispatched"] - before["dispatched"] == statuses.count(200)
        assert second.interval_seconds > 0
        assert level.rejected_per_s == pytest.approx(throttled / second.interval_seconds)
        assert second.rejected_per_s >= level.rejected_per_s
        assert (level.nominal_limit_seats, level.limit_seats) == (after["nominal"], after["current"])
        assert level.limit_response == level_config["spec"]["limited"]["limitResponse"]["type"]
        low, high = bracket_of_p99(before["wait_buckets"], after["wait_buckets"])
        assert level.wait_p99_seconds is not None and low <= level.wait_p99_seconds <= high
        (activity,) = [f for f in second.flow_schemas if f.name == name]
        assert (activity.priority_level, activity.rejected) == (name, throttled)

        # The restricted user's own view: its 429s with Retry-After, and its APF headers named.
        own = await once(restricted)
        assert own.ok, own.error
        assert own.responses_429.total == throttled
        assert own.responses_429.recent and all(
            (r.flow_schema, r.priority_level) == (name, name) for r in own.responses_429.recent)
        assert {r.retry_after_seconds for r in own.responses_429.recent} <= {float(v) for v in retry_after}
        (flow,) = [f for f in own.own_flows if (f.flow_schema_uid, f.priority_level_uid) == uids]
        assert (flow.flow_schema, flow.priority_level) == (name, name)
        assert flow.responses == restricted.requests.apf_pairs[uids]
        assert ThrottlingSample.from_json(json.loads(json.dumps(own.to_json()))) == own
    finally:
        await restricted.aclose()
        await admin.aclose()
        await asyncio.to_thread(lab.kubectl, "delete", "flowschema,prioritylevelconfiguration", name,
                                "--ignore-not-found", "--wait")
        gone = await asyncio.to_thread(lab.kubectl, "get", "flowschema,prioritylevelconfiguration",
                                       "--ignore-not-found", "-o", "name")
        assert name not in gone.stdout


async def test_forbidden_metrics_are_unobservable_not_an_error(lab):
    """A user who may not read /metrics nor the flowcontrol API still gets its 429s and headers."""
    async with lab.cluster() as cluster:
        # The admin may impersonate; this user has no permission at all.
        cluster.client.headers["Impersonate-User"] = "crdscope-test-nobody"
        probe_answer = await cluster.client.get("/metrics")
        assert probe_answer.status_code == 403
        sample = await once(cluster)
    assert sample.error is None
    assert "403" in sample.unobservable["priority_levels"]
    assert "403" in sample.unobservable["names"]
    assert sample.priority_levels == ()
    assert sample.responses_429.total == 0
    # Its requests were still classified (by UID; names unknown without the flowcontrol API).
    assert sample.own_flows and all(f.flow_schema is None and f.flow_schema_uid for f in sample.own_flows)


def test_cli_prints_priority_levels_like_the_server(lab):
    done = subprocess.run([sys.executable, "-m", "crdscope.cli.main", "probe", "throttling", "--json",
                           "--kubeconfig", lab.kubeconfig], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    sample = json.loads(done.stdout)
    reference = lab.kubectl_json("get", "prioritylevelconfigurations")["items"]
    assert {p["name"] for p in sample["priority_levels"]} == {item["metadata"]["name"] for item in reference}
    server = server_counters(lab)
    for level in sample["priority_levels"]:
        assert {"name", "inqueue", "executing_seats", "limit_seats", "rejected_per_s",
                "wait_p99_seconds"} <= set(level)
        assert level["nominal_limit_seats"] == server[level["name"]]["nominal"]
    assert sample["interval_seconds"] > 0
    assert {"total", "recent"} <= set(sample["responses_429"])
