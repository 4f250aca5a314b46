"""A frozen API server seen through HTTP/2 PINGs (issue 27), against the real lab.

An in-process monitor (the responsiveness probe alone, as the headless watch builds it) and the
findings engine watch a lab of the test's own: PINGs are answered on the live server (a round
trip measured, no /livez heartbeat sent); after SIGSTOP the sample's ``ping_waiting_seconds``
grows from one start and "API server not answering" opens citing the PING; after SIGCONT it
closes.  No timed assertion: ``python -m bench hang`` measures how fast (bench/RESULTS.md).
"""

from __future__ import annotations

import asyncio

import pytest

from crdscope.findings.checks import NOT_ANSWERING
from crdscope.findings.engine import FindingsEngine
from crdscope.findings.model import CLOSED, OPENED
from crdscope.base.settings import Thresholds
from tests.e2e.monitoring import running_monitor
from tests.helpers import async_wait_for

pytestmark = pytest.mark.lab


async def test_pings_are_answered_then_a_frozen_server_is_not_answering_citing_the_ping_until_resumed(fresh_lab):
    engine = FindingsEngine(Thresholds())
    changes = []

    def change(kind: str):
        return next((c for c in changes if c.change == kind and c.finding.id == NOT_ANSWERING), None)

    async with running_monitor(fresh_lab, ["responsiveness"], count_etcd=False, responsiveness=0.5) as (monitor, got):
        monitor.add_sink(lambda sample: changes.extend(engine.observe(sample)))
        live = await got.next("responsiveness", lambda s: s.ping_rtt_seconds is not None and s.ping_state == "answering",
                              timeout=60, message="a PING answered")
        assert live.ping_waiting_seconds is not None and live.ping_waiting_seconds < 1.0
        assert live.ping_rtt_seconds > 0 and live.ping_failure is None
        await asyncio.to_thread(fresh_lab.lab.stop, "apiserver")
        try:
            first = await got.next("responsiveness", lambda s: (s.ping_waiting_seconds or 0) > 1.0, timeout=30,
                                   message="a PING waiting")
            later = await got.next("responsiveness",
                                   lambda s: (s.ping_waiting_seconds or 0) > first.ping_waiting_seconds + 1.0,
                                   timeout=30, message="the PING's wait growing")
            opened = await async_wait_for(lambda: change(OPENED), timeout=30, message="not answering opened")
        finally:
            await asyncio.to_thread(fresh_lab.lab.start, "apiserver")
        closed = await async_wait_for(lambda: change(CLOSED), timeout=60, message="not answering closed")
        after = await got.next("responsiveness", lambda s: s.ping_state == "answering", timeout=30,
                               message="answering again")
        own = {path: tally.requests for (origin, path), tally in monitor.cluster.traffic.by_origin_and_path().items()
               if origin == "responsiveness"}
        samples = got.of("responsiveness")

    started = first.timestamp - first.ping_waiting_seconds
    assert abs((later.timestamp - later.ping_waiting_seconds) - started) < 0.1  # one wait, one start
    assert later.ping_state in ("waiting", "connecting")
    finding = opened.finding
    assert finding.title == "API server not answering: no reply to requests or HTTP/2 PINGs"
    assert closed.finding.title == finding.title
    assert "HTTP/2 PING unanswered for" in finding.evidence[0]
    assert "(the server answers PINGs without a request;" in finding.evidence[0]
    assert abs(finding.since - started) < 0.1
    assert closed.timestamp > opened.timestamp and after.ping_waiting_seconds < 1.0
    # The PING replaced the heartbeat: the probe sent no request of its own, before, during or after.
    assert all(s.heartbeats == 0 for s in samples)
    assert not own, f"the responsiveness probe sent requests: {own}"
    print(f"\nPING round trip on the live lab: {live.ping_rtt_seconds * 1000:.2f} ms; not answering opened after "
          f"{opened.timestamp - started:.1f} s of waiting, closed after {closed.duration_seconds:.1f} s")
