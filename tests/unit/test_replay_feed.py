"""The replay feed: the live monitor's interface plus speed, step and seek."""

from __future__ import annotations

import asyncio
import math
import time

import pytest

from crdscope.base.samples.health import HealthSample
from crdscope.session.recorder import ClusterInfo, Recorder
from crdscope.session.replay import ReplayFeed, read_recording
from tests.helpers import async_wait_for


@pytest.fixture
def recording(tmp_path):
    path = tmp_path / "feed.jsonl"
    with Recorder(path, ClusterInfo(server="https://x:6443", context="ctx")) as recorder:
        for i in range(10):
            recorder(HealthSample(timestamp=100.0 + 2 * i, crds=i))  # one sample every 2 s
    return read_recording(path)


async def start(feed: ReplayFeed) -> tuple[list, asyncio.Task]:
    seen: list = []
    feed.add_sink(seen.append)
    return seen, asyncio.create_task(feed.run())


async def test_as_fast_as_possible_delivers_every_sample_in_order(recording):
    feed = ReplayFeed(recording, speed=0)
    seen, task = await start(feed)
    await asyncio.wait_for(task, 10)
    assert seen == recording.samples and feed.at_end and feed.finished.is_set()
    assert (feed.context, feed.server) == ("ctx", "https://x:6443")


async def test_a_core_on_the_feed_holds_the_latest_samples(recording):
    from crdscope.session.replay import replay_core

    feed = ReplayFeed(recording, speed=0)
    core = replay_core(feed)
    await asyncio.wait_for(core.run(), 10)
    assert core.store.latest_of(HealthSample) == recording.samples[-1]
    assert core.samples == len(recording.samples)


async def test_real_time_is_scaled_by_speed(recording):
    # 18 s of recording at 60x: about 0.3 s of wall time, never less.
    feed = ReplayFeed(recording, speed=60)
    started = time.monotonic()
    seen, task = await start(feed)
    await asyncio.wait_for(task, 10)
    elapsed = time.monotonic() - started
    assert seen == recording.samples
    assert 18 / 60 * 0.95 <= elapsed < 3.0


async def test_async_sinks_are_awaited(recording):
    feed = ReplayFeed(recording, speed=math.inf)
    seen = []

    async def sink(sample):
        await asyncio.sleep(0)
        seen.append(sample)

    feed.add_sink(sink)
    await asyncio.wait_for(feed.run(), 10)
    assert seen == recording.samples


async def test_pause_step_resume(recording):
    feed = ReplayFeed(recording, speed=1000)
    feed.pause()
    seen, task = await start(feed)
    assert feed.paused
    feed.step()
    await async_wait_for(lambda: len(seen) == 1, timeout=5, message="one step")
    feed.step()
    feed.step()
    await async_wait_for(lambda: len(seen) == 3, timeout=5, message="two more steps")
    assert seen == recording.samples[:3] and feed.paused and not task.done()
    feed.resume()
    await asyncio.wait_for(task, 10)
    assert seen == recording.samples


async def test_seek_forward_delivers_history_quickly_then_plays_on(recording):
    feed = ReplayFeed(recording, speed=1.0, hold_at_end=True)  # real time: only the seek can go fast
    feed.pause()
    seen, task = await start(feed)
    feed.seek(110.0)
    await async_wait_for(lambda: len(seen) == 6, timeout=5, message="samples up to t=110")
    assert [s.timestamp for s in seen] == [100.0, 102.0, 104.0, 106.0, 108.0, 110.0]
    assert feed.clock == 110.0
    feed.seek(10_000)  # clamped to the end
    await async_wait_for(lambda: feed.finished.is_set(), timeout=5, message="the end")
    assert seen == recording.samples and not task.done()  # held at the end for more seeks
    task.cancel()


async def test_seek_backwards_resets_then_replays_from_the_start(recording):
    feed = ReplayFeed(recording, speed=0, hold_at_end=True)
    resets = []
    feed.add_reset_listener(lambda: resets.append(len(seen)))
    seen, task = await start(feed)
    await async_wait_for(lambda: feed.finished.is_set(), timeout=5, message="the end")
    feed.pause()
    feed.seek(103.0)
    await async_wait_for(lambda: len(seen) == 12, timeout=5, message="replay to t=103")
    assert resets == [10]
    assert [s.timestamp for s in seen[10:]] == [100.0, 102.0]
    assert feed.position == 2 and feed.clock == 103.0
    task.cancel()


async def test_speed_must_be_a_number(recording):
    feed = ReplayFeed(recording)
    feed.speed = 4
    assert feed.speed == 4.0
    feed.speed = 0
    assert math.isinf(feed.speed)
    from crdscope.base.errors import ConfigError

    with pytest.raises(ConfigError):
        feed.speed = float("nan")


def test_seek_targets():
    from crdscope.base.errors import ConfigError
    from crdscope.session.replay import seek_target

    start = time.mktime((2026, 3, 1, 23, 50, 0, 0, 0, -1))  # 23:50:00 local, runs past midnight
    end = start + 1200.0
    assert seek_target("50%", start, end, start) == start + 600.0
    assert seek_target("150%", start, end, start) == end
    assert seek_target("+90s", start, end, start + 10) == start + 100
    assert seek_target("-1m", start, end, start + 100) == start + 40
    assert seek_target("23:55", start, end, start) == start + 300
    assert seek_target("23:55:30", start, end, start) == start + 330
    assert seek_target("00:05", start, end, start) == start + 900  # the next day
    for bad in ("soon", "25:00", "12:61", "x%", "+", ""):
        with pytest.raises(ConfigError):
            seek_target(bad, start, end, start)
