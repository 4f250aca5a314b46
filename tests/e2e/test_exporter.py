"""A real Prometheus server scrapes ``crdscope watch --headless --serve-metrics`` and answers queries."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from bench.common import stop_process
from crdscope.lab.controlplane import free_port
from tests.helpers import wait_for

pytestmark = pytest.mark.lab

PROMETHEUS = "/usr/bin/prometheus"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def exporter(lab, tmp_path):
    """``crdscope watch --headless --serve-metrics 127.0.0.1:PORT`` against the session lab."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "crdscope.cli.main", "watch", "--headless", "--kubeconfig", lab.kubeconfig,
         "--context", lab.admin_context, "--duration", "10m", "--serve-metrics", f"127.0.0.1:{port}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        yield port
    finally:
        process.send_signal(signal.SIGTERM)  # ends the watch cleanly (exit 130), endpoint closed
        try:
            stdout, stderr = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
        assert process.returncode == 130, stdout + stderr
        assert f"serving metrics on http://127.0.0.1:{port}/metrics" in stdout
        assert "Traceback" not in stderr


@pytest.fixture
def prometheus(tmp_path, exporter):
    """Debian's Prometheus on loopback, scraping the exporter every second; yields its API base URL."""
    if not shutil.which(PROMETHEUS):
        pytest.fail(f"{PROMETHEUS} is required (Debian package 'prometheus'; make system-deps)")
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [{"job_name": "crdscope", "static_configs": [{"targets": [f"127.0.0.1:{exporter}"]}]}],
    }))
    log = open(tmp_path / "prometheus.log", "w")
    process = subprocess.Popen(
        [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--web.enable-lifecycle"],
        stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    base = f"http://127.0.0.1:{port}"
    try:
        def ready() -> bool:
            if process.poll() is not None:
                raise AssertionError(f"prometheus exited: {(tmp_path / 'prometheus.log').read_text()[-2000:]}")
            try:
                return httpx.get(f"{base}/-/ready", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(ready, timeout=60, message="prometheus ready")
        yield base
    finally:
        stop_process(process)
        log.close()


def query(base: str, promql: str) -> list[dict]:
    """The result vector of an instant query (empty until the series exists)."""
    answer = httpx.get(f"{base}/api/v1/query", params={"query": promql}, timeout=10).json()
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


def test_prometheus_scrapes_crdscope_figures(lab, prometheus):
    # The target is up and every probe reported at least once.
    wait_for(lambda: query(prometheus, 'up{job="crdscope"} == 1'), timeout=60, message="the target up")
    up = wait_for(lambda: (r := query(prometheus, "crdscope_probe_up == 1")) and len(r) >= 5 and r,
                  timeout=90, message="the probes up")
    assert {"health", "inventory", "discovery"} <= {r["metric"]["probe"] for r in up}

    # A crdscope figure Prometheus answers for, against kubectl at the same moment.
    def crds_agree():
        result = query(prometheus, "crdscope_inventory_crds")
        listed = len(lab.kubectl("get", "crd", "-o", "name").stdout.split())
        return result and float(result[0]["value"][1]) == listed

    wait_for(crds_agree, timeout=60, message="crdscope_inventory_crds equal to kubectl's count")

    # Nested figures become labels; the cluster is named in crdscope_info.
    verbs = wait_for(lambda: query(prometheus, "crdscope_latency_canaries_status"), timeout=60,
                     message="canary statuses")
    assert {r["metric"]["canary"] for r in verbs} >= {"version", "get_namespace", "list_crds"}
    assert all(r["value"][1] == "200" for r in verbs if r["metric"]["canary"] != "list_cr")
    info = query(prometheus, "crdscope_info")
    assert info and info[0]["metric"]["server"] == lab.server
    assert info[0]["metric"]["kubernetes_version"] == "v1.37.2"
    # Resident memory against the server's own /metrics read by kubectl: the same order of magnitude.
    rss = wait_for(lambda: query(prometheus, "crdscope_health_rss_bytes"), timeout=60, message="rss")
    reference = next(float(line.split()[1]) for line in lab.kubectl("get", "--raw", "/metrics").stdout.splitlines()
                     if line.startswith("process_resident_memory_bytes "))
    assert 0.5 < float(rss[0]["value"][1]) / reference < 2.0
