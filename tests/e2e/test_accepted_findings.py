"""Accepted findings (``[[silence]]``) on the lab: a finding provoked for real, accepted by config.

The finding is the memory headroom against a limit given on the command line
(``--memory-limit``, half the API server's resident memory as the lab's own probe reads it): a
critical finding, judged on the real server's figures, that costs the shared lab nothing.

* ``doctor``: accepted, it is listed as accepted with its until and why and the exit code does not
  count it; the same entry with an ``until`` in the past pages (exit 2).
* ``watch --headless --fail-if 'findings.critical>0'``: the finding opens accepted (the line says so)
  and the watch goes on; at ``until`` the acceptance lapses with no restart, the line says it pages,
  and the threshold ends the watch (exit 1).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from pathlib import Path

import pytest

from bench.common import stop_process
from crdscope.base.silences import rfc3339
from tests.faults.helpers import crdscope, spawn
from tests.helpers import wait_for

pytestmark = pytest.mark.lab

RANK = {"info": 0, "warning": 1, "critical": 2}
KIND = "memory-headroom"
WHY = "known: the limit is a test's, OPS-46"


def config(tmp_path: Path, until: str, cluster: str) -> dict[str, str]:
    """A config.toml accepting the headroom finding on ``cluster`` until ``until``: the env to use it."""
    home = tmp_path / f"config-{time.monotonic_ns()}"
    (home / "crdscope").mkdir(parents=True)
    (home / "crdscope" / "config.toml").write_text(
        f'[[silence]]\nfinding = "{KIND}"\ncluster = "{cluster}"\nuntil = {until}\nwhy = "{WHY}"\n')
    return {"XDG_CONFIG_HOME": str(home)}


def half_the_rss(lab) -> str:
    """A memory limit the API server's resident memory is twice over (as the health probe reads it)."""
    health = json.loads(crdscope("probe", "health", "--json", "--kubeconfig", lab.kubeconfig, "--context",
                                 lab.admin_context, timeout=120).stdout)
    return f"{int(health['rss_bytes'] / 2 / 2**20)}Mi"


def doctor(lab, env: dict[str, str], limit: str, *more: str) -> subprocess.CompletedProcess:
    return crdscope("doctor", "--duration", "10s", "--memory-limit", limit, *more, "--kubeconfig", lab.kubeconfig,
                    "--context", lab.admin_context, env=env, timeout=180)


def test_doctor_shows_an_accepted_finding_and_does_not_count_it_until_it_lapses(lab, tmp_path):
    limit = half_the_rss(lab)
    later = rfc3339(time.time() + 3600)
    accepted = doctor(lab, config(tmp_path, later, "crdscope-l*"), limit, "--json")
    report = json.loads(accepted.stdout)
    (headroom,) = [f for f in report["findings"] if f["id"] == KIND]
    assert headroom["severity"] == "critical", headroom
    assert headroom["accepted"] == {"finding": KIND, "cluster": "crdscope-l*", "until": later,
                                    "until_timestamp": headroom["accepted"]["until_timestamp"], "why": WHY}
    paging = [RANK[f["severity"]] for f in report["findings"] if f["accepted"] is None]
    assert accepted.returncode == report["exit_code"] == max(paging, default=0) < 2, (accepted.returncode, report)
    # The text a person reads says it too.
    text = doctor(lab, config(tmp_path, later, "crdscope-lab"), limit)
    assert "CRITICAL (ACCEPTED): API server memory at" in text.stdout, text.stdout
    assert f"accepted until {later}: {WHY} (not counted in the exit code)" in text.stdout
    assert "1 critical (accepted)" in text.stdout and text.returncode < 2, text.stdout
    # Lapsed: the same entry with an until in the past pages.
    lapsed = doctor(lab, config(tmp_path, "2020-01-01", "crdscope-lab"), limit, "--json")
    report = json.loads(lapsed.stdout)
    (headroom,) = [f for f in report["findings"] if f["id"] == KIND]
    assert headroom["accepted"] is None and lapsed.returncode == report["exit_code"] == 2, (lapsed.returncode, report)
    # Another cluster's acceptance does not reach this one.
    elsewhere = doctor(lab, config(tmp_path, later, "prod-*"), limit, "--json")
    assert elsewhere.returncode == 2, elsewhere.stdout


