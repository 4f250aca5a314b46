"""The events detector: one event per transition, never one per sample."""

from __future__ import annotations

import dataclasses

import pytest

from crdscope.base.samples.throttling import PriorityLevel, Responses429, ThrottlingSample
from crdscope.base.samples.discovery import ClientModel, DiscoverySample
from crdscope.base.samples.health import HealthSample
from crdscope.base.samples.latency import LatencySample
from crdscope.base.samples.openapi import OpenAPISample
from crdscope.base.samples import Sample
from crdscope.base.settings import Thresholds
from crdscope.findings.engine import FindingsEngine
from crdscope.session.events import Event, EventDetector


def fake(probe: str, **fields):
    """A sample named ``probe`` that is NOT that probe's class (e.g. from another build).

    (Assigning ``probe`` after the class exists skips ``Sample.__init_subclass__``,
    so the real probe classes stay the registered ones.)
    """
    names = [(name, object, dataclasses.field(default=None)) for name in fields if name not in ("timestamp", "error")]
    cls = dataclasses.make_dataclass(f"Fake{probe.title()}", names, bases=(Sample,), frozen=True, kw_only=True)
    cls.probe = probe
    return cls(**fields)


def run(detector: EventDetector, samples) -> list[Event]:
    """Each sample through the detector with the findings open after it, as a session core runs them
    (the rules that follow a finding read its state)."""
    engine = FindingsEngine(detector.thresholds)
    events = []
    for sample in samples:
        engine.observe(sample)
        events += detector.observe(sample, engine.open)
    return events


def kinds(events: list[Event]) -> list[str]:
    return [e.kind for e in events]


def test_a_probe_going_down_is_one_event_and_its_recovery_another():
    samples = [HealthSample(timestamp=10.0, ready=True),
               HealthSample(timestamp=15.0, error="cannot reach https://x: connection refused"),
               HealthSample(timestamp=20.0, error="cannot reach https://x: connection refused"),
               HealthSample(timestamp=25.0, error="cannot reach https://x: connection refused"),
               HealthSample(timestamp=32.5, ready=True)]
    events = run(EventDetector(), samples)
    assert kinds(events) == ["probe-down", "probe-recovered"]
    down, up = events
    assert (down.timestamp, down.severity, down.probe) == (15.0, "fail", "health")
    assert "connection refused" in down.message
    assert up.timestamp == 32.5 and "17.5 s" in up.message  # 32.5 - 15.0


def test_a_restart_is_reported_once_when_the_restart_count_moves():
    samples = [HealthSample(timestamp=t, restarts=r, start_time=s, ready=True)
               for t, r, s in [(1.0, 0, 100.0), (2.0, 0, 100.0), (3.0, 1, 250.0), (4.0, 1, 250.0), (5.0, 1, 250.0)]]
    events = run(EventDetector(), samples)
    assert kinds(events) == ["apiserver-restarted"]
    assert events[0].timestamp == 3.0 and events[0].severity == "fail"


def test_each_restart_of_several_replicas_names_the_replica_and_its_replacements_start():
    """Behind one address the answering replica's start time is not the restarted one's: each line
    names the replica its source names, and a start time only where it is the replacement's."""
    import time

    from crdscope.base.restarts import IDENTITY_LEASE, START_TIME, RestartEvent
    from crdscope.base.samples.health import ReplicaFigures

    def clock(at: float) -> str:
        return time.strftime("%H:%M:%S", time.localtime(at))

    replicas = (ReplicaFigures("r1", start_time=1000.0, answering=True), ReplicaFigures("r2", start_time=1500.0),
                ReplicaFigures("r3", start_time=900.0))
    first = HealthSample(timestamp=1400.0, restarts=0, start_time=1000.0, replicas=replicas, apiservers=3)
    # r2 restarted (its new process seen at 1500), r3's Lease changed holder (not scraped since: its
    # figures still show the dead process), all while r1 answers.
    later = dataclasses.replace(first, timestamp=1600.0, restarts=2, restart_events=(
        RestartEvent(1500.0, START_TIME, "r2"), RestartEvent(1580.0, IDENTITY_LEASE, "r3")))
    events = run(EventDetector(), [first, later])
    assert [e.message for e in events] == [f"API server restarted: replica r2 (new process started {clock(1500.0)})",
                                           "API server restarted: replica r3"]
    assert all(clock(1000.0) not in e.message for e in events)  # the answering replica's start


