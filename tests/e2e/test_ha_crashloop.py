"""Crash loops behind one address (issue 40 item 5), on a lab of three kube-apiservers behind haproxy.

A rolling restart (each replica killed and started once) is no crash loop; one replica killed three
times is, and the finding names that replica.  Each restart line of the events log names the
replica its source names, and never the answering replica's start time as the new process's.

The health samples are the monitor's own (every source of restarts it has on this lab); the verdicts
come from the findings engine and the events detector the headless watch runs.
"""

from __future__ import annotations

import asyncio

import pytest

from crdscope.base.samples.health import HealthSample
from crdscope.findings.crashloop import CRASH_LOOP
from crdscope.findings.model import OPENED
from tests.e2e.ha_lab import start_ha_lab, start_time_of
from tests.e2e.monitoring import running_monitor

pytestmark = pytest.mark.lab

REPLICAS = 3


@pytest.fixture(scope="module")
def three_replicas(tmp_path_factory: pytest.TempPathFactory, lab_binaries):
    handle = start_ha_lab(tmp_path_factory.mktemp("ha3-lab"), lab_binaries, replicas=REPLICAS)
    yield handle
    handle.lab.down()


async def restart(lab, index: int, collected) -> float:
    """Kill replica ``index`` and start it again; its new process's start time, once a scrape saw it."""
    from crdscope.lab.controlplane import replica_name

    await asyncio.to_thread(lab.lab.kill, replica_name(index))
    await collected.next("health", timeout=30, message=f"a sample while replica {index} is dead")
    await asyncio.to_thread(lab.lab.start, replica_name(index))
    new = await asyncio.to_thread(start_time_of, lab, index)
    await collected.next("health", lambda s: any(r.start_time == new for r in s.replicas), timeout=120,
                         message=f"replica {index}'s new process answering a scrape")
    return new


def judged(samples: list[HealthSample]):
    """What the headless watch would say of these samples: every finding change and event."""
    from crdscope.base.settings import Thresholds
    from crdscope.findings.engine import FindingsEngine
    from crdscope.session.events import EventDetector

    engine, detector = FindingsEngine(Thresholds()), EventDetector(Thresholds())
    changes, events = [], []
    for sample in samples:
        changes += engine.observe(sample)
        events += detector.observe(sample)
    return changes, events


async def test_a_rolling_restart_of_every_replica_is_no_crash_loop(three_replicas):
    async with running_monitor(three_replicas, ["health"], count_etcd=False, health=1.0) as (_, collected):
        await collected.next("health", lambda s: len(s.replicas) == REPLICAS, timeout=90,
                             message="every replica seen")
        for index in range(1, REPLICAS + 1):
            await restart(three_replicas, index, collected)
        final = await collected.next("health", lambda s: (s.restarts or 0) >= REPLICAS, timeout=60,
                                     message="three restarts counted")
        samples = collected.of("health")

    changes, events = judged(samples)
    assert not [c for c in changes if c.finding.id == CRASH_LOOP], [c.line() for c in changes]
    restarted = [e.message for e in events if e.kind == "apiserver-restarted"]
    assert len(restarted) == final.restarts, restarted
    # Each line names a replica (three different ones), and no line gives a start time that is not
    # one of the new processes' (the answering replica's start time was named before the fix).
    named = {line.split("replica ", 1)[1].split(" ", 1)[0] for line in restarted if "replica " in line}
    assert len(named) == REPLICAS, restarted


async def test_one_replica_killed_three_times_is_a_crash_loop_that_names_it(three_replicas):
    async with running_monitor(three_replicas, ["health"], count_etcd=False, health=1.0) as (_, collected):
        await collected.next("health", lambda s: len(s.replicas) == REPLICAS, timeout=90,
                             message="every replica seen")
        for _ in range(3):
            new = await restart(three_replicas, 2, collected)
        final = await collected.next("health", lambda s: (s.restarts or 0) >= 3, timeout=60,
                                     message="three restarts counted")
        samples = collected.of("health")

    changes, _ = judged(samples)
    opened = [c.finding for c in changes if c.finding.id == CRASH_LOOP and c.change == OPENED]
    assert len(opened) == 1, [c.line() for c in changes]
    title = opened[0].title
    looping = {e.replica for e in final.restart_events}
    assert len(looping) == 1, final.restart_events  # every restart was replica 2's
    (name,) = looping
    assert f"(replica {name})" in title, title
    # The name is replica 2's, whichever source counted: its scrape slot (the one now running the new
    # process) or its identity Lease's host.
    slot = next((r.name for r in final.replicas if r.start_time == new), None)
    assert name == slot or name.endswith("2"), (name, slot, [(r.name, r.start_time) for r in final.replicas])
