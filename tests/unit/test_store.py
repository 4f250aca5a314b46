"""The TUI's sample store: typed reads by sample class, and per-probe health counted once."""

from __future__ import annotations

import dataclasses

from crdscope.base.samples.health import HealthSample
from crdscope.base.samples.latency import LatencySample
from crdscope.base.samples import Sample
from crdscope.session.core import SessionStore


def test_typed_reads_return_the_class_asked_for():
    store = SessionStore()
    store.add(HealthSample(timestamp=1.0, rss_bytes=100))
    store.add(HealthSample(timestamp=2.0, error="timed out"))
    store.add(LatencySample(timestamp=3.0))
    good = store.last_good_of(HealthSample)
    assert good is not None and good.rss_bytes == 100  # an attribute a type checker sees
    latest = store.latest_of(HealthSample)
    assert latest is not None and latest.error == "timed out"
    assert [s.timestamp for s in store.history_of(HealthSample)] == [1.0, 2.0]
    assert [s.timestamp for s in store.good_history_of(HealthSample)] == [1.0]
    assert store.last_good_of(LatencySample) is not None


def test_a_sample_of_another_class_under_the_same_name_is_not_returned_as_that_class():
    other = dataclasses.make_dataclass("OtherHealth", [], bases=(Sample,), frozen=True, kw_only=True)
    other.probe = "health"  # after creation: not registered as the health probe's class
    store = SessionStore()
    store.add(other(timestamp=1.0))
    assert store.latest("health") is not None
    assert store.latest_of(HealthSample) is None and store.last_good_of(HealthSample) is None


def test_health_counts_runs_failures_and_recovery():
    store = SessionStore()
    for sample in (HealthSample(timestamp=1.0), HealthSample(timestamp=2.0, error="x"),
                   HealthSample(timestamp=3.0, error="y"), HealthSample(timestamp=4.0)):
        store.add(sample)
    health = store.health()["health"]
    assert (health.runs, health.failures, health.consecutive_failures) == (4, 2, 0)
    assert (health.last_run, health.last_ok, health.last_error) == (4.0, 4.0, None)
    store.add(HealthSample(timestamp=5.0, error="z"))
    assert (health.consecutive_failures, health.last_error, health.down) == (1, "z", True)
