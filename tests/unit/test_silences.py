"""Accepted findings (``[[silence]]`` in config.toml): parsing, matching, expiry, and every front end's
count of what pages (engine, ``--fail-if``, ``doctor``, the exporter, a viewer, the headless lines)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crdscope.base.errors import ConfigError
from crdscope.base.samples.health import HealthSample
from crdscope.base.samples.responsiveness import ResponsivenessSample
from crdscope.base.settings import load_settings
from crdscope.base.silences import Silence, covering
from crdscope.findings.engine import FindingsEngine, check_silences
from crdscope.findings.model import ACCEPTED, EXPIRED, OPENED, Finding, Severity, most_severe_first
from crdscope.session.core import SessionStore, WatchCore
from crdscope.session.failif import parse_threshold
from crdscope.session.headless import HeadlessSink
from tests.conftest import ROOT
from tests.unit.test_exporter import scrape, without_cluster

CRDSCOPE = [sys.executable, "-m", "crdscope.cli.main"]
#: 2026-07-01T00:00:00Z and 2026-07-02T00:00:00Z as seconds since the epoch (date -u -d ... +%s).
JULY_1 = 1782864000
JULY_2 = 1782950400
NOT_ANSWERING = "apiserver-not-answering"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_entries_are_read_with_times_dates_and_offsets(tmp_path: Path):
    settings = load_settings(write(tmp_path, """
[[silence]]
finding = "etcd-connections-per-crd"
cluster = "prod-*"
until = 2026-07-01T00:00:00Z
why = "known on 1.26; upgrade planned (OPS-1234)"

[[silence]]
finding = "latency-slo:LIST cluster"
cluster = "*"
until = 2026-07-01
why = "  a   slow   LIST,  accepted  "

