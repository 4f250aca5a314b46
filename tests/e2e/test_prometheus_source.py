"""The Prometheus source against a real Prometheus server scraping the lab.

Debian's ``prometheus`` is started on loopback in a temporary directory and
scrapes the lab's /metrics with the admin client certificate (job
"apiserver"), as a self-hosted monitoring stack scrapes an API server.

What the lab cannot give for real, and how the tests deal with it:

* kubelet/cAdvisor (``container_memory_working_set_bytes``): the lab runs no
  kubelet.  The first tests see the query return nothing and check that the
  figure is unobservable with its reason.  The last one adds a scrape job that
  renames the lab's own ``process_resident_memory_bytes`` to
  ``container_memory_working_set_bytes{container="kube-apiserver"}`` through
  Prometheus relabelling (a stand-in for cAdvisor, done by the real server), so
  the query, the labels and the value path are exercised end to end.
* kube-state-metrics (``kube_pod_container_status_restarts_total``): nothing
  in the lab produces it, so only its absence (unobservable, with the reason)
  is tested for real.  Its memory limit series is stood in for the same way as
  cAdvisor's (a relabelled gauge that holds still), for the limit's path into
  ``probe health`` and ``estimate --prometheus``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from crdscope.connection.prometheus import PrometheusSource
from tests.e2e.monitoring import metric_value
from tests.e2e.prometheus_server import PROMETHEUS, PrometheusServer
from tests.helpers import wait_for

pytestmark = pytest.mark.lab

CRDSCOPE = [sys.executable, "-m", "crdscope.cli.main"]


@pytest.fixture(scope="module")
def lab(module_lab):
    """A lab of this module's own, not the session's: Prometheus scrapes the whole /metrics every second
    with a 1 s timeout, three jobs at once, and the session lab's /metrics grows with every resource the
    suite touched before: 162,052 samples by here in the whole suite, scraped in 1 s or more (the median
    was the timeout); 12 of 77 scrapes of the apiserver job succeeded, none of the limit stand-in's, each
    failure marked the series stale, and the source read nothing (``start_time`` None, the limit never
    seen). A lab of its own serves about 17,000 samples, scraped in 0.1 s."""
    return module_lab


@pytest.fixture(scope="module")
def prometheus(lab, tmp_path_factory):
    if not os.path.exists(PROMETHEUS):
        pytest.fail("Debian's prometheus is required for the Prometheus source tests")
    server = PrometheusServer(lab, tmp_path_factory.mktemp("prometheus"))
    try:
        wait_for(lambda: server.query('process_start_time_seconds{job="apiserver"}'), timeout=90,
                 message="Prometheus to scrape the lab")
        yield server
    finally:
        server.stop()


def probe_health(kubeconfig: str, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    done = subprocess.run([*CRDSCOPE, "probe", "health", "--json", "--kubeconfig", kubeconfig, *extra],
                          capture_output=True, text=True, timeout=120)
    return done, json.loads(done.stdout) if done.stdout.strip() else {}


async def read_now(url: str):
    source = PrometheusSource(url)
    try:
        return await source.read(max_age=0)
    finally:
        source.close()


async def test_process_figures_come_from_the_apiserver_job_and_gaps_are_named(prometheus, lab):
    reading = await read_now(prometheus.url)
    reference = lab.kubectl("get", "--raw", "/metrics").stdout
    assert reading.error is None
    assert reading.values["start_time"] == metric_value(reference, "process_start_time_seconds")
    assert reading.values["rss_bytes"] == pytest.approx(metric_value(reference, "process_resident_memory_bytes"),
                                                        rel=0.3)
    assert reading.values["goroutines"] == pytest.approx(metric_value(reference, "go_goroutines"), rel=0.3)
    assert "process_resident_memory_bytes" in reading.sources["rss_bytes"]
    # No kubelet and no kube-state-metrics in the lab: said so, not zero.
    assert "working_set_bytes" not in reading.values
    assert "container_memory_working_set_bytes" in reading.unobservable["working_set_bytes"]
    assert reading.pod_restarts == {}
    assert "kube-state-metrics" in reading.unobservable["pod_restarts"]


def test_user_without_metrics_gets_memory_and_restarts_from_prometheus(prometheus, lab):
    kubeconfig = str(lab.lab.mint_user("nometrics-prom"))
    done, sample = probe_health(kubeconfig, "--prometheus", prometheus.url)
    assert done.returncode == 0, done.stderr
    reference = lab.kubectl("get", "--raw", "/metrics").stdout
    assert sample["error"] is None
    assert sample["start_time"] == metric_value(reference, "process_start_time_seconds")
    assert sample["rss_bytes"] == pytest.approx(metric_value(reference, "process_resident_memory_bytes"), rel=0.3)
    assert sample["sources"]["rss_bytes"].startswith("prometheus: process_resident_memory_bytes")
    assert sample["restarts"] == 0  # from the start time Prometheus holds
    assert "rss_bytes" not in sample["unobservable"]
    # Still not observable: what neither this user nor this Prometheus can see.
    assert sample["working_set_bytes"] is None and "working_set_bytes" in sample["unobservable"]
    assert sample["crds"] is None and "403" in sample["unobservable"]["crds"]
    assert "403" in sample["unobservable"]["storage_objects_total"]


def test_unreachable_prometheus_keeps_the_metrics_figures(lab):
    from crdscope.lab.controlplane import free_port

    done, sample = probe_health(lab.kubeconfig, "--prometheus", f"http://127.0.0.1:{free_port()}")
    assert done.returncode == 0, done.stderr
    assert sample["rss_bytes"] and "rss_bytes" not in sample["sources"]  # /metrics, directly
    assert "connection refused" in sample["unobservable"]["working_set_bytes"]
    bad = subprocess.run([*CRDSCOPE, "probe", "health", "--kubeconfig", lab.kubeconfig, "--prometheus",
                          "user:secret@nowhere"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2
    assert len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr
    assert "secret" not in bad.stderr


async def test_container_working_set_is_read_when_cadvisor_series_exist(prometheus, lab):
    prometheus.write_config(cadvisor_standin=True)
    prometheus.reload()
    wait_for(lambda: prometheus.query('container_memory_working_set_bytes{container="kube-apiserver"}'),
             timeout=60, message="the cAdvisor stand-in series")
    reading = await read_now(prometheus.url)
    reference = lab.kubectl("get", "--raw", "/metrics").stdout
    assert reading.values["working_set_bytes"] == pytest.approx(
        metric_value(reference, "process_resident_memory_bytes"), rel=0.3)
    assert "largest of 1 series" in reading.sources["working_set_bytes"]
    assert "working_set_bytes" not in reading.unobservable
    # Under load a scrape of the lab can fail, and Prometheus then marks the stand-in series
    # stale for a moment: wait until the probe's own run sees it (as the first read did).
    runs = []

    def probe_sees_working_set():
        done, sample = probe_health(lab.kubeconfig, "--prometheus", prometheus.url)
        assert done.returncode == 0, done.stderr
        runs.append(sample["unobservable"].get("working_set_bytes"))
        return sample if sample["working_set_bytes"] is not None else None

    sample = wait_for(probe_sees_working_set, timeout=90, interval=1, message=f"working set via the probe {runs}")
    assert sample["working_set_bytes"] == pytest.approx(sample["rss_bytes"], rel=0.3)
    assert sample["sources"]["working_set_bytes"].startswith("prometheus: container_memory_working_set_bytes")


def test_the_memory_limit_prometheus_shows_reaches_health_and_estimate(prometheus, lab):
    import asyncio

    prometheus.write_config(cadvisor_standin=True, limit_standin=True)
    prometheus.reload()
    selector = 'kube_pod_container_resource_limits{container="kube-apiserver",resource="memory"}'
    (series,) = wait_for(lambda: prometheus.query(selector), timeout=60, message="the limit stand-in series")
    expected = float(series["value"][1])
    # A stand-in scrape of the shared lab's big /metrics can miss its 1 s timeout, and Prometheus then
    # marks the series stale for a moment: each reader is asked until it sees the series (as above).
    seen: list = []

    def source_reads_it():
        reading = asyncio.run(read_now(prometheus.url))
        seen.append(reading.unobservable.get("memory_limit_bytes"))
        return reading if "memory_limit_bytes" in reading.values else None

    reading = wait_for(source_reads_it, timeout=90, interval=1, message=f"the limit via the source {seen[-3:]}")
    assert reading.values["memory_limit_bytes"] == expected
    assert reading.sources["memory_limit_bytes"].startswith("prometheus: kube_pod_container_resource_limits")

    def probe_reads_it():
        done, sample = probe_health(lab.kubeconfig, "--prometheus", prometheus.url)
        assert done.returncode == 0, done.stderr
        return sample if sample["memory_limit_bytes"] is not None else None

    sample = wait_for(probe_reads_it, timeout=90, interval=1, message="the limit via probe health")
    assert sample["memory_limit_bytes"] == int(expected)

    def estimate(*extra: str) -> dict:
        done = subprocess.run([*CRDSCOPE, "estimate", "synthetic:50", "--kubernetes", "1.37", "--json",
                               "--prometheus", prometheus.url, *extra], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return {**json.loads(done.stdout)["memory"], "stderr": done.stderr}

    memory = wait_for(lambda: (m := estimate())["limit_mib"] is not None and m, timeout=90, interval=1,
                      message="the limit via estimate --prometheus")
    assert memory["limit_mib"] == round(expected / 2**20, 1)
    assert memory["crds_until_limit"] and memory["crds_until_limit"] > 0
    assert "kube_pod_container_resource_limits" in memory["stderr"]
    # A flag wins over Prometheus.
    assert estimate("--memory-limit", "3Gi")["limit_mib"] == 3072.0
