"""The exporter and the alert rules against real components: promtool and a real Prometheus.

* ``promtool check metrics`` on what ``crdscope watch --headless --serve-metrics`` serves
  while every probe reports on the lab (the names the rules use).
* A real Prometheus (Debian's) scrapes that exporter and the lab's API server, with the
  rules of ``crdscope rules`` loaded: squeezing a user through a one-seat Reject priority
  level fires "APF rejecting" naming that level, and SIGSTOP on the API server fires
  "not answering".  (The rule over the API server's own counter is checked by promtool
  only: its scrape of the lab timed out under the squeeze here.)
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from bench.common import scrape_metrics, stop_process
from crdscope.loader.engine import LoadEngine
from crdscope.loader.sources import open_source
from crdscope.connection.cluster import Cluster
from tests.faults.helpers import spawn
from tests.apf_squeeze import CONCURRENCY, COUNT, LEVEL, SEED, USER, manifests
from tests.helpers import async_wait_for, wait_for

pytestmark = pytest.mark.lab

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
CRDSCOPE = [sys.executable, "-m", "crdscope.cli.main"]


def free_port() -> int:
    from crdscope.lab.controlplane import free_port as lab_free_port

    return lab_free_port()


def exporter(lab, port: int, env: dict | None = None, record: Path | None = None) -> subprocess.Popen:
    recording = ["--record", str(record)] if record is not None else []
    return spawn("watch", "--headless", "--duration", "10m", "--serve-metrics", f"127.0.0.1:{port}", *recording,
                 "--kubeconfig", lab.kubeconfig, "--context", lab.admin_context, env=env,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def level_figures(recording: Path, level: str) -> list[tuple]:
    """Per throttling sample of a recording: time, rate interval, and ``level``'s rejected total,
    rejected in the interval and per second (what a failure message shows)."""
    from crdscope.session.replay import read_recording

    rows = []
    for sample in read_recording(recording).samples:
        if sample.probe != "throttling":
            continue
        found = next((pl for pl in sample.priority_levels if pl.name == level), None)
        rows.append((round(sample.timestamp % 1000, 2), sample.interval_seconds and round(sample.interval_seconds, 2),
                     sample.error, found and (found.rejected_total, found.rejected, found.rejected_per_s),
                     sorted(sample.unobservable)))
    return rows


def probes_up(text: str) -> set[str]:
    """The probes whose latest run succeeded, by the exporter's ``crdscope_probe_up`` (any cluster)."""
    from prometheus_client.parser import text_string_to_metric_families

    return {s.labels["probe"] for family in text_string_to_metric_families(text) for s in family.samples
            if s.name == "crdscope_probe_up" and s.value == 1.0}


def test_the_live_exporter_passes_promtool_check_metrics(lab):
    from crdscope.probes.registry import monitor_probes

    port = free_port()
    process = exporter(lab, port)
    try:
        # Every probe has reported (and succeeded) at least once: all names are on show.
        text = wait_for(lambda: (t := scrape_metrics(port)) and set(monitor_probes()) <= probes_up(t) and t,
                        timeout=120, message="every probe up in the exporter")
    finally:
        stop_process(process)
    done = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "crdscope_responsiveness_unanswered_seconds" in text
    assert "# TYPE crdscope_discovery_not_modified_total counter" in text
    assert "# TYPE crdscope_responsiveness_heartbeats_total counter" in text
    assert 'severity="critical"} ' in text and 'crdscope_findings{cluster="' in text