[[silence]]
finding = "memory-headroom"
cluster = "lab"
until = "2026-07-01T00:00:00+02:00"
why = "text form"
"""))
    first, second, third = settings.silences
    assert first == Silence("etcd-connections-per-crd", "prod-*", JULY_1, "known on 1.26; upgrade planned (OPS-1234)")
    # A date holds through that day (UTC); the why is one line.
    assert (second.until, second.why, second.kind, second.whole_kind) == (JULY_2, "a slow LIST, accepted",
                                                                         "latency-slo", False)
    assert third.until == JULY_1 - 2 * 3600 and third.until_text == "2026-06-30T22:00:00Z"
    assert load_settings(write(tmp_path, "[thresholds]\n")).silences == ()


ENTRY = 'finding = "memory-headroom"\ncluster = "lab"\nuntil = 2026-07-01T00:00:00Z\nwhy = "known"\n'


@pytest.mark.parametrize("text, expected", [
    ('[[silence]]\nfinding = "memory-headroom"\ncluster = "lab"\nwhy = "x"\n', "entry 1 (memory-headroom on lab): until missing"),
    ('[[silence]]\nfinding = "memory-headroom"\nuntil = 2026-07-01\n', "entry 1 (memory-headroom on ?): cluster and why missing"),
    (f"[[silence]]\n{ENTRY}[[silence]]\n" + ENTRY.replace("2026-07-01T00:00:00Z", "2026-07-01T00:00:00"),
     "entry 2 (memory-headroom on lab): until 2026-07-01T00:00:00 has no offset"),
    ("[[silence]]\n" + ENTRY.replace("2026-07-01T00:00:00Z", '"next tuesday"'), "until 'next tuesday' is not an RFC 3339"),
    ("[[silence]]\n" + ENTRY.replace("2026-07-01T00:00:00Z", '"2026-13-01"'), "until '2026-13-01' is not an RFC 3339"),
    ("[[silence]]\n" + ENTRY.replace("2026-07-01T00:00:00Z", "12:00:00"), "until must be an RFC 3339 time"),
    ("[[silence]]\n" + ENTRY.replace("2026-07-01T00:00:00Z", "3"), "until must be an RFC 3339 time"),
    ("[[silence]]\n" + ENTRY + "owner = \"me\"\n", "entry 1 (memory-headroom on lab): unknown key owner"),
    ("[[silence]]\n" + ENTRY.replace('why = "known"', 'why = "  "'), "why must be a non-empty string"),
    ("[[silence]]\n" + ENTRY.replace('"memory-headroom"', '"Memory Headroom"'), "is not a finding kind or id"),
    ("silence = [1, 2]\n", "entry 1 must be a table"),
    ('silence = "all"\n', "[[silence]] must be tables"),
])
def test_a_bad_entry_is_one_line_naming_it(tmp_path: Path, text: str, expected: str):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_settings(path)
    message = str(caught.value)
    assert expected in message and "\n" not in message and str(path) in message, message
    assert caught.value.exit_code == 2


def test_one_silence_table_is_one_entry(tmp_path: Path):
    (silence,) = load_settings(write(tmp_path, "[silence]\n" + ENTRY)).silences
    assert silence.finding == "memory-headroom" and silence.until == JULY_1


def test_a_finding_kind_crdscope_does_not_have_is_refused():
    check_silences((Silence(NOT_ANSWERING, "*", JULY_1, "x"), Silence("latency-slo:LIST cluster", "*", JULY_1, "x")))
    with pytest.raises(ConfigError) as caught:
        check_silences((Silence(NOT_ANSWERING, "*", JULY_1, "x"), Silence("memory-headrom", "lab", JULY_1, "x")))
    assert "entry 2 (memory-headrom on lab): no finding kind 'memory-headrom'" in str(caught.value)
    assert "memory-headroom" in str(caught.value)  # the kinds it has are listed


@pytest.mark.parametrize("command", [["doctor", "--duration", "1s"], ["watch", "--headless", "--duration", "1s"]])
def test_the_command_line_refuses_a_bad_entry_before_connecting(tmp_path: Path, command: list[str]):
    config = tmp_path / "config" / "crdscope"
    config.mkdir(parents=True)
    (config / "config.toml").write_text("[[silence]]\n" + ENTRY + "[[silence]]\n" + ENTRY.replace(
        '"memory-headroom"', '"etcd-connections"'))
    done = subprocess.run([*CRDSCOPE, *command], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config")})
    assert done.returncode == 2, done
    assert done.stderr.strip().count("\n") == 0 and "Traceback" not in done.stderr, done.stderr
    assert "[[silence]] entry 2 (etcd-connections on lab): no finding kind 'etcd-connections'" in done.stderr


def test_what_an_entry_covers():
    eu = Silence("latency-slo", "prod-*", 100.0, "why")
    assert eu.covers("latency-slo:LIST cluster", "prod-eu", 99.9)
    assert not eu.covers("latency-slo:LIST cluster", "prod-eu", 100.0)  # lapsed at until
    assert not eu.covers("latency-slo:LIST cluster", "staging", 50.0)
    assert not eu.covers("latency-sloth", "prod-eu", 50.0)
    one = Silence("latency-slo:LIST cluster", "*", 100.0, "why")
    assert one.covers("latency-slo:LIST cluster", "arn:aws:eks:eu-west-1:1:cluster/prod", 50.0)  # * spans / and :
    assert not one.covers("latency-slo:GET resource", "prod-eu", 50.0)
    later = Silence("latency-slo", "*", 200.0, "later")
    assert covering((eu, later), "latency-slo:x", "prod-eu", 50.0) is later
    assert covering((eu, later), "latency-slo:x", "prod-eu", 150.0) is later
    assert covering((eu,), "latency-slo:x", "prod-eu", 150.0) is None


def hang(at: float) -> ResponsivenessSample:
    """A request unanswered for 7 s: the critical "not answering" finding."""
    return ResponsivenessSample(timestamp=at, unanswered_seconds=7.0, oldest_request="GET /readyz",
                                oldest_request_seconds=7.0)


def test_an_accepted_finding_is_shown_then_pages_when_the_acceptance_lapses():
    engine = FindingsEngine()
    engine.accept((Silence(NOT_ANSWERING, "prod-*", 100.0, "drill on prod, OPS-9"),), "prod-eu")
    (opened,) = engine.observe(hang(50.0))
    assert opened.change == OPENED and opened.finding.accepted is not None and not opened.finding.pages
    assert "finding opened (accepted until 1970-01-01T00:01:40Z: drill on prod, OPS-9): API server" in opened.line()
    assert engine.counts()[Severity.CRITICAL] == 0 and len(engine.current()) == 1  # shown, not counted
    assert engine.observe(hang(99.5)) == []
    (lapsed,) = engine.observe(hang(100.0))  # no restart, no new sample kind: the next evaluation
    assert lapsed.change == EXPIRED and lapsed.finding.pages and lapsed.finding.since == 50.0 - 7.0
    assert "critical finding's acceptance expired, it pages: API server" in lapsed.line()
    assert engine.counts()[Severity.CRITICAL] == 1
    # Another cluster's engine with the same entries: its finding pages from the start.
    other = FindingsEngine()
    other.accept(engine.silences, "staging")
    (change,) = other.observe(hang(50.0))
    assert change.finding.pages and other.counts()[Severity.CRITICAL] == 1


def test_an_acceptance_arriving_while_open_is_a_change_and_findings_that_page_come_first():
    engine = FindingsEngine()
    engine.observe(hang(10.0))
    engine.accept((Silence(NOT_ANSWERING, "*", 100.0, "why"),), "lab")
    (change,) = engine.observe(hang(11.0))
    assert change.change == ACCEPTED and not change.finding.pages
    warning = Finding("memory-growth", Severity.WARNING, "w", (), "", "", since=5.0)
    accepted = engine.current()[0]
    assert most_severe_first([accepted, warning]) == [warning, accepted]


def test_fail_if_findings_critical_waits_for_the_acceptance_to_lapse():
    out = io.StringIO()
    core = WatchCore(None, store=SessionStore(), cluster="prod-eu")
    core.accept((Silence(NOT_ANSWERING, "prod-eu", 100.0, "known"),))
    watch = HeadlessSink(core, [parse_threshold("findings.critical>0"), parse_threshold("findings.any>0")], out=out)
    for at in (50.0, 60.0, 99.0):
        core.take(hang(at))
    assert watch.crossing is None, out.getvalue()
    core.take(hang(100.5))
    assert watch.crossing is not None and watch.crossing.threshold.text == "findings.critical>0"
    lines = out.getvalue().splitlines()
    assert any("finding opened (accepted until" in line for line in lines), lines
    assert any("acceptance expired, it pages" in line for line in lines), lines


def test_the_exporter_marks_accepted_findings_and_serves_acceptances_in_force():
    from crdscope.session.exporter import SampleCollector

    now = time.time()
    core = WatchCore(None, store=SessionStore(), cluster="prod-eu")
    core.accept((Silence(NOT_ANSWERING, "prod-*", now + 3600, "known"), Silence("memory-headroom", "prod-*", now - 1, "lapsed"),
                 Silence("latency-slo", "staging", now + 3600, "another cluster's")))
    collector = SampleCollector()
    collector.watch(core)
    core.take(hang(now))
    series = without_cluster(scrape(collector), "prod-eu")
    assert series[("crdscope_finding_open", (("accepted", "true"), ("finding", NOT_ANSWERING), ("kind", NOT_ANSWERING),
                                             ("severity", "critical")))] == 1
    assert series[("crdscope_findings", (("severity", "critical"),))] == 0
    assert series[("crdscope_findings_accepted", (("severity", "critical"),))] == 1
    until = {labels: value for (name, labels), value in series.items()
             if name == "crdscope_finding_accepted_until_seconds"}
    assert until == {(("finding", NOT_ANSWERING), ("kind", NOT_ANSWERING)): pytest.approx(now + 3600)}


def test_doctor_counts_only_findings_that_page():
    from crdscope.session.doctor import Diagnosis, render
    from crdscope.session.recorder import ClusterInfo

    silence = Silence(NOT_ANSWERING, "lab", JULY_1, "planned stop")
    findings = [Finding(NOT_ANSWERING, Severity.CRITICAL, "API server not answering", ("e",), "c", "r", since=1.0,
                        accepted=silence),
                Finding("memory-growth", Severity.WARNING, "memory growing", ("e",), "c", "r", since=2.0)]
    diagnosis = Diagnosis(ClusterInfo(server="https://lab", context="lab"), 10.0, findings, 5, "kubectl")
    assert diagnosis.exit_code == 1
    text = render(diagnosis, "text")
    assert "CRITICAL (ACCEPTED): API server not answering" in text
    assert "accepted until 2026-07-01T00:00:00Z: planned stop (not counted in the exit code)" in text
    assert "1 warning, 1 critical (accepted); exit 1" in text
    only_accepted = Diagnosis(ClusterInfo(server="https://lab", context="lab"), 10.0, findings[:1], 5, "kubectl")
    assert only_accepted.exit_code == 0
    assert only_accepted.to_json()["findings"][0]["accepted"]["until"] == "2026-07-01T00:00:00Z"


def test_a_finding_keeps_its_acceptance_through_json():
    finding = Finding(NOT_ANSWERING, Severity.CRITICAL, "t", ("e",), "c", "r", since=1.0,
                      accepted=Silence(NOT_ANSWERING, "prod-*", JULY_1, "why"))
    assert Finding.from_json(finding.to_json()) == finding
    assert Finding.from_json({**finding.to_json(), "accepted": {"until": "garbage"}}).accepted is None


def test_a_viewer_judges_by_the_collectors_acceptances():
    from crdscope.session.attach import Collector, CollectorCluster, StreamFeed, attach_core
    from crdscope.session.recorder import ClusterInfo
    from crdscope.session.viewstream import StreamSettings

    sent = StreamSettings(silences=(Silence(NOT_ANSWERING, "prod-*", 100.0, "known"),
                                    Silence("a-kind-of-a-newer-crdscope", "*", 100.0, "?")))
    received = StreamSettings.from_json(sent.to_json())
    assert received == sent
    feed = StreamFeed(Collector("http://127.0.0.1:1", Path("token")), CollectorCluster("prod-eu", ClusterInfo(server="https://prod")),
                      received)
    core = attach_core(feed)
    (change,) = core.take(hang(50.0)).changes
    assert change.finding.accepted == sent.silences[0]
    (lapsed,) = core.take(hang(100.0)).changes
    assert lapsed.change == EXPIRED


def test_memory_checks_judge_as_before_when_nothing_is_accepted():
    from crdscope.base.facts import ClusterFacts

    engine = FindingsEngine(facts=ClusterFacts(flag_limit=100 << 20))
    (change,) = engine.observe(HealthSample(timestamp=1.0, rss_bytes=99 << 20, crds=10))
    assert change.finding.id == "memory-headroom" and change.finding.pages
    assert engine.counts()[Severity.CRITICAL] == 1