def test_a_restart_without_a_restart_count_is_seen_from_the_start_time():
    samples = [HealthSample(timestamp=1.0, start_time=100.0), HealthSample(timestamp=2.0, start_time=100.0),
               HealthSample(timestamp=3.0, start_time=180.0)]
    assert kinds(run(EventDetector(), samples)) == ["apiserver-restarted"]


def test_readyz_failing_names_the_checks_and_recovers_once():
    samples = [HealthSample(timestamp=1.0, ready=True),
               HealthSample(timestamp=2.0, ready=False, failing_checks=("etcd", "etcd-readiness")),
               HealthSample(timestamp=3.0, ready=False, failing_checks=("etcd",)),
               HealthSample(timestamp=4.0, ready=True), HealthSample(timestamp=5.0, ready=True)]
    events = run(EventDetector(), samples)
    assert kinds(events) == ["readyz-failing", "readyz-recovered"]
    assert "etcd, etcd-readiness" in events[0].message


def test_a_failed_sample_raises_no_figure_event():
    # An unreachable server's sample has default figures: no readyz news, and no restart news unless a
    # source outside the server names the restarts (below).
    samples = [HealthSample(timestamp=1.0, ready=True, restarts=0),
               HealthSample(timestamp=2.0, error="timed out", ready=False, restarts=5)]
    assert kinds(run(EventDetector(), samples)) == ["probe-down"]


def test_deaths_a_supervisor_counts_while_the_server_never_answers_are_each_a_line():
    """Drill 1 of bench/results/oom-drill-20261206: the server died nine times and never answered the
    health probe in between; the lab's supervisor named each death, and each is a line (once)."""
    import time

    from crdscope.base.restarts import LAB_SUPERVISOR, RestartEvent

    deaths = [RestartEvent(at, LAB_SUPERVISOR, "apiserver", oom_killed=True) for at in (1010.0, 1020.0)]
    samples = [HealthSample(timestamp=1000.0, restarts=0, start_time=900.0, ready=True),
               HealthSample(timestamp=1012.0, error="connection refused", restarts=1, start_time=900.0,
                            restart_events=tuple(deaths[:1])),
               HealthSample(timestamp=1015.0, error="connection refused", restarts=1, start_time=900.0,
                            restart_events=tuple(deaths[:1])),
               HealthSample(timestamp=1022.0, error="connection refused", restarts=2, restart_events=tuple(deaths))]
    restarts = [e.message for e in run(EventDetector(), samples) if e.kind == "apiserver-restarted"]
    clock = time.strftime("%H:%M:%S", time.localtime(1010.0))
    assert restarts == [f"API server restarted (died {clock}, OOM-killed)",
                        f"API server restarted (died {time.strftime('%H:%M:%S', time.localtime(1020.0))}, "
                        "OOM-killed)"]


def test_429s_begin_and_stop_once_from_apf_rejections_or_responses():
    def throttling(t: float, rate: float, answered_429: int) -> ThrottlingSample:
        return ThrottlingSample(timestamp=t, priority_levels=(PriorityLevel(name="workload-low", rejected_per_s=rate),),
                                responses_429=Responses429(total=answered_429))

    samples = [throttling(1.0, 0.0, 0), throttling(2.0, 2.5, 0), throttling(3.0, 3.0, 0), throttling(4.0, 0.0, 0),
               # no server-side rejection, but crdscope's own requests got 429s
               throttling(5.0, 0.0, 3), throttling(6.0, 0.0, 3)]
    events = run(EventDetector(), samples)
    assert kinds(events) == ["throttling-began", "throttling-stopped", "throttling-began", "throttling-stopped"]
    # The apf-rejecting finding's state, severity and title: 2.5/s is past apf_rejected_per_second_critical.
    assert "workload-low (2.50/s)" in events[0].message and events[0].severity == "fail"
    assert events[2].message == "429s began: crdscope received 429s" and events[2].severity == "warn"
    assert [e.timestamp for e in events] == [2.0, 4.0, 5.0, 6.0]


