"""The Prometheus source over two kube-apiservers (issue 17), against Debian's real Prometheus.

Prometheus scrapes each replica on its own port (job "apiserver", one instance per replica), as a
monitoring stack scrapes the endpoints of the ``kubernetes`` Service.  The figures read through
``--prometheus`` (per-instance memory and start time, APF rejections and queueing, LIST latency
p99) are compared with the same figures read from both replicas' own /metrics with
prometheus_client, after Prometheus has scraped the same counter values (waited for through its
HTTP API, not through the code under test).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
import uuid

import httpx
import pytest

from crdscope.connection.prometheus import PrometheusSource
from tests.e2e.ha_lab import admin_context, replica_metrics, replica_port, start_ha_lab
from tests.apf_squeeze import LIST_CRDS, squeeze_manifests
from tests.e2e.prometheus_server import PROMETHEUS, PrometheusServer
from tests.helpers import async_wait_for, wait_for

pytestmark = pytest.mark.lab

CRDSCOPE = [sys.executable, "-m", "crdscope.cli.main"]
KEEP = ("process_.*|go_goroutines|go_memstats_heap_inuse_bytes|apiserver_flowcontrol_.*"
        "|apiserver_request_duration_seconds_bucket")
LIST_PATH = "/api/v1/namespaces"


class ReplicasPrometheus(PrometheusServer):
    """The tests' Prometheus, with one target per kube-apiserver replica."""

    def write_config(self, *, cadvisor_standin: bool) -> None:
        targets = [f"127.0.0.1:{replica_port(self.lab, index)}" for index in (1, 2)]
        job = {
            "job_name": "apiserver", "scheme": "https",
            "tls_config": {"ca_file": str(self.pki / "ca.crt"), "cert_file": str(self.pki / "admin.crt"),
                           "key_file": str(self.pki / "admin.key")},
            "static_configs": [{"targets": targets}],
            "metric_relabel_configs": [{"source_labels": ["__name__"], "regex": KEEP, "action": "keep"}],
        }
        config = {"global": {"scrape_interval": "1s", "scrape_timeout": "1s"}, "scrape_configs": [job]}
        self.config.write_text(json.dumps(config))

    def scalar(self, promql: str) -> float | None:
        result = self.query(promql)
        return float(result[0]["value"][1]) if result else None


@pytest.fixture(scope="module")
def ha_lab(tmp_path_factory: pytest.TempPathFactory, lab_binaries):
    handle = start_ha_lab(tmp_path_factory.mktemp("ha-prometheus-lab"), lab_binaries)
    yield handle
    handle.lab.down()


@pytest.fixture(scope="module")
def prometheus(ha_lab, tmp_path_factory):
    if not os.path.exists(PROMETHEUS):
        pytest.fail("Debian's prometheus is required for the Prometheus source tests")
    server = ReplicasPrometheus(ha_lab, tmp_path_factory.mktemp("prometheus"))
    try:
        wait_for(lambda: len(server.query('process_start_time_seconds{job="apiserver"}')) == 2, timeout=90,
                 message="Prometheus to scrape both replicas")
        yield server
    finally:
        server.stop()


def summed(lab, family: str, **match: str) -> float:
    """``family`` summed over both replicas' own /metrics, for the series whose labels include ``match``."""
    return sum(value for index in (1, 2) for labels, value in replica_metrics(lab, index).get(family, [])
               if all(labels.get(k) == v for k, v in match.items()))


def quantile_of(q: float, cumulative: dict[float, float]) -> float:
    """Prometheus' histogram_quantile (linear inside the bucket), written out for the comparison."""
    bounds = sorted(cumulative)
    rank = q * cumulative[bounds[-1]]
    lower, below = 0.0, 0.0
    for bound in bounds:
        count = cumulative[bound]
        if count >= rank:
            if math.isinf(bound):
                return lower
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return lower


async def read(url: str, **options):
    source = PrometheusSource(url, **options)
    try:
        return await source.read(max_age=0)
    finally:
        source.close()


async def test_each_instance_has_its_own_memory_and_start_time(prometheus, ha_lab):
    reading = await read(prometheus.url)
    assert reading.error is None and reading.figures is not None
    instances = {i.instance: i for i in reading.figures.instances}
    for index in (1, 2):
        own = replica_metrics(ha_lab, index)
        instance = instances[f"127.0.0.1:{replica_port(ha_lab, index)}"]
        assert instance.start_time == own["process_start_time_seconds"][0][1]
        assert instance.rss_bytes and instance.rss_bytes > 0 and instance.open_fds
        assert instance.restarts == 0


