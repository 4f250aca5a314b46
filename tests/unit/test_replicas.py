"""Several API servers behind one address: scrapes recorded from a two-replica lab (tests/data/ha).

The files are the process families of each replica's own /metrics (read on its own port):
``first-*`` and ``later-*`` from the two replicas a minute apart, ``restarted-apiserver-2`` after
``lab kill``/``lab start`` of replica 2; ``leases-before/after.json`` the identity Leases before and
after replica 1 was killed and started.  Expected figures are read from the files with a regular
expression, not through the parser under test.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, UTC
from pathlib import Path

import httpx
import pytest

from crdscope.connection.cluster import Cluster, ClusterConfig
from crdscope.probes.health import HealthProbe
from crdscope.probes.leases import LeaseReading, LeaseWatcher, parse_leases, parse_time
from crdscope.connection.metrics import MetricsSource, parse_text
from crdscope.probes.health_figures import ProcessGauges, scraped_gauges
from crdscope.probes.replicas import ReplicaTracker

DATA = Path(__file__).parent.parent / "data" / "ha"
SERVER = "https://lab.test"


def recorded(name: str) -> str:
    return (DATA / f"{name}.txt").read_text()


def figure(name: str, family: str) -> float:
    """A gauge's value as written in the recorded file."""
    match = re.search(rf"^{family} (\S+)$", recorded(name), re.MULTILINE)
    assert match, (name, family)
    return float(match.group(1))


def observe(tracker: ReplicaTracker, name: str, now: float, *, replicas: int | None = 2, crds: int | None = None) -> str:
    scrape = parse_text(recorded(name))
    figures = scraped_gauges(scrape)
    start = scrape.value("process_start_time_seconds")
    assert start is not None
    return tracker.observe(start, now, figures, replicas=replicas, crds=crds)


def test_the_recorded_replicas_are_two_processes():
    one = figure("first-apiserver", "process_start_time_seconds")
    two = figure("first-apiserver-2", "process_start_time_seconds")
    assert abs(one - two) > 1  # the premise of every test below
    assert figure("later-apiserver", "process_start_time_seconds") == one
    assert figure("restarted-apiserver-2", "process_start_time_seconds") > two


@pytest.mark.parametrize("replicas", [2, None], ids=["leases-say-two", "leases-unreadable"])
def test_alternating_scrapes_are_two_replicas_and_no_restart(replicas):
    tracker = ReplicaTracker()
    names = []
    for step, name in enumerate(["first-apiserver", "first-apiserver-2", "later-apiserver", "later-apiserver-2",
                                 "first-apiserver", "later-apiserver-2"]):
        names.append(observe(tracker, name, 100.0 + step, replicas=replicas))
    assert tracker.restarts == 0
    # (Without Leases the second process is named only once the first answers again.)
    assert names[2] == names[4] and names[3] == names[5] and names[2] != names[3]
    figures = {replica.name: replica for replica in tracker.figures()}
    assert len(figures) == 2
    # Each replica keeps its own memory: the one of its newest scrape.
    assert figures[names[4]].rss_bytes == int(figure("first-apiserver", "process_resident_memory_bytes"))
    assert figures[names[5]].rss_bytes == int(figure("later-apiserver-2", "process_resident_memory_bytes"))
    assert figures[names[5]].open_fds == int(figure("later-apiserver-2", "process_open_fds"))
    assert [r.answering for r in tracker.figures()].count(True) == 1


def test_a_replica_back_with_a_new_start_time_is_one_restart_of_that_replica():
    tracker = ReplicaTracker()
    one = observe(tracker, "first-apiserver", 100.0)
    two = observe(tracker, "first-apiserver-2", 101.0)
    for step in range(5):  # replica 2 is down: only replica 1 answers
        assert observe(tracker, "later-apiserver", 102.0 + step) == one
    assert observe(tracker, "restarted-apiserver-2", 110.0) == two
    for step in range(4):  # both answer again, in turns
        observe(tracker, "later-apiserver" if step % 2 else "restarted-apiserver-2", 111.0 + step)
    restarts = {replica.name: replica.restarts for replica in tracker.figures()}
    assert restarts == {one: 0, two: 1}
    assert tracker.restarts == 1
    restarted = next(r for r in tracker.figures() if r.name == two)
    assert restarted.start_time == figure("restarted-apiserver-2", "process_start_time_seconds")