class Prometheus:
    """Debian's Prometheus on loopback, scraping crdscope's exporter and the lab, with crdscope's rules."""

    def __init__(self, lab, directory: Path, exporter_port: int, more_exporters: list[int] = (), *,
                 apiserver_keep: str = "apiserver_flowcontrol_rejected_requests_total") -> None:
        pki = Path(lab.state.run_dir) / "pki"
        rules = subprocess.run([*CRDSCOPE, "rules"], capture_output=True, text=True, timeout=60, check=True).stdout
        (directory / "rules.yml").write_text(rules)
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(directory / "rules.yml")],
            "scrape_configs": [
                {"job_name": "crdscope", "static_configs": [{"targets": [
                    f"127.0.0.1:{port}" for port in (exporter_port, *more_exporters)]}]},
                # The lab's /metrics is megabytes: more than a second to serve on a busy machine.
                {"job_name": "apiserver", "scheme": "https", "scrape_interval": "3s", "scrape_timeout": "3s",
                 "tls_config": {"ca_file": str(pki / "ca.crt"), "cert_file": str(pki / "admin.crt"),
                                "key_file": str(pki / "admin.key")},
                 "static_configs": [{"targets": [lab.server.removeprefix("https://")]}],
                 "metric_relabel_configs": [{"source_labels": ["__name__"], "action": "keep",
                                             "regex": apiserver_keep}]},
            ]}
        (directory / "prometheus.yml").write_text(json.dumps(config))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(directory / "prometheus.log", "wb")
        self.process = subprocess.Popen(
            [PROMETHEUS, f"--config.file={directory / 'prometheus.yml'}", f"--storage.tsdb.path={directory / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def firing(self, alertname: str) -> list[dict]:
        try:
            response = httpx.get(f"{self.url}/api/v1/alerts", timeout=5)
        except httpx.HTTPError:
            return []
        if response.status_code != 200:
            return []
        return [a for a in response.json()["data"]["alerts"]
                if a["labels"].get("alertname") == alertname and a["state"] == "firing"]

    def diagnose(self) -> str:
        """The scrape targets' health and the raw rejection counter, for a failure message."""
        try:
            targets = httpx.get(f"{self.url}/api/v1/targets", timeout=5).json()["data"]["activeTargets"]
            series = httpx.get(f"{self.url}/api/v1/query", timeout=5,
                               params={"query": "apiserver_flowcontrol_rejected_requests_total"}).json()
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            return f"Prometheus did not say: {exc}"
        health = [(t["labels"].get("job"), t["health"], t.get("lastError")) for t in targets]
        return f"targets {health}; rejected series {series['data']['result'][:3]}"

    def query(self, query: str) -> list:
        """The series ``query`` selects now (empty while Prometheus has not scraped them)."""
        try:
            answer = httpx.get(f"{self.url}/api/v1/query", timeout=5, params={"query": query}).json()
        except (httpx.HTTPError, ValueError):
            return []
        return answer.get("data", {}).get("result", [])

    def seen(self, query: str, window: str = "10m") -> list:
        """What ``query`` was at its highest over ``window`` (per series), for a failure message."""
        try:
            answer = httpx.get(f"{self.url}/api/v1/query", timeout=5,
                               params={"query": f"max_over_time(({query})[{window}:1s])"}).json()
        except (httpx.HTTPError, ValueError) as exc:
            return [f"Prometheus did not say: {exc}"]
        return [(r["metric"], r["value"][1]) for r in answer.get("data", {}).get("result", [])]

    def close(self) -> None:
        stop_process(self.process)
        self.log.close()


async def test_a_real_prometheus_fires_apf_rejecting_and_not_answering(fresh_lab, tmp_path):
    if not os.path.exists(PROMETHEUS):
        pytest.fail("Debian's prometheus is required: make system-deps")
    fresh_lab.kubectl("apply", "-f", "-", input=manifests())
    kubeconfig = fresh_lab.lab.mint_user(USER, path=tmp_path / "kubeconfig")
    # The throttling probe every 2 s, so a short squeeze shows between two of its scrapes.
    config_home = tmp_path / "config"
    (config_home / "crdscope").mkdir(parents=True)
    (config_home / "crdscope" / "config.toml").write_text("[cadences]\nthrottling = 2.0\n")
    port = free_port()
    recording = tmp_path / "exporter.jsonl"
    watcher = exporter(fresh_lab, port, env={"XDG_CONFIG_HOME": str(config_home)}, record=recording)
    prometheus = Prometheus(fresh_lab, tmp_path, port)
    try:
        await async_wait_for(lambda: "throttling" in probes_up(scrape_metrics(port)), timeout=90,
                             message="the exporter's throttling figures")
        # Prometheus holds the level's figures before the squeeze: a squeeze that ends before its first
        # scrape of the exporter (a slow start on a busy machine) would leave it nothing to see.
        await async_wait_for(lambda: prometheus.query(
            f'crdscope_throttling_priority_levels_rejected_total{{priority_level="{LEVEL}"}}'), timeout=90,
            message="Prometheus scraping the squeezed level's counter")
        async with Cluster.connect(str(kubeconfig), USER) as cluster:
            engine = LoadEngine(cluster, open_source(f"synthetic:{COUNT}", seed=SEED), profile="burst",
                                concurrency=CONCURRENCY, runs_directory=tmp_path / "runs")
            loading = asyncio.create_task(engine.run())
            # Watched during the load: the warning reads the level's rejection counter (it fires for two
            # minutes after the squeeze, however short the squeeze and however late Prometheus's scrapes).
            try:
                apf = await async_wait_for(lambda: prometheus.firing("CrdscopeAPFRejecting"), timeout=120,
                                           message="CrdscopeAPFRejecting firing")
            except AssertionError as timed_out:
                loaded = loading.result() if loading.done() else "still loading"
                raise AssertionError(
                    f"{timed_out}; the load: {loaded}; highest rejected/s exported: "
                    f"{prometheus.seen('crdscope_throttling_priority_levels_rejected_per_second')}; "
                    f"lowest up: {prometheus.seen('-up')}; {prometheus.diagnose()}; the exporter's throttling "
                    f"samples (time, interval, error, {LEVEL} total/window/rate): "
                    f"{level_figures(recording, LEVEL)}") from None
            final = await loading
        # APIServerAPFRejecting (the API server's own counter) is not asserted: Prometheus's scrape of the
        # lab's multi-megabyte /metrics timed out under the squeeze on this 2-core machine (see diagnose()).
        print(f"\n{prometheus.diagnose()}; APIServerAPFRejecting firing: {prometheus.firing('APIServerAPFRejecting')}")
        assert final.retries_429 > 0, final  # the squeeze happened
        assert {a["labels"]["priority_level"] for a in apf} == {LEVEL}, apf

        fresh_lab.lab.stop("apiserver")
        try:
            hung = await async_wait_for(lambda: prometheus.firing("CrdscopeAPIServerNotAnswering"), timeout=30,
                                        message="CrdscopeAPIServerNotAnswering firing")
        finally:
            fresh_lab.lab.start("apiserver")
        assert hung[0]["labels"]["severity"] == "critical"
    finally:
        prometheus.close()
        stop_process(watcher)
