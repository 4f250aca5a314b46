"""One owner per fact: the core's ClusterFacts, read by probes, findings and every front end.

The API server's memory limit is worked out once, by one precedence (``--memory-limit`` > the lab's
cap > the container limit Prometheus reports); recordings and a collector's stream carry the limit
given, so replays and viewers judge by it; the probe contract is whole (every member the scheduler
and the monitor use has its default on ``ProbeBase``) and config.toml overrides what a probe declares.
"""

from __future__ import annotations

import asyncio

import pytest

from crdscope.base.facts import ClusterFacts, LimitOrigin, LimitRecord, MemoryLimit, limit_at
from crdscope.base.samples import Sample
from crdscope.base.samples.health import HealthSample
from crdscope.base.settings import Settings
from crdscope.connection.cluster import Cluster
from crdscope.connection.kubeconfig import ClusterConfig
from crdscope.probes.monitor import Monitor
from crdscope.probes.probe import DEFAULT_DEADLINE_SECONDS, Pacing, ProbeBase
from crdscope.probes.scheduler import Scheduler
from crdscope.session.core import SessionStore, WatchCore
from crdscope.session.exporter import SampleCollector
from crdscope.session.recorder import ClusterInfo, Recorder
from crdscope.session.replay import ReplayFeed, read_recording, replay_core
from tests.helpers import async_wait_for

MIB = 2**20
PROMETHEUS = 'prometheus: kube_pod_container_resource_limits{container="kube-apiserver"}'


def shown(limit: int, at: float = 1.0, rss: int = 100 * MIB) -> HealthSample:
    """A health sample whose Prometheus reading showed ``limit``."""
    return HealthSample(timestamp=at, rss_bytes=rss, crds=10, memory_limit_bytes=limit,
                        sources={"memory_limit_bytes": PROMETHEUS})


def test_the_flag_wins_over_the_labs_cap_which_wins_over_prometheus():
    facts = ClusterFacts()
    assert facts.memory_limit is None
    facts.observe_limit(3000 * MIB, PROMETHEUS)
    assert facts.memory_limit == MemoryLimit(3000 * MIB, LimitOrigin.PROMETHEUS, PROMETHEUS)
    assert not facts.memory_limit.given and facts.memory_limit.describe() == PROMETHEUS
    facts.set_lab_limit(2000 * MIB)
    assert facts.memory_limit == MemoryLimit(2000 * MIB, LimitOrigin.LAB) and facts.given_limit == facts.memory_limit
    assert ClusterFacts(flag_limit=1000 * MIB, lab_limit=2000 * MIB).memory_limit == MemoryLimit(1000 * MIB,
                                                                                                 LimitOrigin.FLAG)
    facts.set_lab_limit(None)  # the cap lifted: Prometheus' again
    assert facts.memory_limit_bytes == 3000 * MIB
    facts.observe_limit(None)  # a reading that missed it does not lift the limit
    assert facts.memory_limit_bytes == 3000 * MIB
    facts.forget_observed()
    assert facts.memory_limit is None


def test_listeners_hear_each_change_of_the_limit_once():
    facts = ClusterFacts(lab_limit=2000 * MIB)
    heard: list[MemoryLimit | None] = []
    facts.limit_listeners.append(heard.append)
    facts.observe_limit(3000 * MIB)  # under the lab's cap: the limit did not change
    facts.set_lab_limit(1500 * MIB)
    facts.set_lab_limit(1500 * MIB)
    facts.set_lab_limit(None)
    assert heard == [MemoryLimit(1500 * MIB, LimitOrigin.LAB), MemoryLimit(3000 * MIB, LimitOrigin.PROMETHEUS)]


