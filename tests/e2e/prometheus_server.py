"""Debian's real Prometheus, started on loopback in a temporary directory to scrape the lab.

It scrapes the lab's /metrics with the admin client certificate (job "apiserver"); an optional
second job stands in for cAdvisor by relabelling the lab's own ``process_resident_memory_bytes``.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
from pathlib import Path

import httpx

from bench.common import stop_process

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"


def scrape_job(name: str, lab, pki: Path, relabel: list[dict] | None = None) -> dict:
    job = {
        "job_name": name,
        "scheme": "https",
        "tls_config": {"ca_file": str(pki / "ca.crt"), "cert_file": str(pki / "admin.crt"),
                       "key_file": str(pki / "admin.key")},
        "static_configs": [{"targets": [lab.server.removeprefix("https://")]}],
        # Keep the TSDB small: the lab's /metrics is megabytes, the source reads a few gauges.
        "metric_relabel_configs": relabel or [
            {"source_labels": ["__name__"], "regex": "process_.*|go_goroutines|go_memstats_heap_inuse_bytes",
             "action": "keep"}],
    }
    return job


CADVISOR_STANDIN = [
    {"source_labels": ["__name__"], "regex": "process_resident_memory_bytes", "action": "keep"},
    {"target_label": "__name__", "replacement": "container_memory_working_set_bytes"},
    {"target_label": "container", "replacement": "kube-apiserver"},
    {"target_label": "namespace", "replacement": "kube-system"},
    {"target_label": "pod", "replacement": "kube-apiserver-lab"},
]


#: kube-state-metrics' memory limit, stood in for by the lab's own process_start_time_seconds: a gauge that
#: holds still (about 1.8e9, read as bytes: a 1.7 GiB limit), so the value read through crdscope can be
#: compared with the one Prometheus holds.
LIMIT_STANDIN = [
    {"source_labels": ["__name__"], "regex": "process_start_time_seconds", "action": "keep"},
    {"target_label": "__name__", "replacement": "kube_pod_container_resource_limits"},
    {"target_label": "container", "replacement": "kube-apiserver"},
    {"target_label": "namespace", "replacement": "kube-system"},
    {"target_label": "resource", "replacement": "memory"},
    {"target_label": "unit", "replacement": "byte"},
]


class PrometheusServer:
    def __init__(self, lab, directory: Path) -> None:
        from crdscope.lab.controlplane import free_port

        self.lab = lab
        self.directory = directory
        self.pki = Path(lab.state.run_dir) / "pki"
        self.config = directory / "prometheus.yml"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.write_config(cadvisor_standin=False)
        self.log = open(directory / "prometheus.log", "wb")
        self.process = subprocess.Popen(
            [PROMETHEUS, f"--config.file={self.config}", f"--storage.tsdb.path={directory / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def write_config(self, *, cadvisor_standin: bool, limit_standin: bool = False) -> None:
        jobs = [scrape_job("apiserver", self.lab, self.pki)]
        if cadvisor_standin:
            jobs.append(scrape_job("cadvisor-standin", self.lab, self.pki, CADVISOR_STANDIN))
        if limit_standin:
            jobs.append(scrape_job("kube-state-metrics-standin", self.lab, self.pki, LIMIT_STANDIN))
        config = {"global": {"scrape_interval": "1s", "scrape_timeout": "1s"}, "scrape_configs": jobs}
        self.config.write_text(json.dumps(config))  # JSON is YAML

    def reload(self) -> None:
        self.process.send_signal(signal.SIGHUP)

    def query(self, promql: str) -> list:
        try:
            response = httpx.get(f"{self.url}/api/v1/query", params={"query": promql}, timeout=5)
            return response.json()["data"]["result"] if response.status_code == 200 else []
        except httpx.HTTPError:
            return []

    def stop(self) -> None:
        stop_process(self.process, grace=20)
        self.log.close()
