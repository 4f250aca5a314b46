"""The session core: one store per cluster, which the live probes read; what it knows survives a reset."""

from __future__ import annotations

from crdscope.findings.kubectl import KubectlClient
from crdscope.findings.kubectl_discovery import KUBECTL_DISCOVERY_CHECK
from crdscope.probes.scheduler import FunctionProbe, Scheduler
from crdscope.base.samples.version import VersionSample
from crdscope.session.core import LatestSamples, SessionStore, WatchCore


class SchedulerSource:
    """What the core sees of a Monitor: its scheduler's samples and run."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler

    def add_sink(self, sink) -> None:
        self.scheduler.add_sink(sink)

    async def run(self) -> None:
        await self.scheduler.run()


async def test_the_probes_read_the_cores_store_and_health_is_counted_there_once():
    async def version() -> VersionSample:
        return VersionSample(git_version="v1.37.2")

    store = SessionStore()
    scheduler = Scheduler([FunctionProbe("version", 60.0, version)])
    core = WatchCore(SchedulerSource(scheduler), store=store, cluster="prod-eu")
    latest = LatestSamples(store)
    sample = await scheduler.run_probe_once("version")
    assert len(core.store.history("version")) == 1  # added once: by the core
    assert latest["version"] is sample and dict(latest) == {"version": sample} and "discovery" not in latest
    assert core.store.latest_of(VersionSample) is sample and core.samples == 1
    assert store.health()["version"].runs == 1


def test_a_reset_forgets_samples_but_keeps_the_store_and_the_local_kubectl():
    core = WatchCore(None, store=SessionStore(), kubectl=KubectlClient("/usr/bin/kubectl", "v1.23.17", 1, 23))
    store = core.store
    core.take(VersionSample(timestamp=10.0, git_version="v1.37.2"))
    core.reset()
    assert core.store is store and store.latest("version") is None and core.samples == 0
    assert core.findings.checks.count(KUBECTL_DISCOVERY_CHECK) == 1
    assert core.findings.store is store and core.kubectl is not None and core.kubectl.cache_ttl_seconds == 600.0


class TimedSource:
    """A source that ends when ``ends`` is set (None: at once), never (``forever``), or fails with ``fails``;
    ``on_end`` is set as it ends."""

    def __init__(self, ends=None, fails: BaseException | None = None, forever: bool = False, on_end=None) -> None:
        import asyncio

        self.ends = asyncio.Event() if forever else ends
        self.fails, self.on_end = fails, on_end
        self.cancelled = False

    def add_sink(self, sink) -> None:
        pass

    async def run(self) -> None:
        import asyncio

        try:
            if self.fails is not None:
                raise self.fails
            if self.ends is not None:
                await self.ends.wait()
            if self.on_end is not None:
                self.on_end.set()
        except asyncio.CancelledError:
            self.cancelled = True
            raise


async def test_a_fleet_runs_until_every_source_ends_or_a_stop_comes_or_one_fails():
    import asyncio

    from crdscope.session.core import WatchCore, run_each

    # One recording ends at once; the fleet goes on until the other (released by the first's end) ends too.
    release = asyncio.Event()
    short, longer = TimedSource(on_end=release), TimedSource(ends=release)
    ended, failure = await run_each([WatchCore(short, store=SessionStore()), WatchCore(longer, store=SessionStore())], None)
    assert (ended, failure) == (True, None) and not longer.cancelled
    # A stop ends it: every live source is cancelled.
    live = [TimedSource(forever=True), TimedSource(forever=True)]
    stop = asyncio.Event()
    asyncio.get_running_loop().call_soon(stop.set)
    ended, failure = await run_each([WatchCore(s, store=SessionStore()) for s in live], None, stop.wait())
    assert (ended, failure) == (False, None) and all(s.cancelled for s in live)
    # One source failing ends the fleet with its exception; the others are cancelled.
    broken, healthy = TimedSource(fails=RuntimeError("boom")), TimedSource(forever=True)
    ended, failure = await run_each([WatchCore(healthy, store=SessionStore()), WatchCore(broken, store=SessionStore())], None)
    assert isinstance(failure, RuntimeError) and healthy.cancelled
    # Time runs out.
    ended, failure = await run_each([WatchCore(TimedSource(forever=True), store=SessionStore())], 0.05)
    assert (ended, failure) == (False, None)