def test_the_core_owns_the_facts_its_findings_read_and_the_health_probe_only_observes():
    facts = ClusterFacts(flag_limit=1000 * MIB)
    core = WatchCore(None, store=SessionStore(), facts=facts)
    assert core.findings.observations.facts is facts
    core.take(shown(4000 * MIB, rss=900 * MIB))
    # Prometheus shows 4,000 MiB, the flag says 1,000: the flag decides, the finding judges 90%.
    assert facts.memory_limit == MemoryLimit(1000 * MIB, LimitOrigin.FLAG)
    (headroom,) = [f for f in core.open_findings() if f.id == "memory-headroom"]
    assert "90% of its 1,000 MiB limit" in headroom.title
    assert facts.memory_pressure == f"{headroom.title}: heavy optional reads wait"
    core.reset()  # a replay seeking back: what the samples said goes, what was given stays
    assert facts.memory_pressure is None and facts.memory_limit == MemoryLimit(1000 * MIB, LimitOrigin.FLAG)


def test_the_exporter_serves_the_facts_limit_as_the_health_figure():
    facts = ClusterFacts(lab_limit=2000 * MIB)
    core = WatchCore(None, store=SessionStore(), facts=facts, cluster="lab")
    collector = SampleCollector()
    collector.watch(core)
    core.take(shown(4000 * MIB))
    (exported,) = collector.clusters()
    health = collector.latest(exported)["health"]
    assert isinstance(health, HealthSample) and health.memory_limit_bytes == 2000 * MIB
    assert core.store.latest_of(HealthSample).memory_limit_bytes == 4000 * MIB  # the sample as observed


def write_recording(path, items: list[Sample | LimitRecord]) -> None:
    recorder = Recorder(path, ClusterInfo(server="https://127.0.0.1:6443", context="lab", kubernetes_version="v1.37.2"))
    for item in items:
        recorder.record(item)
    recorder.close()


async def replayed_limits(path) -> list[int | None]:
    """The facts' limit as each health sample of the recording at ``path`` is replayed."""
    feed = ReplayFeed(read_recording(path), speed=0)
    core = replay_core(feed)
    seen: list[int | None] = []
    core.add_listener(lambda taken: seen.append(core.facts.memory_limit_bytes))
    await asyncio.wait_for(core.run(), 10)
    return seen


async def test_a_replay_judges_by_the_limit_given_while_it_was_recorded(tmp_path):
    path = tmp_path / "given.jsonl"
    write_recording(path, [
        HealthSample(timestamp=1.0, rss_bytes=100 * MIB),
        LimitRecord(1.5, MemoryLimit(2000 * MIB, LimitOrigin.LAB)),
        HealthSample(timestamp=2.0, rss_bytes=100 * MIB),
        LimitRecord(2.5, MemoryLimit(1000 * MIB, LimitOrigin.LAB)),  # `crdscope lab limit` while recording
        shown(4000 * MIB, at=3.0),
        LimitRecord(3.5, None),  # the cap lifted
        shown(4000 * MIB, at=4.0),
    ])
    assert read_recording(path).limits[0] == LimitRecord(1.5, MemoryLimit(2000 * MIB, LimitOrigin.LAB))
    assert await replayed_limits(path) == [None, 2000 * MIB, 1000 * MIB, 4000 * MIB]


async def test_a_recording_of_an_older_crdscope_judges_by_its_health_samples_limit(tmp_path):
    # Before the facts, the health sample carried the limit given when Prometheus showed none.
    path = tmp_path / "older.jsonl"
    write_recording(path, [HealthSample(timestamp=1.0, rss_bytes=900 * MIB, memory_limit_bytes=1000 * MIB,
                                        sources={"memory_limit_bytes": "--memory-limit or the lab's cap"})])
    assert await replayed_limits(path) == [1000 * MIB]


