"""``crdscope probe NAME`` against the real lab: --json keeps its keys, plain output reads as text.

``--json`` is a contract for scripts: its keys must be exactly those of the probe's
Sample.to_json().  Without it, a person reads figures with units, tables and reasons in
words, never a field dump (``timestamp: 1796293216.67``, nested JSON on one line).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from crdscope.probes.registry import oneshot_probes, sample_type

pytestmark = [pytest.mark.lab]


def crdscope(lab, *args: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "crdscope.cli.main", *args, "--kubeconfig", lab.kubeconfig,
            "--context", lab.admin_context]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("name", sorted(oneshot_probes()))
def test_json_keys_are_the_samples_keys(lab, name: str):
    done = crdscope(lab, "probe", name, "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert set(data) == set(sample_type(name)().to_json())


@pytest.mark.parametrize("name", sorted(oneshot_probes()))
def test_plain_output_is_for_people(lab, name: str):
    done = crdscope(lab, "probe", name)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert text.startswith(name)
    assert "timestamp:" not in text and not re.search(r"\d{10}\.\d", text)  # no raw Unix times
    assert '{"' not in text  # no JSON on a line


def test_discovery_summary_has_units_and_tables(lab):
    walk = crdscope(lab, "probe", "discovery", "--legacy")
    assert walk.returncode == 0, walk.stderr
    lines = walk.stdout.splitlines()
    data = json.loads(crdscope(lab, "probe", "discovery", "--legacy", "--json").stdout)
    resources = next(line for line in lines if line.strip().startswith("resources"))
    assert resources.split()[-1].replace(",", "") == str(data["resources"])
    assert re.search(r"took\s+\d+(\.\d+)?(ms|s|µs) for \d+ requests, [\d.]+(B|KiB|MiB)", walk.stdout)
    header = lines.index("what a client would wait for the same walk:")
    assert lines[header + 1].split() == ["client", "qps", "burst", "walk", "throttled"]
    models = [line.split()[0:2] for line in lines[header + 2: header + 2 + len(data["client_models"])]]
    assert [m[0] for m in models] == [m["name"].split()[0] for m in data["client_models"]]
    assert "slowest group-versions:" in lines


def test_health_and_throttling_say_what_is_unobservable_in_words(lab):
    health = crdscope(lab, "probe", "health")
    assert re.search(r"resident memory\s+\d+(\.\d+)?(MiB|GiB)", health.stdout)
    assert "not observable here:" in health.stdout
    assert "needs --prometheus" in health.stdout
    throttling = crdscope(lab, "probe", "throttling")
    lines = throttling.stdout.splitlines()
    header = lines.index("priority levels (busiest first):")
    assert lines[header + 1].split()[:3] == ["level", "type", "seats"]
    levels = json.loads(crdscope(lab, "probe", "throttling", "--json").stdout)["priority_levels"]
    shown = {line.split()[0] for line in lines[header + 2: header + 2 + len(levels)]}
    assert shown == {level["name"] for level in levels}


def test_leaving_the_labs_monitor_says_the_lab_is_still_running(lab, tmp_path, capsys):
    from crdscope.lab.controlplane import Lab
    from crdscope.tui.launch import say_lab_still_running

    say_lab_still_running(lab.lab)
    assert capsys.readouterr().err.strip() == "the lab is still running: crdscope lab down stops it"
    say_lab_still_running(Lab(tmp_path / "no-lab-here"))  # nothing up there: nothing to say
    assert capsys.readouterr().err == ""
