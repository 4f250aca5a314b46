"""The health probe against the real lab: figures, memory per CRD, restarts, outages, readyz, 403s."""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crdscope.base.samples.health import HealthSample
from tests.crdsets import write_tiny_crds
from tests.e2e.monitoring import apply_and_establish, kubectl, metric_value, running_monitor, ss_etcd_connections
from tests.helpers import wait_for

pytestmark = pytest.mark.lab

CRDSCOPE = [sys.executable, "-m", "crdscope.cli.main"]
OURS = {"app.kubernetes.io/managed-by": "crdscope"}


def probe_health(kubeconfig: str, *extra: str, env: dict | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    done = subprocess.run([*CRDSCOPE, "probe", "health", "--json", "--kubeconfig", kubeconfig, *extra],
                          capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})})
    return done, json.loads(done.stdout) if done.stdout.strip() else {}


def objects_by_resource(text: str) -> dict[str, int]:
    """apiserver_resource_objects of a kubectl /metrics read, as "resource.group" -> count."""
    counts = {}
    for line in text.splitlines():
        if line.startswith("apiserver_resource_objects{"):
            labels = dict(part.split("=", 1) for part in line[line.index("{") + 1:line.index("}")].split(","))
            group, resource = labels["group"].strip('"'), labels["resource"].strip('"')
            value = int(float(line.rsplit(" ", 1)[1]))
            if value >= 0:
                counts[f"{resource}.{group}" if group else resource] = value
    return counts


def test_cli_figures_agree_with_a_direct_metrics_read(lab):
    def agreeing():
        # The session lab's home, where `crdscope lab up` would have put it: the probe finds the lab there.
        done, sample = probe_health(lab.kubeconfig, env={"CRDSCOPE_LAB_HOME": str(lab.lab.home)})
        assert done.returncode == 0, done.stderr
        reference = lab.kubectl("get", "--raw", "/metrics").stdout
        crds = len(lab.kubectl_json("get", "crd")["items"])
        # The object counts refresh about once a minute: retry until both reads saw the same refresh.
        if sample["storage_objects_total"] != sum(objects_by_resource(reference).values()):
            return None
        return sample, reference, crds

    sample, reference, crds = wait_for(agreeing, timeout=150, interval=2, message="a consistent pair of reads")
    for key in ("rss_bytes", "heap_bytes", "goroutines", "start_time", "restarts", "ready", "failing_checks",
                "crds", "mib_per_crd", "open_fds", "fds_per_crd"):
        assert key in sample
    assert sample["error"] is None
    assert sample["start_time"] == metric_value(reference, "process_start_time_seconds")
    assert sample["max_fds"] == metric_value(reference, "process_max_fds")
    assert sample["rss_bytes"] == pytest.approx(metric_value(reference, "process_resident_memory_bytes"), rel=0.3)
    assert sample["heap_bytes"] == pytest.approx(metric_value(reference, "go_memstats_heap_inuse_bytes"), rel=0.5)
    assert sample["goroutines"] == pytest.approx(metric_value(reference, "go_goroutines"), rel=0.3)
    assert sample["open_fds"] == pytest.approx(metric_value(reference, "process_open_fds"), abs=30)
    objects = objects_by_resource(reference)
    top = sorted(objects.items(), key=lambda kv: (-kv[1], kv[0]))[:len(sample["storage_objects_top"])]
    assert sample["storage_objects_top"] == dict(top)
    assert sample["storage_size_bytes"] == pytest.approx(
        sum(float(line.rsplit(" ", 1)[1]) for line in reference.splitlines()
            if line.startswith("apiserver_storage_size_bytes{")), rel=0.5)
    assert sample["crds"] == crds
    assert lab.kubectl("get", "--raw", "/readyz").stdout.strip() == "ok"
    assert sample["ready"] is True and sample["live"] is True and sample["failing_checks"] == []
    assert sample["restarts"] == 0 and sample["outages"] == [] and sample["down"] is False
    # One sample cannot fit a line: each fit is None with its reason, never 0.
    for field in ("mib_per_crd", "r2", "fds_per_crd"):
        assert sample[field] is None and "two or more CRD counts" in sample["unobservable"][field]
    # On a crdscope lab even the one-shot probe counts the API server's etcd connections (from /proc).
    assert sample["etcd_connections"] == pytest.approx(ss_etcd_connections(lab), abs=3)
    assert "etcd_connections" not in sample["unobservable"]