def test_limits_read_tolerantly():
    assert MemoryLimit.from_json({"memory_limit_bytes": 5}) == MemoryLimit(5, LimitOrigin.FLAG)
    assert MemoryLimit.from_json({"memory_limit_bytes": 5, "memory_limit_origin": "LAB"}) == MemoryLimit(5, LimitOrigin.LAB)
    for nothing in (None, {}, {"memory_limit_bytes": True}, {"memory_limit_bytes": 0}, {"memory_limit_bytes": "5"}):
        assert MemoryLimit.from_json(nothing) is None
    records = [LimitRecord(1.0, MemoryLimit(5, LimitOrigin.LAB)), LimitRecord(3.0, None)]
    assert [limit_at(records, t) for t in (0.5, 1.0, 2.0, 3.0)] == [None, MemoryLimit(5, LimitOrigin.LAB),
                                                                    MemoryLimit(5, LimitOrigin.LAB), None]
    assert LimitRecord.from_json(records[0].to_json()) == records[0]
    with pytest.raises(ValueError):
        LimitRecord.from_json({"memory_limit_bytes": 5})


# -- the probe contract -------------------------------------------------------------------------


class Declared(ProbeBase):
    """A probe that says only what it must: its name, its pacing and its run."""

    name = "declared"
    pacing = Pacing(busy=0.05, idle=600.0, budget=3.0)

    def __init__(self) -> None:
        self.runs = 0

    async def run(self) -> Sample:
        self.runs += 1
        return Sample()


class Holding(Declared):
    """A probe with work pending: it keeps its busy cadence while all is quiet, and holds a task."""

    name = "holding"

    def __init__(self) -> None:
        super().__init__()
        self.closed = False

    @property
    def busy(self) -> bool:
        return True

    async def aclose(self) -> None:
        self.closed = True


async def test_the_base_gives_every_optional_member_its_default():
    probe = Declared()
    assert probe.deadline == DEFAULT_DEADLINE_SECONDS and probe.busy is False and probe.cadence == 0.05
    assert await probe.aclose() is None
    probe.cadence = 7.0
    assert probe.cadence == 7.0 and Declared().cadence == 0.05  # an instance's, not the class's


async def test_a_busy_probe_keeps_its_busy_cadence_while_all_is_quiet():
    idle, busy = Declared(), Holding()
    scheduler = Scheduler([idle, busy], quiet=lambda: True)
    task = asyncio.create_task(scheduler.run())
    try:
        await async_wait_for(lambda: busy.runs >= 3, timeout=5, message="the busy probe on its busy cadence")
        assert idle.runs == 1 and idle.cadence == 600.0 and busy.cadence == 0.05
    finally:
        scheduler.stop()
        await task


async def test_the_monitor_paces_its_probes_by_config_toml_over_their_declarations_and_closes_them():
    cluster = Cluster(ClusterConfig(server="https://127.0.0.1:9", context="offline", user="u", kubeconfig=()))
    settings = Settings().override("cadences", version=3.0).override("budgets", version=9.0, metrics=1.0)
    monitor = Monitor(cluster, settings, probes=["version", "discovery"], latest={})
    from crdscope.probes.discovery import DiscoveryProbe
    from crdscope.probes.version import VersionProbe

    assert monitor.pacing("version") == Pacing(busy=3.0, idle=VersionProbe.pacing.idle, budget=9.0)
    assert monitor.pacing("discovery") == DiscoveryProbe.pacing and monitor.probe("version").cadence == 3.0
    assert (monitor.budget_of("version"), monitor.budget_of("metrics"), monitor.budget_of("nope")) == (9.0, 1.0, None)
    assert monitor.shared.guard.facts is monitor.facts
    await cluster.aclose()


async def test_the_monitor_closes_every_probe_on_its_way_out():
    cluster = Cluster(ClusterConfig(server="https://127.0.0.1:9", context="offline", user="u", kubeconfig=()))
    monitor = Monitor(cluster, probes=[], latest={})
    holding = Holding()
    monitor.scheduler.add(holding)
    running = asyncio.create_task(monitor.run())
    await async_wait_for(lambda: holding.runs >= 1, timeout=5, message="a run")
    running.cancel()
    await asyncio.gather(running, return_exceptions=True)
    assert holding.closed
    await cluster.aclose()
