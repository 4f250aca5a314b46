"""``crdscope doctor`` on the lab, as a person runs it: exit code by the worst finding."""

from __future__ import annotations

import json

import pytest

from tests.faults.helpers import crdscope

pytestmark = pytest.mark.lab


def test_doctor_on_an_idle_small_lab_finds_nothing_and_exits_0(lab):
    done = crdscope("doctor", "--duration", "20s", "--json", "--kubeconfig", lab.kubeconfig,
                    "--context", lab.admin_context, timeout=120)
    report = json.loads(done.stdout)
    serious = [f for f in report["findings"] if f["severity"] != "info"]
    assert done.returncode == 0 and not serious, (done.returncode, serious, done.stderr)
    assert report["exit_code"] == 0 and report["cluster"]["server"] == lab.server
    assert report["samples"] > 20  # the responsiveness probe alone reports every second
    assert "API server answering" in " ".join(report["checked"])


def test_doctor_markdown_says_what_it_checked(lab):
    done = crdscope("doctor", "--duration", "5s", "--format", "md", "--kubeconfig", lab.kubeconfig,
                    "--context", lab.admin_context, timeout=120)
    assert done.returncode in (0, 1), done.stderr  # a busy machine may see a slow canary in 5 s
    assert done.stdout.startswith("### crdscope doctor: ")
    assert "Nothing found. Checked:" in done.stdout or "**" in done.stdout


def test_doctor_rejects_a_bad_duration_in_one_line():
    done = crdscope("doctor", "--duration", "soon", timeout=60)
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0, done.stderr
    assert "not a duration" in done.stderr and "Traceback" not in done.stderr
