"""An outage dated to the second (issue 46 item 3): the scheduler hurries a probe that dates an outage,
and the health probe, while the server is away, sends one cheap check at a time: every second while
connections are refused, one left in flight with a back-off while they time out; the outage starts
at the first attempt left unanswered, the session's verdict's (``ClusterFacts.server_away``) or its own.

The API server is an ``httpx.MockTransport`` that answers, refuses (``ConnectError``) or hangs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time

import httpx
import pytest

from crdscope.base.facts import ClusterFacts, ServerAway
from crdscope.base.samples import Sample
from crdscope.connection.cluster import Cluster, ClusterConfig
from crdscope.connection.metrics import MetricsSource
from crdscope.probes import outage
from crdscope.probes.health import HealthProbe
from crdscope.probes.probe import Pacing, ProbeBase
from crdscope.probes.scheduler import FunctionProbe, Scheduler
from tests.helpers import async_wait_for

SERVER = "https://apiserver.test"
METRICS = """# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 1.5e+09
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1.7e+09
"""


class FakeServer:
    """An API server that answers, refuses connections, or never answers /readyz (``hang``)."""

    def __init__(self) -> None:
        self.state = "up"
        #: time.monotonic() of each /readyz request that reached it (refused ones too), and their ends.
        self.readyz: list[float] = []
        self.readyz_ended: list[float] = []
        self.release = asyncio.Event()
        #: How long a hung /readyz waits before it times out (None: until released).
        self.hang_seconds: float | None = None

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/readyz":
            self.readyz.append(time.monotonic())
        try:
            return await self._answer(request)
        finally:
            if request.url.path == "/readyz":
                self.readyz_ended.append(time.monotonic())

    async def _answer(self, request: httpx.Request) -> httpx.Response:
        if self.state == "refused":
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
        if self.state == "hung" and request.url.path == "/readyz":
            if self.hang_seconds is not None:
                await asyncio.sleep(self.hang_seconds)  # the server's silence until the read timeout
                raise httpx.ReadTimeout("timed out", request=request)
            await self.release.wait()
        if request.url.path == "/metrics":
            return httpx.Response(200, text=METRICS)
        if request.url.path.endswith("/leases"):
            return httpx.Response(200, json={"kind": "LeaseList", "items": []})
        return httpx.Response(200, text="ok")


@pytest.fixture
async def served():
    fake = FakeServer()
    cluster = Cluster(ClusterConfig(server=SERVER, context="mock", user="mock", kubeconfig=()))
    await cluster.client.aclose()
    cluster.client = httpx.AsyncClient(base_url=SERVER, transport=httpx.MockTransport(fake))
    facts = ClusterFacts()

    async def crds() -> tuple[int | None, str | None]:
        return 10, None

    probe = HealthProbe(cluster, MetricsSource(cluster), crd_count=crds, facts=facts, cadence=0.0)
    yield fake, probe, facts
    fake.release.set()
    await probe.aclose()
    await cluster.client.aclose()


@pytest.fixture
def fast_pace(monkeypatch):
    """The outage check's pace shrunk tenfold, so its seconds pass in tenths."""
    monkeypatch.setattr(outage, "REFUSED_EVERY_SECONDS", 0.1)
    monkeypatch.setattr(outage, "BACKOFF_SECONDS", 0.3)
    monkeypatch.setattr(outage, "BACKOFF_MAX_SECONDS", 0.6)


async def test_refused_a_check_a_second_and_the_outage_starts_at_the_first_unanswered_attempt(served, fast_pace):
    fake, probe, facts = served
    assert (await probe.run()).error is None and not probe.dating
    fake.state = "refused"
    killed = time.time()
    # The session's verdict: the PINGs refused since ``killed``, after the probe's last answer.
    facts.server_away = ServerAway(killed, "API server unreachable: connections refused")
    assert probe.dating
    first = await probe.run()
    assert first.error and "refused" in first.error and first.down
    # Dated from the verdict's first refused attempt, before the probe's own first check.
    assert first.outages[-1].start == killed and first.down_seconds == round(first.timestamp - killed, 1)
    checks = len(fake.readyz)
    again = await probe.run()  # within the tenth of a second: no second check yet
    assert len(fake.readyz) == checks and again.down_seconds >= first.down_seconds
    await async_wait_for(lambda: time.monotonic() - fake.readyz[-1] >= 0.1, timeout=2)
    await probe.run()
    assert len(fake.readyz) > checks, "a refused server is checked again each (shrunk) second"
    fake.state = "up"
    facts.server_away = None
    back = await probe.run()
    assert back.error is None and not back.down and back.outages[-1].end is not None
    assert not probe.dating