def test_a_wrong_guess_of_which_replica_restarted_moves_to_the_silent_one():
    # CI saw this: replica 2 died and came back while no scrape happened to reach replica 1, so
    # replica 1 was the least recently seen and took the guess.  Its next answer proves the restart
    # was replica 2's: the count stays 1 and moves, and is never taken back down to 0.
    tracker = ReplicaTracker()
    one = observe(tracker, "first-apiserver", 100.0)
    two = observe(tracker, "first-apiserver-2", 101.0)
    guessed = observe(tracker, "restarted-apiserver-2", 110.0)
    assert guessed == one and tracker.restarts == 1  # the guess: least recently seen
    counts = [tracker.restarts]
    assert observe(tracker, "later-apiserver", 111.0) == one
    counts.append(tracker.restarts)
    for step in range(4):  # both answer again, in turns
        observe(tracker, "restarted-apiserver-2" if step % 2 == 0 else "later-apiserver", 112.0 + step)
        counts.append(tracker.restarts)
    assert counts == [1] * len(counts)
    replicas = {replica.name: replica for replica in tracker.figures()}
    assert set(replicas) == {one, two}
    assert (replicas[one].restarts, replicas[two].restarts) == (0, 1)
    assert replicas[one].start_time == figure("first-apiserver", "process_start_time_seconds")
    assert replicas[two].start_time == figure("restarted-apiserver-2", "process_start_time_seconds")
    # The figures the restarted process answered with went with it.
    assert replicas[two].rss_bytes == int(figure("restarted-apiserver-2", "process_resident_memory_bytes"))


def test_a_scrape_begun_before_the_restart_was_seen_takes_nothing_back():
    # A slow scrape of the replaced process can be delivered after its successor's: it is late, not
    # a sign that the "restarted" replica is another one.
    tracker = ReplicaTracker()
    one = observe(tracker, "first-apiserver", 100.0)
    two = observe(tracker, "first-apiserver-2", 101.0)
    observe(tracker, "later-apiserver", 105.0)
    assert observe(tracker, "restarted-apiserver-2", 110.0) == two
    assert observe(tracker, "first-apiserver-2", 108.0) == two  # began at 108, delivered late
    assert tracker.restarts == 1 and tracker.known == 2
    restarted = next(r for r in tracker.figures() if r.name == two)
    assert restarted.start_time == figure("restarted-apiserver-2", "process_start_time_seconds")
    assert observe(tracker, "later-apiserver", 111.0) == one


def test_without_leases_a_flip_back_takes_the_restart_back():
    tracker = ReplicaTracker()
    observe(tracker, "first-apiserver", 100.0, replicas=None)
    observe(tracker, "first-apiserver-2", 101.0, replicas=None)
    assert tracker.restarts == 1  # a single server as far as anyone knows: it looks like a restart
    observe(tracker, "later-apiserver", 102.0, replicas=None)
    assert tracker.restarts == 0 and tracker.known == 2


def test_fits_never_mix_replicas():
    tracker = ReplicaTracker()
    mib = float(1 << 20)
    # Replica a grows 2 MiB per CRD, replica b 5 MiB per CRD; their scrapes interleave.
    for crds in (100, 200, 300):
        tracker.observe(1000.0, crds, ProcessGauges(rss_bytes=500 * mib + 2 * mib * crds), replicas=2, crds=crds)
        tracker.observe(2000.0, crds + 1, ProcessGauges(rss_bytes=900 * mib + 5 * mib * crds), replicas=2, crds=crds)
    slopes = {round(r.start_time): r.mib_per_crd for r in tracker.figures()}
    assert slopes[1000] == pytest.approx(2.0)
    assert slopes[2000] == pytest.approx(5.0)


