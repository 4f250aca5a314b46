"""The session core: one store per cluster, shared with the live scheduler; what it knows survives a reset."""

from __future__ import annotations

from crdscope.findings.kubectl import KUBECTL_DISCOVERY_CHECK, KubectlClient
from crdscope.probes.scheduler import FunctionProbe, Scheduler
from crdscope.probes.version import VersionSample
from crdscope.session.core import WatchCore


class SchedulerSource:
    """What the core sees of a Monitor: its scheduler, add_sink and run."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler

    def add_sink(self, sink) -> None:
        self.scheduler.add_sink(sink)

    async def run(self) -> None:
        await self.scheduler.run()


async def test_the_scheduler_reads_the_cores_store_and_keeps_no_samples_of_its_own():
    async def version() -> VersionSample:
        return VersionSample(git_version="v1.37.2")

    scheduler = Scheduler([FunctionProbe("version", 60.0, version)])
    core = WatchCore(SchedulerSource(scheduler), cluster="prod-eu")
    sample = await scheduler.run_probe_once("version")
    assert scheduler.store is core.store
    assert len(core.store.history("version")) == 1  # added once: by the core, not again by the scheduler
    assert scheduler.latest["version"] is sample and dict(scheduler.latest) == {"version": sample}
    assert core.store.latest_of(VersionSample) is sample and core.samples == 1


async def test_a_scheduler_without_a_core_keeps_its_own_store():
    async def version() -> VersionSample:
        return VersionSample(git_version="v1.37.2")

    scheduler = Scheduler([FunctionProbe("version", 60.0, version)])
    sample = await scheduler.run_probe_once("version")
    assert scheduler.latest.get("version") is sample and "discovery" not in scheduler.latest


def test_a_reset_forgets_samples_but_keeps_the_store_and_the_local_kubectl():
    core = WatchCore(kubectl=KubectlClient("/usr/bin/kubectl", "v1.23.17", 1, 23))
    store = core.store
    core.take(VersionSample(timestamp=10.0, git_version="v1.37.2"))
    core.reset()
    assert core.store is store and store.latest("version") is None and core.samples == 0
    assert core.findings.checks.count(KUBECTL_DISCOVERY_CHECK) == 1
    assert core.findings.store is store and core.kubectl is not None and core.kubectl.cache_ttl_seconds == 600.0
