"""Huge and slow answers: a 100 MB ``/metrics``, a 10,000 group-version discovery, a byte a second.

A real API server will not produce these on demand, so a stand-in server
(``tests/faults/standin_server.py``, a subprocess on 127.0.0.1: its memory is
not the test's) serves them; crdscope's own code reads them exactly as it
reads a cluster (``Cluster`` -> shared client -> the probe).

Memory is Python's own allocations during the call (``tracemalloc`` peak),
which is what crdscope's code controls.

Proves: the shared scrape parses 100 MB while holding a bounded few MB (one
chunk and its lines, plus the families probes asked for); aggregated
discovery of 10,000 group-versions is decoded and reduced holding at most a
small multiple of the document (one decoded copy at a time); a server that
trickles one byte a second is cut off by the deadlines: the shared scrape
returns an error within its deadline, and the scheduler turns a probe that
cannot finish into an error sample within its deadline.
"""

from __future__ import annotations

import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from bench.common import stop_process
from crdscope.connection.cluster import Cluster, ClusterConfig
from crdscope.probes.discovery import DiscoveryProbe
from crdscope.probes.health import HEALTH_FAMILIES
from crdscope.connection.metrics import MetricsSource
from crdscope.probes.scheduler import Scheduler
from crdscope.probes.probe import Pacing, ProbeBase
from crdscope.probes.version import probe_version
from crdscope.base.samples.version import VersionSample
from tests.conftest import ROOT
from tests.helpers import wait_for

MIB = 1 << 20
#: The scrape keeps one 64 KB chunk, its decoded lines and the few wanted samples: 16 MiB is
#: a generous ceiling that is still a sixth of the answer (holding it would take 100 MB+).
SCRAPE_PEAK_BYTES = 16 * MIB
#: A decoded JSON document in Python takes about 5-8x its text (dicts, strings, lists); the
#: probe holds the body and one decoded copy, then its reduction: 12x the body bounds that,
#: while two decoded copies alive at once (or a pile of them) would exceed it.
DISCOVERY_PEAK_FACTOR = 12


def standin(mode: str, tmp_path: Path):
    """Start the stand-in server; returns (process, Cluster on it)."""
    port_file = tmp_path / f"{mode}.port"
    process = subprocess.Popen([sys.executable, "-m", "tests.faults.standin_server", mode, str(port_file)],
                               cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    port = wait_for(lambda: port_file.exists() and port_file.read_text().strip(), timeout=120,
                    message="the stand-in server listening")
    config = ClusterConfig(server=f"http://127.0.0.1:{port}", context="stand-in", user="", kubeconfig=())
    return process, Cluster(config)


async def peak_during(coroutine) -> tuple[object, int]:
    """Run ``coroutine``; return its result and the peak of Python allocations meanwhile."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        result = await coroutine
        return result, tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


async def test_a_100mb_metrics_and_a_10000_group_version_discovery_fit_in_memory(tmp_path):
    process, cluster = standin("big", tmp_path)
    try:
        source = MetricsSource(cluster, HEALTH_FAMILIES)
        scrape, scrape_peak = await peak_during(source.scrape())
        assert scrape.ok, scrape.error
        assert scrape.bytes >= 100 * 1000 * 1000 - 1000
        assert scrape.value("process_resident_memory_bytes") == 1.234e9 and scrape.value("go_goroutines") == 4321
        assert not scrape.has("apiserver_request_duration_seconds_bucket")  # not wanted: not kept

        probe = DiscoveryProbe(cluster)
        sample, discovery_peak = await peak_during(probe.observe("aggregated"))
        assert sample.error is None, sample.error
        assert sample.group_versions == 10000 + 1  # + core v1
        body = len((await cluster.client.get("/apis")).content)  # the document's size, measured apart
    finally:
        await cluster.aclose()
        stop_process(process, grace=10)
    print(f"\n/metrics {scrape.bytes / 1e6:.0f} MB in {scrape.seconds:.1f}s, peak {scrape_peak / MIB:.1f} MiB; "
          f"/apis {body / 1e6:.1f} MB ({sample.group_versions} GVs), peak {discovery_peak / MIB:.1f} MiB "
          f"({discovery_peak / body:.1f}x the document)")
    assert scrape_peak < SCRAPE_PEAK_BYTES
    assert discovery_peak < DISCOVERY_PEAK_FACTOR * body


@pytest.mark.alone  # a deadline held to within 2 s: another test's CPU would be measured too
async def test_a_server_sending_a_byte_a_second_is_cut_off(tmp_path):
    process, cluster = standin("trickle", tmp_path)
    try:
        # The shared scrape ends by its own deadline (read timeouts alone would never fire).
        source = MetricsSource(cluster, HEALTH_FAMILIES, deadline_seconds=5.0)
        started = time.monotonic()
        scrape = await source.scrape()
        took = time.monotonic() - started
        assert not scrape.ok and "did not finish within 5s" in scrape.error, scrape.error
        assert 5.0 <= took < 7.0, took

        # A probe that cannot finish becomes an error sample of its own type at its deadline.
        probe = TrickledVersion(cluster, deadline=4.0)
        scheduler = Scheduler([probe])
        started = time.monotonic()
        sample = await scheduler.run_probe_once(probe.name)
        took = time.monotonic() - started
        assert isinstance(sample, VersionSample) and "did not finish within 4s" in sample.error, sample
        assert 4.0 <= took < 6.0, took
    finally:
        await cluster.aclose()
        stop_process(process, grace=10)


class TrickledVersion(ProbeBase):
    """The version probe with a short deadline (the default is minutes)."""

    name = "version"
    pacing = Pacing(busy=30.0)

    def __init__(self, cluster: Cluster, deadline: float) -> None:
        self.cluster = cluster
        self.deadline = deadline

    async def run(self) -> VersionSample:
        return await probe_version(self.cluster)
