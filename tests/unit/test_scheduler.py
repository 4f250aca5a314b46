"""The scheduler: runs never overlap, re-arm after completion, pause, failures as samples."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time

from crdscope.base.samples import Sample
from crdscope.probes.probe import Pacing, ProbeBase
from crdscope.probes.scheduler import FunctionProbe, Scheduler
from tests.helpers import async_wait_for


@dataclasses.dataclass
class SlowProbe(ProbeBase):
    name: str = "slow"
    every: float = 0.0
    duration: float = 0.05
    fail_every: int = 0
    running: int = 0
    max_running: int = 0
    runs: int = 0

    def __post_init__(self) -> None:
        self.pacing = Pacing(busy=self.every)

    async def run(self) -> Sample:
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        try:
            await asyncio.sleep(self.duration)  # the probe's own work, not test synchronisation
            self.runs += 1
            if self.fail_every and self.runs % self.fail_every == 0:
                return Sample(error="boom")
            return Sample()
        finally:
            self.running -= 1


async def test_runs_never_overlap_even_when_triggered():
    probe = SlowProbe(every=0.0, duration=0.02)
    samples = []
    scheduler = Scheduler([probe], [samples.append])
    task = asyncio.create_task(scheduler.run())
    for _ in range(20):
        scheduler.trigger("slow")
        await asyncio.sleep(0)
    await async_wait_for(lambda: probe.runs >= 10, timeout=10)
    scheduler.stop()
    await task
    assert probe.max_running == 1
    assert len(samples) >= 10


async def test_failures_are_samples_and_transitions_logged_once(caplog):
    probe = SlowProbe(duration=0.0, fail_every=1)
    samples: list[Sample] = []
    scheduler = Scheduler([probe], [samples.append])
    task = asyncio.create_task(scheduler.run())
    with caplog.at_level(logging.INFO, logger="crdscope.scheduler"):
        await async_wait_for(lambda: probe.runs >= 5, timeout=10)
        probe.fail_every = 0
        runs = probe.runs
        await async_wait_for(lambda: probe.runs >= runs + 2, timeout=10)
    scheduler.stop()
    await task
    messages = [r.getMessage() for r in caplog.records]
    assert sum("down" in m for m in messages) == 1
    assert sum("recovered" in m for m in messages) == 1
    assert sum(1 for sample in samples if sample.error) >= 5 and not samples[-1].error


async def test_exception_in_probe_becomes_error_sample():
    class Broken(ProbeBase):
        name = "broken"
        pacing = Pacing(busy=10.0)

        async def run(self):
            raise RuntimeError("bug")

    samples = []
    scheduler = Scheduler([Broken()], [samples.append])
    task = asyncio.create_task(scheduler.run())
    await async_wait_for(lambda: samples, timeout=5)
    scheduler.stop()
    await task
    assert "RuntimeError: bug" in samples[0].error


async def test_pause_stops_new_runs():
    probe = SlowProbe(duration=0.0, every=0.0)
    scheduler = Scheduler([probe])
    task = asyncio.create_task(scheduler.run())
    await async_wait_for(lambda: probe.runs >= 3, timeout=5)
    scheduler.pause()
    await async_wait_for(lambda: probe.running == 0, timeout=5, interval=0.001,
                         message="the run in flight to finish")
    frozen = probe.runs
    for _ in range(50):
        await asyncio.sleep(0)
    assert probe.runs <= frozen + 1
    scheduler.resume()
    await async_wait_for(lambda: probe.runs >= frozen + 3, timeout=5)
    scheduler.stop()
    await task


async def test_stop_ends_a_busy_loop_every_time():
    # A zero-cadence probe that finishes at once is the case where asyncio.wait_for (3.11)
    # swallowed the stop's cancellation and the loop spun on: CI hung on it once.
    for _ in range(100):
        probe = SlowProbe(duration=0.0, every=0.0)
        scheduler = Scheduler([probe])
        task = asyncio.create_task(scheduler.run())
        await async_wait_for(lambda probe=probe: probe.runs >= 3, timeout=5, interval=0.001)
        scheduler.stop()
        done, _ = await asyncio.wait({task}, timeout=5)
        assert task in done, "the scheduler did not stop"


async def test_an_idle_probe_slows_down_and_a_nudge_brings_its_busy_cadence_back():
    runs: list[float] = []
    quiet = True

    async def observe() -> Sample:
        runs.append(time.monotonic())
        return Sample()

    probe = FunctionProbe("paced", 0.05, observe)
    scheduler = Scheduler(quiet=lambda: quiet)
    scheduler.add(probe, Pacing(busy=0.05, idle=600.0))  # as Monitor adds it: declared, with config.toml's keys
    task = asyncio.create_task(scheduler.run())
    try:
        await async_wait_for(lambda: runs, timeout=5, message="the first run")
        assert probe.cadence == 600.0, "quiet: the next run waits the idle cadence"
        quiet = False  # a CRD changed (Monitor sets last_crd_change, then nudges)
        scheduler.nudge("paced")
        await async_wait_for(lambda: len(runs) >= 3, timeout=5, message="runs on the busy cadence")
        assert probe.cadence == 0.05
    finally:
        scheduler.stop()
        await task
