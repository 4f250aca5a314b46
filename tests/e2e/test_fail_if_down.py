"""``--fail-if`` while the API server is away (issue 40 item 5): against a lab whose API server is
killed, ``health.down_seconds`` is read from the failed samples, and ``... for D`` waits for the
condition to hold that long, so a short outage does not end the watch and a long one does.

The watch is the real ``crdscope watch --headless`` process; the outage is the lab's API server
killed with SIGKILL (and started again), with nothing supervising it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import wait_for

pytestmark = pytest.mark.lab

CRDSCOPE = [sys.executable, "-m", "crdscope.cli.main"]
ROOT = Path(__file__).resolve().parents[2]


def start_watch(lab, record: Path, *fail_if: str) -> subprocess.Popen:
    args = [*CRDSCOPE, "watch", "--headless", "--kubeconfig", lab.kubeconfig, "--context", lab.admin_context,
            "--duration", "5m", "--record", str(record)]
    for expression in fail_if:
        args += ["--fail-if", expression]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)


def healthy_since(record: Path, since: float) -> bool:
    """A health sample of a serving API server, taken after ``since``, is recorded."""
    if not record.exists():
        return False
    for line in record.read_text().splitlines():
        record_line = json.loads(line)
        if record_line.get("type") != "sample" or record_line.get("probe") != "health":
            continue
        sample = record_line.get("data") or {}
        if not sample.get("error") and sample.get("ready") and sample.get("timestamp", 0) > since:
            return True
    return False


def kill_until_the_watch_ends(lab, watch: subprocess.Popen, timeout: float) -> tuple[str, str, float]:
    """Kill the API server and wait for the watch to exit: its output, and how long after the kill."""
    killed_at = time.time()
    lab.lab.kill("apiserver")
    try:
        stdout, stderr = watch.communicate(timeout=timeout)
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()
    return stdout, stderr, time.time() - killed_at


def test_down_seconds_crosses_while_the_server_is_killed(fresh_lab, tmp_path):
    record = tmp_path / "down.jsonl"
    watch = start_watch(fresh_lab, record, "health.down_seconds>8")
    try:
        wait_for(lambda: healthy_since(record, 0.0), timeout=90, message="a healthy sample")
        stdout, stderr, ended_after = kill_until_the_watch_ends(fresh_lab, watch, timeout=120)
    finally:
        fresh_lab.lab.start("apiserver")
    assert watch.returncode == 1, stdout + stderr
    assert "threshold crossed: health.down_seconds>8" in stdout, stdout
    assert ended_after > 8, f"crossed {ended_after:.1f} s after the kill: before the server was down 8 s"
    assert "Traceback" not in stderr


def test_for_waits_out_a_short_outage_and_ends_on_a_long_one(fresh_lab, tmp_path):
    record = tmp_path / "sustained.jsonl"
    watch = start_watch(fresh_lab, record, "health.down_seconds>0 for 30s")
    try:
        wait_for(lambda: healthy_since(record, 0.0), timeout=90, message="a healthy sample")
        # A short outage: killed and started again at once (start waits until it is ready).
        short_began = time.time()
        fresh_lab.lab.kill("apiserver")
        fresh_lab.lab.start("apiserver")
        short = time.time() - short_began
        assert short < 30, f"the short outage took {short:.1f} s: the test needs it under 30 s"
        # Served again and sampled as such (the condition no longer holds): the watch still runs.
        started_again = time.time()
        wait_for(lambda: healthy_since(record, started_again), timeout=60, message="a healthy sample after it")
        assert watch.poll() is None, "a short outage ended the watch"
        # A long outage: the watch ends once the server has been down 30 s in a row.
        stdout, stderr, ended_after = kill_until_the_watch_ends(fresh_lab, watch, timeout=150)
    finally:
        fresh_lab.lab.start("apiserver")
    assert watch.returncode == 1, stdout + stderr
    assert "threshold crossed: health.down_seconds>0 for 30s" in stdout, stdout
    assert ended_after >= 30, f"ended {ended_after:.1f} s after the kill, before 30 s of outage"
