"""``crdscope rules`` output checked by the real promtool: syntax (check rules) and behaviour (test rules).

The unit tests feed series shaped as the exporter names them (the names are checked
against a live exporter in tests/e2e/test_rules_prometheus.py) and expect the alerts
the findings would raise for the same figures.
"""

from __future__ import annotations

import json
import os
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


def runbook(kind: str) -> dict:
    """The runbook annotation a rule of that finding kind carries (the default base)."""
    return {"runbook_url": f"docs/runbook.md#{kind}"}


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
                "exp_annotations": {"summary": "API server not answering", **runbook("apiserver-not-answering"),
                                    "description": "A request of crdscope has waited 8s for an answer (or "
                                                   "connections fail): the API server is stopped, stuck or "
                                                   "unreachable."}}]},
            {"eval_time": "60s", "alertname": "CrdscopeAPIServerNotAnswering", "exp_alerts": []},
            {"eval_time": "15s", "alertname": "CrdscopeAPFRejecting", "exp_alerts": []},
            {"eval_time": "30s", "alertname": "CrdscopeAPFRejecting", "exp_alerts": [{
                **alert("warning", priority_level="workload-low"),
                "exp_annotations": {"summary": "APF rejecting requests at priority level workload-low",
                                    **runbook("apf-rejecting"),
                                    "description": "Requests rejected (429) at workload-low within the last 2m."}}]},
            # Two minutes with no new rejection: the warning is over.
            {"eval_time": "195s", "alertname": "CrdscopeAPFRejecting", "exp_alerts": []},
            {"eval_time": "30s", "alertname": "CrdscopeAPFRejectingHard", "exp_alerts": []},
            {"eval_time": "60s", "alertname": "CrdscopeAPFRejectingHard", "exp_alerts": [{
                **alert("critical", priority_level="workload-low"),
                "exp_annotations": {"summary": "APF rejecting many requests at priority level workload-low",
                                    **runbook("apf-rejecting"),
                                    "description": "3 requests/s rejected (429) at workload-low."}}]},
            # A 19 s version canary (no official SLO) is over the 1 s it is held to; list_crds is within 30 s.
            {"eval_time": "45s", "alertname": "CrdscopeCanaryLatencyOverSLO", "exp_alerts": [{
                **alert("warning", canary="version"),
                "exp_annotations": {"summary": "canary version p99 over its SLO", **runbook("latency-slo"),
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
                "exp_annotations": {"summary": "API server crash-looping", **runbook("apiserver-crash-looping"),
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


def series(name: str, cluster: str = "", labels: str = "") -> str:
    """``name{job,instance,cluster,labels}`` as crdscope's exporter serves it."""
    return f'{name}{{job="crdscope",instance="x:9100",cluster="{cluster}"{"," + labels if labels else ""}}}'


def not_answering(cluster: str) -> dict:
    return {**alert("critical", cluster=cluster), "exp_annotations": {
        "summary": "API server not answering", **runbook("apiserver-not-answering"),
        "description": "A request of crdscope has waited 20s for an answer (or connections fail): the API server "
                       "is stopped, stuck or unreachable."}}


def open_finding(cluster: str) -> dict:
    """The catch-all for an open finding that pages: its runbook section is its kind's."""
    return {**alert("critical", cluster=cluster, finding="apiserver-not-answering", kind="apiserver-not-answering",
                    accepted="false"),
            "exp_annotations": {"summary": "crdscope finding apiserver-not-answering",
                                "description": "See `crdscope doctor` for its evidence and remedy.",
                                **runbook("apiserver-not-answering")}}


def test_an_accepted_kind_does_not_fire_for_its_cluster_until_the_acceptance_lapses(rules_file, tmp_path):
    """``[[silence]]`` through the exporter: ``crdscope_finding_accepted_until_seconds`` while the
    acceptance holds (lab-a's, gone stale at 30 s as the exporter drops it when it lapses) keeps the
    kind's rule quiet for lab-a only, and ``CrdscopeFinding`` fires for open findings that are not
    accepted; an acceptance of one id (latency-slo:LIST cluster) leaves the kind's rule alone."""
    kind = "apiserver-not-answering"
    unanswered = "crdscope_responsiveness_unanswered_seconds"
    accepted = ("crdscope_finding_accepted_until_seconds", f'kind="{kind}",finding="{kind}"')
    open_now = f'finding="{kind}",kind="{kind}",severity="critical"'
    one_id = ("crdscope_finding_accepted_until_seconds", 'kind="latency-slo",finding="latency-slo:LIST cluster"')
    tests = {"rule_files": [str(rules_file)], "evaluation_interval": "15s", "tests": [{
        "interval": "15s",
        "input_series": [
            {"series": series(unanswered, "lab-a"), "values": "20 20 20 20 20"},
            {"series": series(unanswered, "lab-b"), "values": "20 20 20 20 20"},
            {"series": series(accepted[0], "lab-a", accepted[1]), "values": "1e10 1e10 stale"},
            {"series": series("crdscope_finding_open", "lab-a", f'{open_now},accepted="true"'), "values": "1 1 stale"},
            {"series": series("crdscope_finding_open", "lab-a", f'{open_now},accepted="false"'), "values": "_ _ 1 1 1"},
            {"series": series("crdscope_finding_open", "lab-b", f'{open_now},accepted="false"'), "values": "1 1 1 1 1"},
            {"series": series("crdscope_latency_p99_by_verb_scope", "lab-a", 'verb_scope="LIST cluster"'),
             "values": "45 45 45 45 45"},
            {"series": series("crdscope_latency_slo_seconds", "lab-a", 'verb_scope="LIST cluster"'),
             "values": "30 30 30 30 30"},
            {"series": series(one_id[0], "lab-a", one_id[1]), "values": "1e10 1e10 1e10 1e10 1e10"},
        ],
        "alert_rule_test": [
            {"eval_time": "15s", "alertname": "CrdscopeAPIServerNotAnswering", "exp_alerts": [not_answering("lab-b")]},
            {"eval_time": "15s", "alertname": "CrdscopeFinding", "exp_alerts": [open_finding("lab-b")]},
            {"eval_time": "45s", "alertname": "CrdscopeAPIServerNotAnswering", "exp_alerts": [
                not_answering("lab-a"), not_answering("lab-b")]},
            {"eval_time": "45s", "alertname": "CrdscopeFinding", "exp_alerts": [
                open_finding("lab-a"), open_finding("lab-b")]},
            {"eval_time": "15s", "alertname": "CrdscopeServerLatencyOverSLO", "exp_alerts": [{
                **alert("warning", cluster="lab-a", verb_scope="LIST cluster"),
                "exp_annotations": {"summary": "LIST cluster requests: server-side p99 over the SLO",
                                    "description": "p99 45s (apiserver_request_sli_duration_seconds).",
                                    **runbook("latency-slo")}}]},
        ],
    }]}
    test_file = tmp_path / "crdscope-accepted-rules-test.yml"
    test_file.write_text(json.dumps(tests))
    done = subprocess.run([PROMTOOL, "test", "rules", str(test_file)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_runbook_base_comes_from_the_flag_then_the_config(tmp_path):
    config = tmp_path / "config" / "crdscope"
    config.mkdir(parents=True)
    (config / "config.toml").write_text('[rules]\nrunbook_url = "https://wiki.example/crdscope-runbook"\n')
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config")}
    from_config = subprocess.run([*CRDSCOPE, "rules"], capture_output=True, text=True, timeout=60, env=env)
    assert "runbook_url: https://wiki.example/crdscope-runbook#apiserver-not-answering" in from_config.stdout
    from_flag = subprocess.run([*CRDSCOPE, "rules", "--runbook-url", "https://other.example/rb.html"],
                               capture_output=True, text=True, timeout=60, env=env)
    assert "runbook_url: https://other.example/rb.html#apiserver-not-answering" in from_flag.stdout
    assert "wiki.example" not in from_flag.stdout
