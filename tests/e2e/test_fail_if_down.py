"""``--fail-if`` while the API server is away (issue 40 item 5): against a lab whose API server is
killed, ``health.down_seconds`` is read from the failed samples, and ``... for D`` waits for the
condition to hold that long, so a short outage does not end the watch and a long one does.

The watch is the real ``crdscope watch --headless`` process; the outage is the lab's API server
killed with SIGKILL (and started again), with nothing supervising it.
"""

from __future__ import annotations

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


def healthy_sample_recorded(record: Path) -> bool:
    return record.exists() and b'"probe":"health"' in record.read_bytes() and b'"ready":true' in record.read_bytes()


def finish(process: subprocess.Popen, timeout: float) -> tuple[str, str]:
    try:
        return process.communicate(timeout=timeout)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_down_seconds_crosses_while_the_server_is_killed(fresh_lab, tmp_path):
    record = tmp_path / "down.jsonl"
    watch = start_watch(fresh_lab, record, "health.down_seconds>8")
    try:
        wait_for(lambda: healthy_sample_recorded(record), timeout=90, message="a healthy sample")
        killed_at = time.time()
        fresh_lab.lab.kill("apiserver")
        stdout, stderr = finish(watch, timeout=120)
        ended_after = time.time() - killed_at
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
        wait_for(lambda: healthy_sample_recorded(record), timeout=90, message="a healthy sample")
        # A short outage: killed and started again at once (start waits until it is ready).
        fresh_lab.lab.kill("apiserver")
        short_began = time.time()
        fresh_lab.lab.start("apiserver")
        short = time.time() - short_began
        assert short < 30, f"the short outage took {short:.1f} s: the test needs it under 30 s"
        seen = record.stat().st_size
        # Served again and sampled as such: the watch is still running.
        wait_for(lambda: record.stat().st_size > seen and healthy_sample_recorded(record), timeout=60,
                 message="samples after the short outage")
        assert watch.poll() is None, "a short outage ended the watch"
        # A long outage: the watch ends once the server has been down 30 s in a row.
        killed_at = time.time()
        fresh_lab.lab.kill("apiserver")
        stdout, stderr = finish(watch, timeout=150)
        ended_after = time.time() - killed_at
    finally:
        fresh_lab.lab.start("apiserver")
    assert watch.returncode == 1, stdout + stderr
    assert "threshold crossed: health.down_seconds>0 for 30s" in stdout, stdout
    assert ended_after >= 30, f"ended {ended_after:.1f} s after the kill, before 30 s of outage"