def test_a_headless_watch_pages_when_the_acceptance_lapses_without_a_restart(lab, tmp_path):
    limit = half_the_rss(lab)
    until = float(int(time.time()) + 60)  # whole seconds: the config states it to the second
    lines = tmp_path / "watch.txt"
    watch = spawn("watch", "--headless", "--duration", "5m", "--no-record", "--memory-limit", limit,
                  "--fail-if", "findings.critical>0", "--kubeconfig", lab.kubeconfig, "--context", lab.admin_context,
                  env=config(tmp_path, rfc3339(until), lab.admin_context), stdout=open(lines, "w"),
                  stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: "critical finding opened (accepted until" in lines.read_text() or watch.poll() is not None,
                 timeout=55, message="the headroom finding opening, accepted")
        assert time.time() < until and watch.poll() is None, lines.read_text()
        text = lines.read_text()
        assert f"accepting {KIND} until {rfc3339(until)}: {WHY}" in text, text
        assert f"critical finding opened (accepted until {rfc3339(until)}: {WHY}): API server memory at" in text
        wait_for(lambda: "acceptance expired, it pages" in lines.read_text() or watch.poll() is not None,
                 timeout=until - time.time() + 30, message="the acceptance lapsing")
        lapsed_seen = time.time()
        assert watch.wait(timeout=60) == 1, lines.read_text()
        text = lines.read_text()
    finally:
        stop_process(watch)
    print(f"\nthe lapse shown {lapsed_seen - until:.1f} s after until")
    assert "critical finding's acceptance expired, it pages: API server memory at" in text, text
    assert "threshold crossed: findings.critical>0" in text
    assert text.index("acceptance expired") < text.index("threshold crossed")
    # Not before until (to the second of the line's clock), and promptly after it.
    assert until <= lapsed_seen <= until + 10, (until, lapsed_seen)


def rule_evaluated_since(prometheus, alert: str, since: float) -> bool:
    """True once Prometheus evaluated the rule of ``alert`` after ``since`` (Unix time)."""
    import datetime

    import httpx

    try:
        groups = httpx.get(f"{prometheus.url}/api/v1/rules", timeout=5).json()["data"]["groups"]
    except (httpx.HTTPError, ValueError, KeyError):
        return False
    for rule in (r for group in groups for r in group["rules"] if r.get("name") == alert):
        stamp = rule.get("lastEvaluation", "")[:26].rstrip("Z") + "+00:00"
        with contextlib.suppress(ValueError):
            if datetime.datetime.fromisoformat(stamp).timestamp() > since:
                return True
    return False


def test_prometheus_does_not_alert_on_an_accepted_finding_until_the_acceptance_lapses(lab, tmp_path):
    """The exporter's series with the rules of ``crdscope rules`` in Debian's Prometheus: while the
    acceptance holds, ``crdscope_finding_open`` says accepted="true" and ``CrdscopeFinding`` has no
    alert for the finding (pending or firing) though Prometheus evaluated it; once it lapses the
    alert fires, with no restart of anything."""
    import os

    from tests.e2e.test_rules_prometheus import PROMETHEUS, Prometheus, free_port

    if not os.path.exists(PROMETHEUS):
        pytest.fail("Debian's prometheus is required: make system-deps")
    limit = half_the_rss(lab)
    until = float(int(time.time()) + 60)  # whole seconds: the config states it to the second
    port = free_port()
    watch = spawn("watch", "--headless", "--duration", "5m", "--no-record", "--memory-limit", limit,
                  "--serve-metrics", f"127.0.0.1:{port}", "--kubeconfig", lab.kubeconfig, "--context",
                  lab.admin_context, env=config(tmp_path, rfc3339(until), lab.admin_context),
                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    prometheus = Prometheus(lab, tmp_path, port)
    alerts = f'ALERTS{{alertname="CrdscopeFinding",kind="{KIND}"}}'
    try:
        wait_for(lambda: prometheus.query(f'crdscope_finding_open{{kind="{KIND}",accepted="true"}}')
                 and prometheus.query(f'crdscope_finding_accepted_until_seconds{{kind="{KIND}"}}'), timeout=55,
                 message="Prometheus holding the accepted finding")
        scraped = time.time()
        wait_for(lambda: rule_evaluated_since(prometheus, "CrdscopeFinding", scraped + 1), timeout=30,
                 message="CrdscopeFinding evaluated after the accepted series arrived")
        assert time.time() < until, "the acceptance lapsed before Prometheus saw it (a very slow start)"
        assert prometheus.query(alerts) == [], prometheus.query(alerts)
        assert prometheus.query('crdscope_findings_accepted{severity="critical"} >= 1')
        fired = wait_for(lambda: [a for a in prometheus.firing("CrdscopeFinding") if a["labels"].get("kind") == KIND],
                         timeout=until - time.time() + 60, message="CrdscopeFinding firing once the acceptance lapsed")
        fired_at = time.time()
    finally:
        prometheus.close()
        stop_process(watch)
    print(f"\nCrdscopeFinding fired {fired_at - until:.1f} s after until")
    assert fired_at >= until and fired[0]["labels"]["accepted"] == "false", fired
    assert fired[0]["annotations"]["runbook_url"].endswith(f"#{KIND}"), fired[0]["annotations"]