async def test_memory_per_crd_is_positive_with_r2_after_a_few_hundred_crds(fresh_lab, tmp_path: Path):
    # A lab of its own: a server that earlier tests filled and emptied keeps that memory (Go
    # returns freed heap lazily), new CRDs reuse it and RSS stops tracking the CRD count.
    lab = fresh_lab
    batches = [write_tiny_crds(tmp_path / f"b{i}", 50, prefix=f"mem{i}", labels=OURS)
               for i in range(5)]
    # No clean-up: the lab goes with the test (deleting 250 CRDs on a busy machine outlasted
    # kubectl wait's 180 s once, failing a test whose figures were fine).
    async with running_monitor(lab, ["health"], health=0.5) as (monitor, collected):
        first = await collected.next("health", lambda s: s.crds is not None and s.rss_bytes)
        for path in batches:
            await apply_and_establish(lab, path, monitor)
            expected = len((await kubectl(lab, "get", "crd", "-o", "name")).stdout.split())
            # Three samples at this count, so that each count has settled readings.
            for _ in range(3):
                await collected.next("health", lambda s, n=expected: s.crds == n, timeout=60,
                                     message=f"{expected} CRDs")
        sample = collected.of("health")[-1]

    assert sample.crds >= first.crds + 250
    assert sample.mib_per_crd is not None and sample.mib_per_crd > 0
    assert sample.r2 is not None and 0.0 <= sample.r2 <= 1.0
    assert sample.heap_mib_per_crd is not None and sample.fds_per_crd is not None
    assert sample.fit_crd_counts >= 6
    # Recompute the fit from the samples with the standard library: one mean per CRD count.
    same_process = [s for s in collected.of("health")
                    if s.start_time == sample.start_time and s.crds is not None and s.rss_bytes]
    by_count: dict[int, list[int]] = {}
    for s in same_process:
        by_count.setdefault(s.crds, []).append(s.rss_bytes)
    xs = sorted(by_count)
    ys = [statistics.fmean(by_count[x]) for x in xs]
    slope, _ = statistics.linear_regression(xs, ys)
    assert sample.mib_per_crd == pytest.approx(slope / 2**20, rel=1e-6)
    assert sample.r2 == pytest.approx(statistics.correlation(xs, ys) ** 2, rel=1e-6)
    print(f"\nrss {sample.mib_per_crd:.3f} MiB/CRD (R² {sample.r2:.2f}), heap {sample.heap_mib_per_crd:.3f} "
          f"MiB/CRD, {sample.fds_per_crd:.3f} fds/CRD over {sample.fit_crd_counts} CRD counts")


async def test_sigkill_and_start_is_one_restart_and_one_outage(fresh_lab):
    cadence = 0.5
    async with running_monitor(fresh_lab, ["health"], health=cadence) as (monitor, collected):
        before = await collected.next("health", lambda s: s.start_time is not None and s.ready)
        assert before.restarts == 0 and before.outages == ()
        killed_at = time.time()
        fresh_lab.lab.kill("apiserver")
        down = await collected.next("health", lambda s: s.down, timeout=30, message="the outage")
        assert down.error and "connection refused" in down.error
        assert len(down.outages) == 1 and down.outages[0].end is None
        await kubectl(fresh_lab, "version", check=False)  # nothing answers: kubectl fails too
        await asyncio.to_thread(fresh_lab.lab.start, "apiserver")
        back_at = time.time()
        back = await collected.next("health", lambda s: s.ready and s.restarts, timeout=60, message="recovery")
        # A few more runs: the restart and the window are counted once.
        for _ in range(4):
            later = await collected.next("health")
    assert later.restarts == 1
    assert len(later.outages) == 1
    # Replay relies on the JSON round trip (the outage window is a nested dataclass).
    assert HealthSample.from_json(json.loads(json.dumps(later.to_json()))) == later
    window = later.outages[0]
    assert window.end is not None and window.start >= killed_at - 0.1
    outage_seconds = back_at - killed_at
    # The probe sees the outage begin within a run of the kill and end within a run of readiness.
    assert outage_seconds - 2 * cadence - 2 <= window.duration_seconds <= outage_seconds + 2 * cadence + 2
    assert back.start_time > before.start_time
    reference = (await kubectl(fresh_lab, "get", "--raw", "/metrics")).stdout
    assert back.start_time == metric_value(reference, "process_start_time_seconds")
    print(f"\noutage {window.duration_seconds:.1f} s (kill to ready by the test's clock {outage_seconds:.1f} s)")


async def test_readyz_failures_name_etcd_when_etcd_is_stopped(fresh_lab):
    async with running_monitor(fresh_lab, ["health"], health=0.5) as (monitor, collected):
        await collected.next("health", lambda s: s.ready)
        fresh_lab.lab.stop("etcd")
        try:
            failing = await collected.next("health", lambda s: s.ready is False, timeout=60,
                                           message="readyz failing")
            reference = await kubectl(fresh_lab, "get", "--raw", "/readyz?verbose", check=False)
        finally:
            fresh_lab.lab.start("etcd")
        recovered = await collected.next("health", lambda s: s.ready, timeout=90, message="recovery")
    assert "etcd" in failing.failing_checks
    assert failing.down and failing.outages[-1].end is None and "etcd" in failing.outages[-1].reason
    # kubectl sees the same failing checks in the server's answer.
    named = {line.split("[-]", 1)[1].split()[0] for line in reference.stderr.replace("\\n", "\n").splitlines()
             if "[-]" in line}
    assert set(failing.failing_checks) <= named | {"etcd", "etcd-readiness"} and "etcd" in named
    assert recovered.failing_checks == () and len(recovered.outages) == 1
    if failing.failing_live_checks:  # /livez runs the etcd check too
        assert "etcd" in failing.failing_live_checks
    assert recovered.outages[0].end is not None
    assert recovered.restarts == 0  # etcd paused, the API server process never changed


def test_user_without_metrics_sees_what_it_may_and_says_what_it_cannot(lab):
    kubeconfig = str(lab.lab.mint_user("nometrics"))
    can_i = subprocess.run(["kubectl", f"--kubeconfig={kubeconfig}", "auth", "can-i", "get", "/metrics"],
                           capture_output=True, text=True, timeout=60)
    assert can_i.stdout.strip() == "no"
    done, sample = probe_health(kubeconfig)
    assert done.returncode == 0, done.stderr
    assert sample["error"] is None
    assert sample["ready"] is True and sample["live"] is True  # /readyz and /livez are public
    reasons = sample["unobservable"]
    for field in ("rss_bytes", "heap_bytes", "goroutines", "start_time", "open_fds", "storage_objects_total"):
        assert sample[field] is None
        assert "403" in reasons[field], reasons[field]
    assert sample["restarts"] is None and "process_start_time_seconds" in reasons["restarts"]
    assert sample["crds"] is None and "403" in reasons["crds"]
    assert sample["mib_per_crd"] is None and reasons["mib_per_crd"]
