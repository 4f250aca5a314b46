"""The collector's stream and its viewers, in one process: a real aiohttp server on loopback, a real
httpx client, cores fed by hand (the lab tests are tests/e2e/test_view.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import stat

import pytest

from crdscope.base.errors import ConfigError
from crdscope.base.samples.version import VersionSample
from crdscope.base.facts import ClusterFacts, LimitOrigin, MemoryLimit
from crdscope.base.settings import Cadences, Thresholds
from crdscope.session.attach import AttachError, Collector, StreamFeed, attach_core, collector_clusters
from crdscope.session.core import SessionStore, WatchCore
from crdscope.session.recorder import ClusterInfo
from crdscope.session import viewstream
from crdscope.session.viewserver import ViewServer, new_token, parse_view_listen, token_matches
from crdscope.session.viewstream import StreamSettings, Subscriber, ViewHub, read_token
from tests.helpers import async_wait_for

INFO = ClusterInfo(server="https://10.0.0.1:6443", context="prod", kubernetes_version="v1.37.2")


def version(at: float, minor: str = "37") -> VersionSample:
    return VersionSample(timestamp=at, server=INFO.server, git_version=f"v1.{minor}.2", major="1", minor=minor)


def test_the_listen_address_is_loopback_unless_a_host_is_named():
    assert parse_view_listen(":8765") == ("127.0.0.1", 8765)
    assert parse_view_listen("8765") == ("127.0.0.1", 8765)
    assert parse_view_listen("0.0.0.0:8765") == ("0.0.0.0", 8765)
    assert parse_view_listen("[::1]:8765") == ("::1", 8765)
    with pytest.raises(ConfigError, match="not \\[HOST\\]:PORT"):
        parse_view_listen("here")
    with pytest.raises(ConfigError, match="out of range"):
        parse_view_listen(":70000")


def test_tokens_are_read_generated_private_and_compared_whole(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        read_token(tmp_path / "absent")
    (tmp_path / "empty").write_text("\n\n")
    with pytest.raises(ConfigError, match="is empty"):
        read_token(tmp_path / "empty")
    made = new_token(tmp_path / "state" / "view-token")
    assert read_token(tmp_path / "state" / "view-token") == made and len(made) >= 40
    assert stat.S_IMODE(os.stat(tmp_path / "state" / "view-token").st_mode) == 0o600
    assert token_matches(f"Bearer {made}", made)
    assert not token_matches(f"Bearer {made[:-1]}", made)
    assert not token_matches(made, made)  # no scheme
    assert not token_matches(None, made)


def test_stream_settings_travel_and_tolerate_a_newer_collector():
    sent = StreamSettings(Thresholds(unanswered_seconds_critical=9.0, openapi_backlog_warn=7),
                          Cadences(throttling=3.0), allow_control=False)
    back = StreamSettings.from_json(json.loads(json.dumps(sent.to_json())))
    assert back == sent
    newer = sent.to_json()
    newer["thresholds"]["a_threshold_of_the_future"] = 1.0
    newer["thresholds"]["openapi_backlog_warn"] = "many"  # mistyped: the default stays
    newer["cadences"] = None
    read = StreamSettings.from_json(newer)
    assert read.thresholds.unanswered_seconds_critical == 9.0
    assert read.thresholds.openapi_backlog_warn == Thresholds().openapi_backlog_warn
    assert read.cadences == Cadences()


def test_a_channel_sends_the_history_in_time_order_then_each_sample_once():
    core = WatchCore(None, store=SessionStore(), cluster="prod")
    hub = ViewHub()
    channel = hub.watch(core, INFO)
    core.take(version(20.0))
    core.take(version(10.0))  # probes finish out of order
    assert hub.load().cpu_seconds == 0.0  # nobody watching: nothing encoded
    subscriber = channel.subscribe()
    core.take(version(30.0))
    history = [json.loads(line) for chunk in subscriber.history_chunks() for line in chunk.splitlines()]
    assert [r["data"]["timestamp"] for r in history] == [10.0, 20.0]
    live = [json.loads(line) for line in b"".join(subscriber.lines).splitlines()]
    assert [(r["type"], r["data"]["timestamp"]) for r in live] == [("sample", 30.0)]
    header = json.loads(channel.header(2))
    assert header["stream"]["cluster"] == "prod" and header["stream"]["history"] == 2
    assert header["cluster"] == INFO.to_json()
    assert hub.describe()["clusters"][0]["viewers"] == 1
    channel.unsubscribe(subscriber)
    assert hub.load().viewers == 0


def test_a_viewer_too_far_behind_is_dropped_not_held(monkeypatch):
    monkeypatch.setattr(viewstream, "BACKLOG_LINES", 3)
    subscriber = Subscriber([])
    for _ in range(3):
        subscriber.offer(b"x\n", 1)
    assert not subscriber.dropped
    subscriber.offer(b"x\n", 1)
    assert subscriber.dropped and not subscriber.lines


@contextlib.asynccontextmanager
async def serving(core: WatchCore, token: str, settings: StreamSettings | None = None):
    """A view server on loopback (port 0) serving ``core``, closed on the way out."""
    hub = ViewHub(settings)
    hub.watch(core, INFO)
    server = ViewServer(hub, "127.0.0.1", 0, token)
    await server.start()
    try:
        yield server
    finally:
        await server.close()


@contextlib.asynccontextmanager
async def reading(feed: StreamFeed):
    """``feed`` reading its stream in a task (yielded), cancelled on the way out."""
    task = asyncio.create_task(feed.run())
    try:
        yield task
    finally:
        task.cancel()


def token_in(tmp_path, token: str, name: str = "token"):
    path = tmp_path / name
    path.write_text(f"{token}\n")
    return path


async def test_a_viewer_takes_history_then_live_samples_and_judges_as_the_collector(tmp_path):
    token_file = token_in(tmp_path, "sesame")
    thresholds = Thresholds(unanswered_seconds_critical=7.5)
    core = WatchCore(None, store=SessionStore(), thresholds=thresholds, cluster="prod",
                     facts=ClusterFacts(lab_limit=2 << 30))
    core.take(version(100.0))
    async with serving(core, "sesame", StreamSettings(thresholds, Cadences())) as server:
        reach = Collector(server.url, token_file)
        clusters, settings = await collector_clusters(reach)
        assert [c.name for c in clusters] == ["prod"] and clusters[0].info == INFO
        assert settings.thresholds == thresholds
        feed = StreamFeed(reach, clusters[0], settings)
        viewer = attach_core(feed)
        async with reading(feed):
            await asyncio.wait_for(feed.live.wait(), 10)
            assert [s.timestamp for s in viewer.store.history("version")] == [100.0]
            assert viewer.thresholds == thresholds
            assert viewer.facts.memory_limit == MemoryLimit(2 << 30, LimitOrigin.LAB)
            assert feed.describe(100.5).startswith(f"ATTACHED {server.url}")
            core.take(version(101.0, minor="38"))
            await async_wait_for(lambda: len(viewer.store.history("version")) == 2, timeout=10,
                                 message="the live sample at the viewer")
            assert viewer.store.latest_of(VersionSample) == version(101.0, minor="38")


async def test_a_wrong_token_is_one_line_exit_3_and_the_feed_follows_a_new_token_file(tmp_path):
    token_file = token_in(tmp_path, "old")
    async with serving(WatchCore(None, store=SessionStore(), cluster="prod"), "new") as server:
        reach = Collector(server.url, token_file)
        with pytest.raises(AttachError, match="refused the token") as refused:
            await collector_clusters(reach)
        assert refused.value.exit_code == 3 and "\n" not in str(refused.value)
        lines: list[str] = []
        clusters, _ = await collector_clusters(Collector(server.url, token_in(tmp_path, "new", "right")))
        feed = StreamFeed(reach, clusters[0])
        feed.status_listeners.append(lines.append)
        async with reading(feed):
            await async_wait_for(lambda: feed.failed_tries >= 1, timeout=10, message="a refused try")
            assert not feed.connected and "refused the token" in feed.describe(0.0)
            token_file.write_text("new\n")  # the collector restarted with a new token: the file is read again
            await asyncio.wait_for(feed.live.wait(), 15)
            assert feed.connected


async def test_an_unreachable_collector_is_one_line_exit_3(tmp_path):
    from crdscope.lab.controlplane import free_port

    with pytest.raises(AttachError, match="cannot reach the collector") as gone:
        await collector_clusters(Collector(f"http://127.0.0.1:{free_port()}", token_in(tmp_path, "t")))
    assert gone.value.exit_code == 3


async def test_a_paused_viewer_holds_samples_and_resuming_delivers_them_at_once(tmp_path):
    core = WatchCore(None, store=SessionStore(), cluster="prod")
    async with serving(core, "sesame") as server:
        reach = Collector(server.url, token_in(tmp_path, "sesame"))
        clusters, settings = await collector_clusters(reach)
        feed = StreamFeed(reach, clusters[0], settings)
        viewer = attach_core(feed)
        async with reading(feed):
            await asyncio.wait_for(feed.live.wait(), 10)
            feed.pause()
            core.take(version(200.0))
            await async_wait_for(lambda: feed.newest == 200.0, timeout=10, message="the sample read while paused")
            assert viewer.store.latest_of(VersionSample) is None  # held: the screen stays still
            feed.resume()
            await async_wait_for(lambda: viewer.store.latest_of(VersionSample) is not None, timeout=10,
                                 message="the held sample delivered on resume")


async def test_an_unreadable_token_file_is_tried_again_not_the_end_of_the_viewer(tmp_path):
    token_file = token_in(tmp_path, "sesame")
    async with serving(WatchCore(None, store=SessionStore(), cluster="prod"), "sesame") as server:
        reach = Collector(server.url, token_file)
        clusters, settings = await collector_clusters(reach)
        token_file.write_text("")  # caught between a collector's truncation and its write
        feed = StreamFeed(reach, clusters[0], settings)
        async with reading(feed) as task:
            await async_wait_for(lambda: feed.failed_tries >= 1, timeout=10, message="a failed try")
            assert not task.done() and "is empty" in feed.last_error
            token_file.write_text("sesame\n")
            await asyncio.wait_for(feed.live.wait(), 15)
