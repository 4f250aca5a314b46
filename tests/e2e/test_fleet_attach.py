"""A fleet collector attached (issue 46 item 6): ``watch --headless --context A --context B --serve-view``
over two real labs (the session's and a named one), and ``crdscope attach``'s monitor on it through
Textual's Pilot.

The viewer opens on the fleet screen with a row per cluster.  B's API server is stopped (SIGSTOP):
"not answering" opens on B's row only, within 2 s of the collector opening it; the collector's time
of opening is its own, read from the finding record of its stream (the time it evaluated the sample
that opened it), and the viewer's is when its fleet row first shows the finding.  A's row and A's
stream open nothing meanwhile.  After B is resumed the finding closes on the viewer too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from bench.common import stop_process
from tests.e2e.test_fleet_exporter import lab_b  # noqa: F401 - the fixture, used by name
from tests.e2e.test_view import free_port
from tests.faults.helpers import spawn
from tests.helpers import async_wait_for, wait_for

pytestmark = pytest.mark.lab

NOT_ANSWERING = "apiserver-not-answering"
#: How much later than the collector the viewer may show a finding (the issue's bound).
WITHIN_SECONDS = 2.0


class FleetCollector:
    """``crdscope watch --headless --serve-view`` over two contexts of one merged KUBECONFIG."""

    def __init__(self, tmp_path: Path, kubeconfigs: list[str], contexts: list[str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.token_file = tmp_path / "token"
        self.token_file.write_text("a-test-token-of-the-fleet-collector\n")
        self.lines = tmp_path / "collector.txt"
        flags = [arg for context in contexts for arg in ("--context", context)]
        self.process = spawn("watch", "--headless", "--duration", "15m", "--no-record", *flags,
                             "--serve-view", f"127.0.0.1:{self.port}", "--token-file", str(self.token_file),
                             env={"KUBECONFIG": os.pathsep.join(kubeconfigs)}, stdout=open(self.lines, "w"),
                             stderr=subprocess.STDOUT)
        wait_for(lambda: "serving the view on" in self.text() or self.process.poll() is not None, timeout=90,
                 message="the fleet collector serving")
        assert self.process.poll() is None, self.text()

    def text(self) -> str:
        return self.lines.read_text() if self.lines.exists() else ""


class CollectorStream:
    """One cluster's stream read as a reader of the collector (``curl``), keeping when each finding
    opened by the collector's clock: the ``timestamp`` of its finding record."""

    def __init__(self, collector: FleetCollector, cluster: str) -> None:
        self.collector, self.cluster = collector, cluster
        self.opened: dict[str, float] = {}
        self.live = asyncio.Event()

    async def read(self) -> None:
        token = self.collector.token_file.read_text().strip()
        async with (httpx.AsyncClient(base_url=self.collector.url, timeout=httpx.Timeout(10, read=60)) as client,
                    client.stream("GET", "/v1/stream", params={"cluster": self.cluster},
                                  headers={"Authorization": f"Bearer {token}"}) as response):
            assert response.status_code == 200
            async for line in response.aiter_lines():
                record = json.loads(line)
                if record.get("type") == "live":
                    self.live.set()
                elif record.get("type") == "finding" and record["data"]["change"] == "opened":
                    self.opened.setdefault(record["data"]["finding"]["id"], float(record["data"]["timestamp"]))


def rows(app) -> dict[str, str]:
    """The fleet screen's table, one line per cluster, keyed by the cluster's name."""
    from crdscope.tui.screens.fleet import FleetScreen
    from tests.tui.conftest import widget_text

    screen = app.screen
    if not isinstance(screen, FleetScreen):
        return {}
    names = [row.name for row in screen.rows]
    table = widget_text(screen.query_one("#fleet-table")).splitlines()[1:]
    return dict(zip(names, table, strict=False))


def shows_not_answering(row: str) -> bool:
    return "critical: API server" in row


async def test_the_fleet_screen_of_a_viewer_shows_a_stopped_clusters_finding_on_its_row_only(
        lab, lab_b, tmp_path):  # noqa: F811 - lab_b is the imported fixture
    from crdscope.session.attach import Collector as Reach, collector_clusters
    from crdscope.tui.app import CrdscopeApp
    from crdscope.tui.launch import attached_sessions

    a, b = lab.admin_context, lab_b.admin_context
    collector = FleetCollector(tmp_path, [lab.kubeconfig, lab_b.kubeconfig], [a, b])
    streams = {name: CollectorStream(collector, name) for name in (a, b)}
    reading = [asyncio.create_task(stream.read()) for stream in streams.values()]
    try:
        reach = Reach(collector.url, collector.token_file)
        clusters, settings = await collector_clusters(reach)
        assert sorted(c.name for c in clusters) == sorted((a, b))
        app = CrdscopeApp(settings=None, sessions=attached_sessions(reach, clusters, settings), kubectl=None)
        async with app.run_test(size=(220, 40)):
            # Both rows, each with the version its own lab's probe read through the collector.
            await async_wait_for(lambda: (seen := rows(app)).keys() == {a, b} and all("v1." in r for r in seen.values()),
                                 timeout=120, interval=0.2, message="both clusters' rows with their versions")
            await async_wait_for(lambda: all(s.live.is_set() for s in streams.values()), timeout=60,
                                 message="the collector's streams live")
            assert not any(shows_not_answering(row) for row in rows(app).values()), rows(app)

            await asyncio.to_thread(lab_b.lab.stop, "apiserver")
            stopped = time.time()
            try:
                shown = await async_wait_for(lambda: shows_not_answering(rows(app).get(b, "")) and time.time(), timeout=60,
                                             interval=0.05, message="B's row showing the finding")
                seen_rows = rows(app)
                opened = await async_wait_for(lambda: streams[b].opened.get(NOT_ANSWERING), timeout=30,
                                              message="the collector's finding record")
            finally:
                await asyncio.to_thread(lab_b.lab.start, "apiserver")
            assert not shows_not_answering(seen_rows[a]), seen_rows
            assert NOT_ANSWERING not in streams[a].opened, streams[a].opened
            print("\n" + "\n".join(seen_rows.values()))
            print(f"collector opened {opened - stopped:.1f} s after the stop; the viewer's row showed it "
                  f"{shown - opened:.2f} s after the collector")
            assert shown - opened <= WITHIN_SECONDS, (opened, shown)
            # B resumed: the finding closes on the viewer, and A's row never showed it.
            await async_wait_for(lambda: not shows_not_answering(rows(app).get(b, "critical: API server")), timeout=60,
                                 interval=0.2,
                                 message="B's row clear again")
            assert not shows_not_answering(rows(app)[a]), rows(app)
        assert f"{b}: " in collector.text() and "finding opened" in collector.text()
    finally:
        for task in reading:
            task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.gather(*reading, return_exceptions=True)
        stop_process(collector.process)