async def test_apf_rejections_and_queueing_match_both_replicas_metrics(prometheus, ha_lab):
    name = f"crdscope-test-ha-squeeze-{uuid.uuid4().hex[:6]}"
    await asyncio.to_thread(ha_lab.kubectl, "apply", "-f", "-", input=squeeze_manifests(name, "crdscope-restricted"))
    restricted = ha_lab.cluster(ha_lab.restricted_context)
    try:
        level = (await asyncio.to_thread(ha_lab.kubectl_json, "get", "prioritylevelconfiguration", name))

        async def classified_into_the_squeeze() -> bool:
            response = await restricted.client.get(LIST_CRDS, params={"limit": "1"})
            return response.headers.get("X-Kubernetes-PF-PriorityLevel-UID") == level["metadata"]["uid"]

        await async_wait_for(classified_into_the_squeeze, timeout=60, message="APF to use the new flow schema")

        async def burst() -> int:
            throttled = 0
            for _ in range(8):
                responses = await asyncio.gather(*(restricted.client.get(LIST_CRDS) for _ in range(40)))
                throttled += sum(1 for r in responses if r.status_code == 429)
                if throttled >= 10:
                    break
            return throttled

        async def scraped_by_prometheus() -> float:
            total = await asyncio.to_thread(summed, ha_lab, "apiserver_flowcontrol_rejected_requests_total",
                                            priority_level=name)
            promql = f'sum(apiserver_flowcontrol_rejected_requests_total{{priority_level="{name}"}})'
            await asyncio.to_thread(wait_for, lambda: prometheus.scalar(promql) == total, timeout=60,
                                    message="Prometheus to scrape the rejections of both replicas")
            return total

        # Twice: Prometheus' rate() does not count a series' first value (the first burst creates
        # the series), so the rate needs rejections after it has been scraped once.
        first = await burst()
        assert first > 0, "no 429 from the squeezed priority level"
        await scraped_by_prometheus()
        throttled = first + await burst()
        expected = await scraped_by_prometheus()
        assert expected >= throttled  # every 429 we saw is counted by one replica or the other
        reading = await read(prometheus.url)
        figures = reading.figures
        assert figures is not None
        assert figures.apf_rejected_total[name] == expected
        assert figures.apf_rejected_per_s[name] > 0
        inqueue = await asyncio.to_thread(summed, ha_lab, "apiserver_flowcontrol_current_inqueue_requests",
                                          priority_level=name)
        assert figures.apf_inqueue.get(name, 0.0) == inqueue
        assert "prometheus" in figures.shown.lower() or "/metrics" in figures.shown
    finally:
        await restricted.aclose()
        await asyncio.to_thread(ha_lab.kubectl, "delete", "flowschema,prioritylevelconfiguration", name,
                                "--ignore-not-found", "--wait")


async def test_list_latency_p99_matches_both_replicas_histograms(prometheus, ha_lab):
    async with ha_lab.cluster() as admin:
        for _ in range(5):  # new connections each round: both replicas serve LISTs
            answers = await asyncio.gather(*(admin.client.get(LIST_PATH, params={"limit": "500"})
                                             for _ in range(10)))
            assert {a.status_code for a in answers} == {200}

    def cumulative() -> dict[float, float]:
        buckets: dict[float, float] = {}
        for index in (1, 2):
            for labels, value in replica_metrics(ha_lab, index).get("apiserver_request_duration_seconds_bucket", []):
                if labels.get("verb") == "LIST":
                    bound = float(labels["le"])
                    buckets[bound] = buckets.get(bound, 0.0) + value
        return buckets

    own = await asyncio.to_thread(cumulative)
    total = own[math.inf]
    promql = 'sum(apiserver_request_duration_seconds_bucket{verb="LIST",le="+Inf"})'
    await asyncio.to_thread(wait_for, lambda: prometheus.scalar(promql) == total, timeout=60,
                            message="Prometheus to scrape the LISTs of both replicas")
    assert await asyncio.to_thread(cumulative) == own, "a LIST arrived meanwhile: the comparison needs quiet"
    since_start = await read(prometheus.url, window=None)
    assert since_start.figures is not None
    assert since_start.figures.latency_p99_seconds["LIST"] == pytest.approx(quantile_of(0.99, own), rel=1e-9)
    windowed = await read(prometheus.url)  # the default: the last five minutes
    assert windowed.figures is not None and windowed.figures.latency_p99_seconds["LIST"] > 0


def test_probe_health_with_prometheus_says_which_figures_are_shown(prometheus, ha_lab):
    done = subprocess.run([*CRDSCOPE, "probe", "health", "--json", "--kubeconfig", ha_lab.kubeconfig,
                           "--prometheus", prometheus.url], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    sample = json.loads(done.stdout)
    assert len(sample["replicas"]) == 2  # from /metrics, which the admin may read
    figures = sample["prometheus"]
    assert {i["instance"] for i in figures["instances"]} == \
        {f"127.0.0.1:{replica_port(ha_lab, index)}" for index in (1, 2)}
    assert "/metrics" in figures["shown"]
    assert figures["queries"]["latency_p99_seconds"].startswith("histogram_quantile(0.99")


def test_prometheus_targets_are_the_replicas_not_the_balancer(prometheus, ha_lab):
    # The premise: each instance is one replica (a scrape through haproxy would mix them).
    answer = httpx.get(f"{prometheus.url}/api/v1/targets", timeout=5).json()
    scraped = {t["labels"]["instance"] for t in answer["data"]["activeTargets"]}
    assert scraped == {f"127.0.0.1:{replica_port(ha_lab, index)}" for index in (1, 2)}
    assert admin_context(ha_lab) is not None