def test_discovery_budget_follows_the_kubectl_124_model_only():
    def discovery(t: float, kubectl_124: float, client_go: float) -> DiscoverySample:
        return DiscoverySample(timestamp=t, client_models=(
            ClientModel("client-go default", 5.0, 10, client_go, 0.0),
            ClientModel("kubectl >=1.24", 50.0, 300, kubectl_124, 0.0),
        ))

    detector = EventDetector(Thresholds(discovery_seconds_warn=5.0))
    samples = [discovery(1, 2.0, 30.0), discovery(2, 7.0, 40.0), discovery(3, 8.0, 40.0), discovery(4, 3.0, 40.0)]
    events = run(detector, samples)
    assert kinds(events) == ["discovery-over-budget", "discovery-within-budget"]
    assert "7.0 s" in events[0].message and events[0].timestamp == 2


def test_openapi_backlog_growing_then_drained():
    detector = EventDetector(Thresholds(openapi_backlog_warn=50))
    backlogs = [0, 1, 2, 3, 3, 1, 0, 0, 60, 70, 0]
    events = run(detector, [OpenAPISample(timestamp=float(i), backlog=b) for i, b in enumerate(backlogs)])
    assert kinds(events) == ["openapi-backlog-growing", "openapi-backlog-drained",
                             "openapi-backlog-growing", "openapi-backlog-drained"]
    # two consecutive rises (0->1->2) below the warn threshold: info; jumping past it: warn
    assert [e.timestamp for e in events] == [2.0, 6.0, 8.0, 10.0]
    assert [e.severity for e in events] == ["info", "info", "warn", "info"]


def test_latency_breaches_are_per_verb_and_scope():
    def latency(t: float, *breaches: str) -> LatencySample:
        return LatencySample(timestamp=t, slo_breaches=breaches,
                             p99_by_verb_scope={"GET resource": 2.0, "LIST cluster": 40.0},
                             slo_seconds={"GET resource": 1.0, "LIST cluster": 30.0})

    samples = [latency(1.0), latency(2.0, "GET resource"), latency(3.0, "GET resource", "LIST cluster"),
               latency(4.0, "LIST cluster"), latency(5.0)]
    events = run(EventDetector(), samples)
    assert [(e.kind, e.timestamp) for e in events] == [
        ("latency-slo-breached", 2.0), ("latency-slo-breached", 3.0),
        ("latency-slo-recovered", 4.0), ("latency-slo-recovered", 5.0)]
    assert events[0].message == "latency SLO breached: GET resource p99 2.00 s > 1 s"
    assert events[-1].message == "latency SLO met again: LIST cluster"


def test_unknown_probes_and_samples_of_other_classes_raise_nothing():
    # A sample named like a known probe but of another class (another build's) is not read for figures.
    samples = [fake("version", timestamp=1.0, git_version="v1.37.2"), fake("openapi", timestamp=2.0, backlog=500),
               fake("discovery", timestamp=3.0, client_models=()), DiscoverySample(timestamp=4.0)]
    assert run(EventDetector(), samples) == []


def test_events_round_trip_and_replay_to_the_same_events():
    samples = [HealthSample(timestamp=1.0, ready=True, restarts=0, start_time=1.0),
               HealthSample(timestamp=2.0, error="down"),
               HealthSample(timestamp=3.0, ready=True, restarts=1, start_time=2.5)]
    live = run(EventDetector(), samples)
    again = run(EventDetector(), samples)
    assert live == again and len(live) == 3
    assert [Event.from_json(e.to_json()) for e in live] == live


