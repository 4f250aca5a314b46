"""One judge per fact (issue 46 item 1), held behaviourally: a threshold changed in ``config.toml``
moves the event line, the finding and the panel's colour of its figure together.

One recording of a legacy-discovery cluster whose kubectl 1.24+ client model takes 8 s (a kubectl 1.30
on PATH walks it the same way) and whose OpenAPI backlog holds 30 CRDs.  With the default thresholds
(5 s, 50 CRDs) discovery is over budget and the backlog is not behind; with ``config.toml`` setting
10 s and 20 CRDs it is the other way round, and the headless replay's lines, its findings, the
TUI's findings and both panels' colours all say so.
"""

from __future__ import annotations

import asyncio
import io
import time
from pathlib import Path

import pytest

from crdscope.base.paths import config_file
from crdscope.base.samples.discovery import ClientModel, DiscoverySample
from crdscope.base.samples.openapi import OpenAPISample
from crdscope.base.settings import load_settings
from crdscope.findings.model import Severity
from crdscope.session.recorder import ClusterInfo, Recorder
from crdscope.session.replay import read_recording
from tests.helpers import async_wait_for
from tests.tui.conftest import fake_kubectl, shown

CLUSTER = ClusterInfo(server="https://10.9.8.7:6443", context="one-judge", kubernetes_version="v1.25.16")
KUBECTL_124_SECONDS = 8.0
BACKLOG = 30


@pytest.fixture
def kubectl_130(tmp_path, monkeypatch):
    """A kubectl 1.30 first on PATH (50 QPS, burst 300: the kubectl 1.24+ client model)."""
    return fake_kubectl(tmp_path, monkeypatch, "v1.30.14")


@pytest.fixture
def recording(tmp_path):
    start = time.time() - 60
    path = tmp_path / "one-judge.jsonl"
    models = (ClientModel("client-go default", 5.0, 10, 40.0, 38.0),
              ClientModel("kubectl >=1.24", 50.0, 300, KUBECTL_124_SECONDS, 1.0))
    with Recorder(path, CLUSTER) as rec:
        for i in range(4):
            t = start + 10 * i
            rec(DiscoverySample(timestamp=t, mode="legacy", format="legacy", group_versions=120, resources=600,
                                requests=122, seconds=0.9, client_models=models))
            rec(OpenAPISample(timestamp=t + 1, v3_paths=120, backlog=BACKLOG, backlog_oldest_seconds=5.0))
    return read_recording(path)


def configure(discovery_seconds_warn: float | None, openapi_backlog_warn: int | None, home: Path,
              monkeypatch: pytest.MonkeyPatch) -> None:
    """Write ``[thresholds]`` to a config.toml of this test's own (None: the default): not the session's
    XDG config, which every later test of the worker would read (a report test judged by 10 s did)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    lines = ["[thresholds]"]
    if discovery_seconds_warn is not None:
        lines.append(f"discovery_seconds_warn = {discovery_seconds_warn}")
    if openapi_backlog_warn is not None:
        lines.append(f"openapi_backlog_warn = {openapi_backlog_warn}")
    config_file().parent.mkdir(parents=True, exist_ok=True)
    config_file().write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(("discovery_warn", "backlog_warn", "discovery_over", "backlog_behind"), [
    (None, None, True, False),  # defaults: 8 s > 5 s; 30 < 50 CRDs
    (10.0, 20, False, True),    # config.toml: 8 s <= 10 s; 30 >= 20 CRDs
])
async def test_a_threshold_in_config_toml_moves_every_front_end(recording, kubectl_130, discovery_warn, backlog_warn,
                                                                discovery_over, backlog_behind, tmp_path, monkeypatch):
    from crdscope.session.headless import replay_headless
    from crdscope.tui.panels.discovery import DiscoveryPanel
    from crdscope.tui.panels.openapi import OpenAPIPanel
    from crdscope.tui.replay_bar import build_replay_app

    configure(discovery_warn, backlog_warn, tmp_path / "config", monkeypatch)

    # The headless replay: its event lines and its findings.
    out = io.StringIO()
    core = await asyncio.to_thread(replay_headless, recording, speed=0, out=out)
    printed = out.getvalue()
    findings = {finding.id: finding for finding in core.open_findings()}
    assert ("discovery over budget: kubectl 1.24+ would take 8.0 s" in printed) is discovery_over, printed
    assert findings["kubectl-discovery"].severity is (Severity.WARNING if discovery_over else Severity.INFO)
    assert ("(slow)" in findings["kubectl-discovery"].title) is discovery_over
    assert ("OpenAPI backlog growing: 30 CRDs" in printed) is backlog_behind, printed
    assert ("openapi-behind" in findings) is backlog_behind

    # The TUI on the same recording and config.toml: its findings and both panels' colours.
    app = build_replay_app(recording, speed=0, layout="tabs", settings=load_settings())
    async with app.run_test(size=(160, 50)) as pilot:
        await async_wait_for(lambda: app.feed.finished.is_set() and app.session.kubectl is not None,
                             timeout=20, message="the replay's end, the local kubectl known")
        await async_wait_for(lambda: "kubectl-discovery" in {f.id for f in app.session.current_findings()},
                             timeout=20, message="the kubectl finding in the TUI")
        tui = {finding.id: finding for finding in app.session.current_findings()}
        assert tui["kubectl-discovery"].severity is findings["kubectl-discovery"].severity
        assert ("openapi-behind" in tui) is backlog_behind
        screen = app.screen
        models = shown(screen, DiscoveryPanel).query_one("#discovery-models")
        await async_wait_for(lambda: "kubectl >=1.24" in str(models.content), timeout=10, message="the models drawn")
        row = next(line for line in str(models.content).splitlines() if line.startswith("kubectl >=1.24"))
        assert ("$probe-warn" in row) is discovery_over, models.content
        summary = shown(screen, OpenAPIPanel).query_one("#openapi-summary")
        await async_wait_for(lambda: "backlog" in str(summary.content), timeout=10, message="the backlog drawn")
        assert (f"[$probe-warn]{BACKLOG}[/]" in str(summary.content)) is backlog_behind, summary.content
        await pilot.pause()
