"""``crdscope rules`` output checked by the real promtool: syntax (check rules) and behaviour (test rules).

The unit tests feed series shaped as the exporter names them (the names are checked
against a live exporter in tests/e2e/test_rules_prometheus.py) and expect the alerts
the findings would raise for the same figures.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from crdscope.base.settings import Thresholds

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
CRDSCOPE = [sys.executable, "-m", "crdscope.cli.main"]


@pytest.fixture
def rules_file(tmp_path):
    if not shutil.which(PROMTOOL):
        pytest.fail("Debian's prometheus package (promtool) is required: make system-deps")
    done = subprocess.run([*CRDSCOPE, "rules"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    path = tmp_path / "crdscope-rules.yml"
    path.write_text(done.stdout)
    return path


def test_promtool_check_rules_passes(rules_file):
    done = subprocess.run([PROMTOOL, "check", "rules", str(rules_file)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def alert(severity: str, **labels: str) -> dict:
    return {"exp_labels": {"severity": severity, "job": "crdscope", "instance": "x:9100", **labels}}


def test_promtool_test_rules_fires_what_the_findings_would(rules_file, tmp_path):
    limit = Thresholds().unanswered_seconds_critical
    tests = {"rule_files": [str(rules_file)], "evaluation_interval": "15s", "tests": [{
        "interval": "15s",
        "input_series": [
            # Unanswered for 0 s, then a hang: 1, 8, 23 s, then answered again.
            {"series": 'crdscope_responsiveness_unanswered_seconds{job="crdscope",instance="x:9100"}',
             "values": "0 1 8 23 0 0"},
            {"series": 'crdscope_throttling_priority_levels_rejected_per_second{job="crdscope",instance="x:9100",'
                       'priority_level="workload-low"}', "values": "0 0 0.5 0.5 3 0"},
            # The same rejections as the level's counter: 7 at 30 s, and the last ones at 60 s.
            {"series": 'crdscope_throttling_priority_levels_rejected_total{job="crdscope",instance="x:9100",'
                       'priority_level="workload-low"}', "values": "0 0 7 15 60 60 60 60 60 60 60 60 60 60"},
            {"series": 'crdscope_latency_canaries_p99_seconds{job="crdscope",instance="x:9100",canary="version"}',
             "values": "0.01 0.01 19.09 19.09 19.09 19.09"},
            {"series": 'crdscope_latency_canaries_p99_seconds{job="crdscope",instance="x:9100",canary="list_crds"}',
             "values": "0.2 0.2 0.2 0.2 0.2 0.2"},
            {"series": 'crdscope_latency_canaries_slo_seconds{job="crdscope",instance="x:9100",canary="list_crds"}',
             "values": "30 30 30 30 30 30"},
        ],
        "alert_rule_test": [
            {"eval_time": "15s", "alertname": "CrdscopeAPIServerNotAnswering", "exp_alerts": []},
            {"eval_time": "30s", "alertname": "CrdscopeAPIServerNotAnswering", "exp_alerts": [{
                **alert("critical"),
                "exp_annotations": {"summary": "API server not answering",
                                    "description": "A request of crdscope has waited 8s for an answer (or "
                                                   "connections fail): the API server is stopped, stuck or "
                                                   "unreachable."}}]},
            {"eval_time": "60s", "alertname": "CrdscopeAPIServerNotAnswering", "exp_alerts": []},
            {"eval_time": "15s", "alertname": "CrdscopeAPFRejecting", "exp_alerts": []},
            {"eval_time": "30s", "alertname": "CrdscopeAPFRejecting", "exp_alerts": [{
                **alert("warning", priority_level="workload-low"),
                "exp_annotations": {"summary": "APF rejecting requests at priority level workload-low",
                                    "description": "Requests rejected (429) at workload-low within the last 2m."}}]},
            # Two minutes with no new rejection: the warning is over.
            {"eval_time": "195s", "alertname": "CrdscopeAPFRejecting", "exp_alerts": []},
            {"eval_time": "30s", "alertname": "CrdscopeAPFRejectingHard", "exp_alerts": []},
            {"eval_time": "60s", "alertname": "CrdscopeAPFRejectingHard", "exp_alerts": [{
                **alert("critical", priority_level="workload-low"),
                "exp_annotations": {"summary": "APF rejecting many requests at priority level workload-low",
                                    "description": "3 requests/s rejected (429) at workload-low."}}]},
            # A 19 s version canary (no official SLO) is over the 1 s it is held to; list_crds is within 30 s.
            {"eval_time": "45s", "alertname": "CrdscopeCanaryLatencyOverSLO", "exp_alerts": [{
                **alert("warning", canary="version"),
                "exp_annotations": {"summary": "canary version p99 over its SLO",
                                    "description": "p99 19.09s over 5 minutes of crdscope's canary requests."}}]},
        ],
    }]}
    assert limit < 8  # the series above cross the default threshold at 30 s
    test_file = tmp_path / "crdscope-rules-test.yml"
    test_file.write_text(json.dumps(tests))  # JSON is YAML
    done = subprocess.run([PROMTOOL, "test", "rules", str(test_file)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_rules_of_two_clusters_on_one_exporter_keep_them_apart(rules_file, tmp_path):
    """A fleet exporter serves several clusters from one ``job``/``instance``: a rule joining two
    series must match them by ``cluster`` too, or one cluster's OOM kills would mark another's
    crash loop as OOM-caused."""
    restarts = 'crdscope_health_restarts_total{job="crdscope",instance="x:9100",cluster="%s"}'
    oom_kills = 'crdscope_health_oom_kills_total{job="crdscope",instance="x:9100",cluster="%s"}'
    tests = {"rule_files": [str(rules_file)], "evaluation_interval": "1m", "tests": [{
        "interval": "1m",
        "input_series": [
            # lab-a restarts 4 times in 4 minutes, with no OOM kill; lab-b is OOM-killed once, never restarts
            # by the count (say a kube-state-metrics gap) - neither is an OOM crash loop.
            {"series": restarts % "lab-a", "values": "0 1 2 3 4 4"},
            {"series": oom_kills % "lab-a", "values": "0 0 0 0 0 0"},
            {"series": restarts % "lab-b", "values": "0 0 0 0 0 0"},
            {"series": oom_kills % "lab-b", "values": "0 1 1 1 1 1"},
        ],
        "alert_rule_test": [
            {"eval_time": "5m", "alertname": "CrdscopeAPIServerCrashLooping", "exp_alerts": [{
                **alert("critical", cluster="lab-a"),
                "exp_annotations": {"summary": "API server crash-looping",
                                    "description": "4 API server restarts within 600s (crdscope_health_restarts_total, "
                                                   "counted from process start times, identity Leases, the lab or "
                                                   "kube-state-metrics)."}}]},
            {"eval_time": "5m", "alertname": "CrdscopeAPIServerOOMCrashLoop", "exp_alerts": []},
        ],
    }]}
    assert Thresholds().crashloop_restarts <= 4 and Thresholds().crashloop_window_seconds >= 300
    test_file = tmp_path / "crdscope-fleet-rules-test.yml"
    test_file.write_text(json.dumps(tests))
    done = subprocess.run([PROMTOOL, "test", "rules", str(test_file)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
