"""Restarts from every source (issue 27): the ledger, the Leases, the lab supervisor's log."""

from __future__ import annotations

import json

from crdscope.lab.restarts import platform_restarts
from crdscope.lab.supervisor import read_events
from crdscope.probes.health import HealthTracker
from crdscope.probes.health_figures import ProcessGauges
from crdscope.base.samples.health import HealthSample
from crdscope.probes.leases import LeaseReading, LeaseWatcher, parse_leases
from crdscope.base.restarts import (IDENTITY_LEASE, KUBE_STATE_METRICS, LAB_SUPERVISOR, START_TIME,
                                    PlatformRestarts, RestartEvent)
from crdscope.probes.restarts import RestartLedger


def test_the_ledger_reports_the_source_that_saw_the_most_and_never_adds_them():
    ledger = RestartLedger()
    assert ledger.total() is None and ledger.best() is None  # nothing read: unknown, not 0
    ledger.counter(START_TIME, 0, 10.0)
    ledger.watching(IDENTITY_LEASE)
    assert ledger.total() == 0
    ledger.counter(START_TIME, 1, 20.0, replica="r1", rss_bytes_at_death=600 << 20)
    ledger.observed(RestartEvent(25.0, IDENTITY_LEASE, "host-1"))
    ledger.observed(RestartEvent(55.0, IDENTITY_LEASE, "host-2"))
    # the same first restart seen twice, and one only the Leases saw: 2, not 3
    assert (ledger.total(), ledger.best()) == (2, IDENTITY_LEASE)
    assert ledger.counts == {START_TIME: 1, IDENTITY_LEASE: 2}
    first, second = ledger.recent()
    assert first.replica == "host-1" and first.rss_bytes_at_death == 600 << 20  # filled from the scrape's event
    assert second.rss_bytes_at_death is None


def test_a_counter_starts_from_its_first_reading_in_a_watch_and_from_zero_in_one_shot():
    watch, once = RestartLedger(), RestartLedger(since_start=False)
    for ledger in (watch, once):
        ledger.counter(KUBE_STATE_METRICS, 7, 100.0)
        ledger.counter(KUBE_STATE_METRICS, 9, 130.0, oom_killed=True)
    assert watch.total() == 2 and once.total() == 9
    assert [e.oom_killed for e in watch.recent()] == [True, True]
    watch.counter(KUBE_STATE_METRICS, 1, 160.0)  # the counter reset (a new pod): restarts from there
    watch.counter(KUBE_STATE_METRICS, 2, 190.0)
    assert watch.total() == 1


def test_a_restart_taken_back_removes_its_event():
    ledger = RestartLedger()
    ledger.counter(START_TIME, 0, 1.0)
    ledger.counter(START_TIME, 1, 2.0)
    ledger.counter(START_TIME, 0, 3.0)  # the "restarted" process answered again: another replica
    assert ledger.total() == 0 and ledger.recent() == ()


def test_the_platform_counts_from_the_watch_start_and_keeps_its_exact_deaths():
    deaths = tuple(RestartEvent(float(t), LAB_SUPERVISOR, "apiserver", oom_killed=True, uptime_seconds=9.0)
                   for t in (10, 30, 50))
    ledger = RestartLedger()
    ledger.platform(PlatformRestarts(LAB_SUPERVISOR, 1, deaths[:1], oom_kills=1))
    ledger.platform(PlatformRestarts(LAB_SUPERVISOR, 3, deaths, oom_kills=3))
    assert ledger.total() == 2 and ledger.oom_kills == 2
    assert [e.at for e in ledger.recent()] == [10.0, 30.0, 50.0]  # its log reaches back before the watch
    once = RestartLedger(since_start=False)
    once.platform(PlatformRestarts(LAB_SUPERVISOR, 3, deaths, oom_kills=3))
    assert once.total() == 3 and once.oom_kills == 3


def test_the_supervisors_log_becomes_restart_events_named_by_host(tmp_path):
    log = tmp_path / "restarts.jsonl"
    lines = [
        {"at": 100.0, "event": "died", "component": "apiserver-2", "pid": 5, "oom_killed": True, "ran_seconds": 14.2,
         "backoff_seconds": 1.0},
        {"at": 101.5, "event": "restarted", "component": "apiserver-2", "pid": 6, "restarts": 1},
        {"at": 120.0, "event": "died", "component": "apiserver", "pid": 4, "oom_killed": False, "ran_seconds": 300.0},
        {"at": 121.0, "event": "failed", "component": "apiserver", "pid": 7, "reason": "killed"},
    ]
    log.write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"at": 1')  # a line being written
    reading = platform_restarts(read_events(log), {"apiserver-2": "crdscope-lab-2"}, oom_kills=1)
    assert reading.restarts == 2 and reading.oom_kills == 1
    assert [(e.at, e.replica, e.oom_killed, e.uptime_seconds) for e in reading.events] == [
        (100.0, "crdscope-lab-2", True, 14.2), (120.0, "apiserver", False, 300.0)]


def test_a_new_lease_holder_is_a_restart_of_that_host():
    def leases(*holders: tuple[str, str, str]) -> LeaseReading:
        body = {"items": [{"metadata": {"name": name, "labels": {"kubernetes.io/hostname": host}},
                           "spec": {"holderIdentity": holder, "renewTime": "2026-12-04T10:00:00.000000Z"}}
                          for name, host, holder in holders]}
        return LeaseReading(parse_leases(body, now=0.0))

    watcher = LeaseWatcher()
    assert watcher.observe(leases(("a", "host-a", "1"), ("b", "host-b", "2"))) == []
    assert watcher.observe(LeaseReading(error="forbidden")) == []  # unreadable: changes nothing
    (replaced,) = watcher.observe(leases(("a", "host-a", "1"), ("b", "host-b", "3")))
    assert replaced.host == "host-b"
    assert watcher.replaced_hosts == {"host-b": 1} and watcher.replacements == 1


def test_the_tracker_hands_start_time_restarts_with_the_memory_last_seen():
    tracker = HealthTracker()
    tracker.observe_start(1000.0, 1010.0, ProcessGauges(rss_bytes=400e6))
    tracker.observe_start(1000.0, 1020.0, ProcessGauges(rss_bytes=690e6))
    tracker.observe_start(1030.0, 1040.0, ProcessGauges(rss_bytes=200e6))  # a new process: one restart
    (event,) = tracker.ledger.recent()
    assert (event.at, event.source, event.rss_bytes_at_death, event.uptime_seconds) == \
        (1030.0, START_TIME, 690_000_000, 20.0)


def test_restart_events_survive_a_recording_round_trip():
    sample = HealthSample(restarts=2, restarts_source=LAB_SUPERVISOR, restarts_by_source={LAB_SUPERVISOR: 2},
                          restart_events=(RestartEvent(1.0, LAB_SUPERVISOR, "apiserver", True, 3.5, None),),
                          lease_restarts={"h": 1}, oom_kills=2, down_seconds=4.5)
    assert HealthSample.from_json(json.loads(json.dumps(sample.to_json()))) == sample