async def test_hung_one_check_in_flight_then_a_back_off(served, fast_pace):
    fake, probe, facts = served
    await probe.run()
    fake.state, fake.hang_seconds = "hung", 0.5  # each /readyz times out after 0.5 s
    facts.server_away = ServerAway(time.time(), "API server not answering: no reply to requests or HTTP/2 PINGs")
    samples = []
    deadline = time.monotonic() + 6.0
    while len(fake.readyz_ended) < 4 and time.monotonic() < deadline:
        samples.append(await probe.run())
        assert len(fake.readyz) - len(fake.readyz_ended) <= 1, "never more than one check in flight"
    assert len(fake.readyz_ended) >= 4  # the healthy run's, then three that timed out
    assert all(s.error and s.down for s in samples)
    assert "unanswered" in samples[0].error and "not answering" in samples[0].error
    # After each timeout the next check waits a back-off that doubles: 0.3 s, then 0.6 s (shrunk).
    gaps = [start - end for end, start in zip(fake.readyz_ended[1:], fake.readyz[2:], strict=False)]
    assert len(gaps) >= 2 and gaps[0] >= 0.3 - 0.02 and gaps[1] >= 0.6 - 0.02, gaps


async def test_a_run_held_by_a_hung_server_ends_once_the_session_says_it_is_away(served):
    fake, probe, facts = served
    await probe.run()
    fake.state = "hung"  # /readyz waits until released
    stopped = time.time()
    run = asyncio.ensure_future(probe.run())
    await async_wait_for(lambda: len(fake.readyz) == 2, timeout=2, message="the run's /readyz in flight")
    assert not run.done()
    facts.server_away = ServerAway(stopped, "API server not answering: no reply to requests or HTTP/2 PINGs")
    sample = await asyncio.wait_for(run, timeout=2)
    assert sample.error and sample.down and sample.outages[-1].start == stopped
    assert probe.dating
    await probe.run()
    assert len(fake.readyz) == 2, "the run's /readyz stays the one check in flight"
    fake.state = "up"
    fake.release.set()
    facts.server_away = None
    back = await probe.run()
    assert back.error is None and back.outages[-1].end is not None


@dataclasses.dataclass
class Flag:
    away: bool = False


class DatingProbe(ProbeBase):
    name = "dating"
    pacing = Pacing(busy=60.0, outage=0.05)

    def __init__(self, flag: Flag) -> None:
        self.flag = flag
        self.runs = 0

    @property
    def dating(self) -> bool:
        return self.flag.away

    async def run(self) -> Sample:
        self.runs += 1
        return Sample()


async def test_a_sample_that_makes_a_probe_date_an_outage_wakes_it_on_its_outage_cadence():
    flag = Flag()
    dating = DatingProbe(flag)

    async def tick() -> Sample:
        return Sample()

    seen: list[Sample] = []
    scheduler = Scheduler([dating, FunctionProbe("tick", 0.02, tick)], [seen.append])
    task = asyncio.create_task(scheduler.run())
    try:
        await async_wait_for(lambda: dating.runs >= 1 and len(seen) >= 3, timeout=5)
        assert dating.cadence == 60.0
        flag.away = True  # the session's verdict, written as a sample is taken
        await async_wait_for(lambda: dating.runs >= 4, timeout=5, message="woken from its 60 s wait, every 0.05 s")
        assert dating.cadence == 0.05
        flag.away = False
        await async_wait_for(lambda: dating.cadence == 60.0, timeout=5, message="back on its busy cadence")
        runs = dating.runs
        await async_wait_for(lambda: len(seen) >= 20 + runs, timeout=5, message="more ticks")
        assert dating.runs <= runs + 1
    finally:
        scheduler.stop()
        await task