def test_leases_count_live_replicas_and_a_changed_holder_is_a_replacement():
    before = json.loads((DATA / "leases-before.json").read_text())
    after = json.loads((DATA / "leases-after.json").read_text())
    newest = max(parse_time(item["spec"]["renewTime"]) for item in after["items"])
    reading_before = LeaseReading(parse_leases(before, newest))
    reading_after = LeaseReading(parse_leases(after, newest))
    assert reading_before.live == reading_after.live == 2
    watcher = LeaseWatcher()
    watcher.observe(reading_before)
    watcher.observe(reading_after)
    assert (watcher.replacements, watcher.appeared) == (1, 0)
    # An hour without renewal: the replica is gone (its Lease is not yet collected).
    assert LeaseReading(parse_leases(after, newest + 3600)).live == 0
    assert LeaseReading(error="forbidden").live is None


class Server:
    """/metrics answers the recorded replicas in turns, as haproxy's round robin does."""

    def __init__(self, scrapes: list[str]) -> None:
        self.scrapes = scrapes
        self.served = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/metrics":
            text = recorded(self.scrapes[self.served % len(self.scrapes)])
            self.served += 1
            return httpx.Response(200, text=text)
        if path.endswith("/leases"):
            leases = json.loads((DATA / "leases-after.json").read_text())
            for item in leases["items"]:  # renewed just now, as by live API servers
                item["spec"]["renewTime"] = datetime.now(UTC).isoformat()
            return httpx.Response(200, json=leases)
        return httpx.Response(200, text="ok")


async def test_the_health_sample_lists_each_replica_and_keeps_its_keys():
    server = Server(["first-apiserver", "first-apiserver-2"])
    cluster = Cluster(ClusterConfig(server=SERVER, context="mock", user="mock", kubeconfig=()))
    await cluster.client.aclose()
    cluster.client = httpx.AsyncClient(base_url=SERVER, transport=httpx.MockTransport(server))
    metrics = MetricsSource(cluster)
    metrics.spread = cluster  # no second client in a unit test: the mock answers in turns anyway

    async def crds() -> tuple[int | None, str | None]:
        return 10, None

    probe = HealthProbe(cluster, metrics, crd_count=crds, cadence=0.0)
    samples = [await probe.run() for _ in range(4)]
    await cluster.client.aclose()
    last = samples[-1].to_json()
    for key in ("rss_bytes", "heap_bytes", "start_time", "restarts", "mib_per_crd", "fit_points", "unobservable"):
        assert key in last
    assert last["restarts"] == 0
    # The Leases count two: the first run scrapes again until both have answered (issue 27).
    assert [len(s.replicas) for s in samples] == [2, 2, 2, 2]
    assert server.served == 5  # one extra scrape, in the first run only
    assert {r["rss_bytes"] for r in last["replicas"]} == {
        int(figure("first-apiserver", "process_resident_memory_bytes")),
        int(figure("first-apiserver-2", "process_resident_memory_bytes"))}
    # The fourth run's own scrape is the fifth served: the first replica's (turns alternate).
    assert last["rss_bytes"] == int(figure("first-apiserver", "process_resident_memory_bytes"))
    assert last["replica"] == next(r["name"] for r in last["replicas"] if r["answering"])


class Flaky:
    """Raises ``error`` for the first ``failures`` requests, then answers 200."""

    def __init__(self, error: Exception, failures: int) -> None:
        self.error, self.failures, self.calls = error, failures, 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return httpx.Response(200, text="ok")


@pytest.mark.parametrize(("error", "failures", "ok", "calls"), [
    (httpx.RemoteProtocolError("Server disconnected without sending a response."), 1, True, 2),
    (httpx.ConnectError("All connection attempts failed"), 2, False, 2),
    (httpx.ReadTimeout("timed out"), 1, False, 1),
], ids=["broken-then-served", "down", "timeout-not-retried"])
async def test_readyz_on_a_broken_connection_is_tried_once_more(error, failures, ok, calls):
    from crdscope.probes.health_checks import health_check

    server = Flaky(error, failures)
    cluster = Cluster(ClusterConfig(server=SERVER, context="mock", user="mock", kubeconfig=()))
    await cluster.client.aclose()
    cluster.client = httpx.AsyncClient(base_url=SERVER, transport=httpx.MockTransport(server))
    result = await health_check(cluster, "readyz")
    await cluster.client.aclose()
    assert (result.ok, result.unreachable, server.calls) == (ok, not ok, calls)