@pytest.mark.parametrize("severity", ["info", "warn", "fail"])
def test_event_line_is_one_line(severity):
    line = Event(0.0, "x", severity, "health", "something happened").line()
    assert "\n" not in line and severity in line and "health: something happened" in line


def test_the_real_sample_classes_carry_the_fields_the_detector_reads():
    """One run through every probe the detector reads, in order, with canary breaches too."""
    from crdscope.base.samples.latency import Canary

    def discovery(t, seconds):
        return DiscoverySample(timestamp=t, client_models=(
            ClientModel("client-go default", 5.0, 10, 99.0, 90.0), ClientModel("kubectl >=1.24", 50.0, 300, seconds, 0.0)))

    def throttling(t, rate, total):
        return ThrottlingSample(timestamp=t, priority_levels=(PriorityLevel(name="workload-low", rejected_per_s=rate),),
                                responses_429=Responses429(total=total))

    def latency(t, over, canary_p99=0.5):
        # The events follow the latency-slo findings: the canary's breach is its p99 over its SLO.
        return LatencySample(timestamp=t, slo_breaches=over, p99_by_verb_scope={"LIST cluster": 31.0},
                             slo_seconds={"LIST cluster": 30.0},
                             canaries={"version": Canary(p99_seconds=canary_p99, slo_seconds=1.0)})

    samples = [discovery(1, 1.0), discovery(2, 6.0), discovery(3, 1.0),
               throttling(4, 0.0, 0), throttling(5, None, 2), throttling(6, 0.0, 2),
               OpenAPISample(timestamp=7, backlog=0), OpenAPISample(timestamp=8, backlog=80),
               OpenAPISample(timestamp=9, backlog=0),
               latency(10, ()), latency(11, ("LIST cluster",), 1.5), latency(12, ())]
    events = run(EventDetector(Thresholds(discovery_seconds_warn=5.0, openapi_backlog_warn=50)), samples)
    assert kinds(events) == ["discovery-over-budget", "discovery-within-budget", "throttling-began",
                             "throttling-stopped", "openapi-backlog-growing", "openapi-backlog-drained",
                             "latency-slo-breached", "latency-slo-breached", "latency-slo-recovered",
                             "latency-slo-recovered"]
    breached = {e.message for e in events[6:8]}
    assert breached == {"latency SLO breached: LIST cluster p99 31.00 s > 30 s",
                        "latency SLO breached: canary version p99 1.50 s > 1 s"}


def test_restarts_counted_while_the_server_was_away_each_name_their_own_death():
    """The OOM drill: the lab's supervisor counted three deaths while the probes could not reach the
    server; one line each, with its own death time, and only the last names the process serving now
    (drill 2 of bench/results/oom-drill-20261206 printed the same start time on eight lines)."""
    import time

    from crdscope.base.restarts import LAB_SUPERVISOR, RestartEvent

    def clock(at: float) -> str:
        return time.strftime("%H:%M:%S", time.localtime(at))

    before = HealthSample(timestamp=1000.0, restarts=0, start_time=900.0, ready=True)
    deaths = tuple(RestartEvent(at, LAB_SUPERVISOR, "apiserver", oom_killed=True) for at in (1010.0, 1030.0, 1070.0))
    after = HealthSample(timestamp=1100.0, restarts=3, start_time=1072.0, ready=True, restart_events=deaths)
    lines = [e.message for e in run(EventDetector(), [before, after])]
    assert lines == [f"API server restarted (died {clock(1010.0)}, OOM-killed)",
                     f"API server restarted (died {clock(1030.0)}, OOM-killed)",
                     f"API server restarted (died {clock(1070.0)}, OOM-killed; new process started {clock(1072.0)})"]
