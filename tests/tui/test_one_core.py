"""Issue 25's done-when: one recording, every front end, the same open findings (kubectl's included).

The recording is made of constructed samples: a cluster with 400 group-versions whose discovery a
kubectl 1.23 (5 QPS, burst 100, a 10-minute cache) walks slowly, and an API server that stopped
answering.  A fake kubectl 1.23 on PATH is what every front end finds as "the local kubectl".
The TUI (Pilot), the headless replay, ``doctor``, the exporter and the report each open their
session core their own way; each must state the same open findings, and the kubectl one must
carry that kubectl's own cache TTL (10 minutes, not the 6 hours of a newer one).
"""

from __future__ import annotations

import io
import time

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from crdscope.base.samples.discovery import ClientModel, DiscoverySample
from crdscope.base.samples.responsiveness import ResponsivenessSample
from crdscope.base.samples.version import VersionSample
from crdscope.session.recorder import ClusterInfo, Recorder
from crdscope.session.replay import read_recording
from tests.helpers import async_wait_for
from tests.tui.conftest import fake_kubectl

CLUSTER = ClusterInfo(server="https://10.9.8.7:6443", context="prod-one-core", kubernetes_version="v1.29.4")
#: The findings the samples below must open, in every front end.
EXPECTED = {"kubectl-discovery", "apiserver-not-answering"}


@pytest.fixture
def kubectl_123(tmp_path, monkeypatch):
    """A kubectl 1.23 first on PATH: ``kubectl version --client -o json`` as the real one answers."""
    return fake_kubectl(tmp_path, monkeypatch, "v1.23.17")


@pytest.fixture
def recording(tmp_path):
    """Two minutes of a session ending with the server not answering for 20 s."""
    start = time.time() - 120
    path = tmp_path / "one-core.jsonl"
    models = (ClientModel("client-go <=1.23 (5/100)", 5.0, 100, 85.0, 80.0),
              ClientModel("client-go >=1.24 (50/300)", 50.0, 300, 9.0, 3.0))
    with Recorder(path, CLUSTER) as rec:
        rec(VersionSample(timestamp=start, server=CLUSTER.server, git_version="v1.29.4", major="1", minor="29"))
        for i in range(10):
            t = start + 10 * i
            rec(DiscoverySample(timestamp=t, mode="aggregated", format="v2", group_versions=400, resources=2400,
                                requests=2, seconds=0.2, cold_seconds=1.4, not_modified_total=i,
                                client_models=models))
            rec(ResponsivenessSample(timestamp=t + 1, unanswered_seconds=0.0))
        rec(ResponsivenessSample(timestamp=start + 110, unanswered_seconds=20.0, oldest_request="GET /readyz",
                                 oldest_request_seconds=20.0))
    return read_recording(path)


def ids(findings) -> set[str]:
    return {finding.id for finding in findings}


def kubectl_title(findings) -> str:
    return next(finding.title for finding in findings if finding.id == "kubectl-discovery")


async def test_every_front_end_states_the_same_open_findings(recording, kubectl_123, tmp_path):
    from crdscope.session.doctor import examine
    from crdscope.session.exporter import SampleCollector
    from crdscope.session.headless import replay_headless
    from crdscope.session.replay import ReplayFeed, replay_core
    from crdscope.session.report import summarise
    from crdscope.tui.replay_bar import build_replay_app

    # The TUI: the replay app, driven by Pilot; its header strip and findings screen read the core.
    app = build_replay_app(recording, speed=0, layout="tabs")
    async with app.run_test(size=(120, 40)) as pilot:
        await async_wait_for(lambda: app.feed.finished.is_set() and ids(app.session.current_findings()) == EXPECTED,
                             timeout=20, message="the replay's end with its findings")
        await pilot.pause()
        tui = app.session.current_findings()
        assert app.session.kubectl is not None and app.session.kubectl.git_version == "v1.23.17"

    # The headless replay (its own event loop, so in a thread): lines as the live watch prints them.
    import asyncio

    out = io.StringIO()
    headless_core = await asyncio.to_thread(replay_headless, recording, speed=0, out=out)
    headless = headless_core.open_findings()
    printed = out.getvalue()
    assert "finding opened: your kubectl v1.23.17" in printed and "API server not answering" in printed

    # The exporter, serving the headless core as `watch --headless --serve-metrics` does.
    collector = SampleCollector()
    collector.watch(headless_core, CLUSTER)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    scraped = generate_latest(registry).decode()
    exported = {line.split('finding="', 1)[1].split('"', 1)[0] for line in scraped.splitlines()
                if line.startswith("crdscope_finding_open{")}

    # doctor: its diagnosis of a core on the same recording, the local kubectl found as it finds it.
    doctor_core = replay_core(ReplayFeed(recording, speed=0))
    await doctor_core.learn_local_kubectl()
    diagnosis = await examine(doctor_core, CLUSTER, seconds=30)

    # The report of the recording file.
    summary = await asyncio.to_thread(summarise, recording.path)

    assert ids(tui) == ids(headless) == exported == ids(diagnosis.findings) == ids(summary.open_findings) == EXPECTED
    titles = {kubectl_title(found) for found in (tui, headless, diagnosis.findings, summary.open_findings)}
    assert len(titles) == 1
    assert "cache expires every 10 minutes" in titles.pop()  # kubectl 1.23's own TTL, not 6 hours
    assert diagnosis.exit_code == 2 and "v1.23.17" in diagnosis.kubectl
