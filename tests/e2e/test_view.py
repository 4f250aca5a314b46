"""One collector, many viewers (issue 40), against a real lab, tmux and Chromium.

* A collector (``watch --headless --serve-view``) on a lab of the test's own; three viewers: ``crdscope
  attach`` in tmux, the same monitor in-process through Textual's Pilot, and a browser page served by
  ``crdscope serve-web`` in headless Chromium.  The lab's API server is stopped (SIGSTOP): each viewer
  shows "API server not answering" within 2 s of the others.
* A wrong token is refused with one line (exit 3), the page without its token is a 401.
* The server's own ``apiserver_request_total`` over 60 s is the same (within 5%) with 0 and 3 viewers.
* A viewer survives the collector restarting: it says it lost it, then that it is back.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from bench.common import scrape_metrics, stop_process
from tests.conftest import ROOT
from tests.e2e.test_report_browser import DevTools, browser  # noqa: F401 - the fixture, used by name
from tests.faults.helpers import OWNED, spawn
from tests.helpers import async_wait_for, elapse, wait_for

pytestmark = pytest.mark.lab

TITLE = "API server not answering"
CRDSCOPE = [sys.executable, "-m", "crdscope.cli.main"]
#: Every WebSocket's bytes (the terminal's output) kept as text, for the test to read.
CAPTURE_JS = """
window.__crdscopeText = '';
const NativeSocket = window.WebSocket;
window.WebSocket = function (url, protocols) {
  const socket = protocols === undefined ? new NativeSocket(url) : new NativeSocket(url, protocols);
  const decoder = new TextDecoder();
  socket.addEventListener('message', (event) => {
    if (event.data instanceof ArrayBuffer) {
      window.__crdscopeText += decoder.decode(new Uint8Array(event.data), {stream: true});
    }
  });
  return socket;
};
window.WebSocket.prototype = NativeSocket.prototype;
"""


def free_port() -> int:
    from crdscope.lab.controlplane import free_port as lab_free_port

    return lab_free_port()


class Collector:
    """``crdscope watch --headless --serve-view`` on a lab, its lines in a file."""

    def __init__(self, lab, tmp_path: Path, port: int | None = None, token_file: Path | None = None, *,
                 config: str = "", metrics_port: int | None = None, allow_control: bool = False) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.token_file = token_file or tmp_path / "token"
        if token_file is None:
            self.token_file.write_text("a-test-token-of-the-collector\n")
        self.lines = tmp_path / f"collector-{time.monotonic_ns()}.txt"
        # The lab is found as a user's is (its home), for its supervisor's account and its faults.
        env = {"CRDSCOPE_LAB_HOME": str(lab.lab.home)}
        if config:
            home = tmp_path / "collector-config"
            (home / "crdscope").mkdir(parents=True, exist_ok=True)
            (home / "crdscope" / "config.toml").write_text(config)
            env["XDG_CONFIG_HOME"] = str(home)
        metrics = ["--serve-metrics", f"127.0.0.1:{metrics_port}"] if metrics_port else []
        if allow_control:
            metrics.append("--allow-control")
        self.process = spawn("watch", "--headless", "--duration", "15m", "--no-record", *metrics,
                             "--serve-view", f"127.0.0.1:{self.port}", "--token-file", str(self.token_file),
                             "--kubeconfig", lab.kubeconfig, "--context", lab.admin_context, env=env,
                             stdout=open(self.lines, "w"), stderr=subprocess.STDOUT)
        wait_for(lambda: "serving the view on" in self.text() or self.process.poll() is not None, timeout=60,
                 message="the collector serving")
        assert self.process.poll() is None, self.text()

    def text(self) -> str:
        return self.lines.read_text() if self.lines.exists() else ""

    def stop(self) -> None:
        stop_process(self.process)


def serve_web(collector: Collector, port: int, lines: Path) -> subprocess.Popen:
    with open(lines, "w") as out:
        return subprocess.Popen([*CRDSCOPE, "serve-web", f"127.0.0.1:{port}", "--attach", collector.url,
                                 "--token-file", str(collector.token_file)], cwd=ROOT, stdout=out,
                                stderr=subprocess.STDOUT)


def tmux(socket: Path, *args: str) -> str:
    return subprocess.run(["tmux", "-S", str(socket), *args], capture_output=True, text=True, timeout=30).stdout


def attach_args(collector: Collector, *more: str) -> list[str]:
    return [*CRDSCOPE, "attach", collector.url, "--token-file", str(collector.token_file), *more]


def requests_served(lab) -> float:
    """The sum of the lab's ``apiserver_request_total`` (every verb, resource and code)."""
    from prometheus_client.parser import text_string_to_metric_families

    pki = Path(lab.state.run_dir) / "pki"
    tls = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    tls.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
    answer = httpx.get(f"{lab.server}/metrics", verify=tls, timeout=30)
    answer.raise_for_status()
    return sum(s.value for family in text_string_to_metric_families(answer.text) if family.name == "apiserver_request"
               for s in family.samples if s.name == "apiserver_request_total")


@pytest.mark.alone  # three viewers within 2 s of each other: another test's CPU would be measured too
async def test_three_viewers_show_the_same_finding_within_two_seconds(fresh_lab, tmp_path, browser):  # noqa: F811
    if not shutil.which("tmux"):
        pytest.fail("tmux is required: make system-deps")
    from crdscope.session.attach import Collector as Reach, collector_clusters
    from crdscope.tui.app import CrdscopeApp
    from crdscope.tui.header import ClusterHeader
    from crdscope.tui.launch import attached_sessions
    from tests.tui.conftest import widget_text

    collector = Collector(fresh_lab, tmp_path)
    socket = tmp_path / "tmux.sock"
    web_port = free_port()
    web = serve_web(collector, web_port, tmp_path / "web.txt")
    try:
        tmux(socket, "new-session", "-d", "-x", "200", "-y", "50", "-s", "viewer",
             " ".join(attach_args(collector, "--no-record")))
        # The page without its token: refused, no app started.
        wait_for(lambda: _status(f"http://127.0.0.1:{web_port}/") == 401, timeout=60, message="serve-web answering")
        token = collector.token_file.read_text().strip()
        page = browser.send("Target.createTarget", url="about:blank")["targetId"]
        tab = browser.send("Target.attachToTarget", targetId=page, flatten=True)["sessionId"]
        browser.send("Page.enable", tab)
        browser.send("Runtime.enable", tab)
        browser.send("Emulation.setDeviceMetricsOverride", tab, width=1600, height=1000, deviceScaleFactor=1,
                     mobile=False)
        browser.send("Page.addScriptToEvaluateOnNewDocument", tab, source=CAPTURE_JS)
        browser.send("Page.navigate", tab, url=f"http://127.0.0.1:{web_port}/?token={token}")

        def page_text() -> str:
            return browser.send("Runtime.evaluate", tab, expression="window.__crdscopeText || ''",
                                returnByValue=True)["result"].get("value", "")

        clusters, settings = await collector_clusters(Reach(collector.url, collector.token_file))
        app = CrdscopeApp(settings=None, sessions=attached_sessions(Reach(collector.url, collector.token_file),
                                                                   clusters, settings), kubectl=None)
        async with app.run_test(size=(200, 50)):
            def pilot_text() -> str:
                return widget_text(app.screen.query_one(ClusterHeader))

            viewers = {"tmux": lambda: tmux(socket, "capture-pane", "-p", "-t", "viewer"),
                       "pilot": pilot_text, "browser": page_text}

            async def read(name: str) -> str:
                return viewers[name]() if name == "pilot" else await asyncio.to_thread(viewers[name])

            async def all_attached() -> bool:
                return all(["ATTACHED" in await read(name) for name in viewers])

            await async_wait_for(all_attached, timeout=90, interval=0.2, message="three viewers attached")
            shot = browser.send("Page.captureScreenshot", tab, format="png")
            (tmp_path / "browser.png").write_bytes(base64.b64decode(shot["data"]))
            print(f"\nthe browser's page: {tmp_path / 'browser.png'}")
            for name in viewers:
                assert TITLE not in await read(name), name

            seen: dict[str, float] = {}
            fresh_lab.lab.stop("apiserver")
            stopped = time.monotonic()
            try:
                async def every_viewer_shows() -> bool:
                    for name in viewers:
                        if name not in seen and TITLE in await read(name):
                            seen[name] = time.monotonic()
                    return len(seen) == len(viewers)

                await async_wait_for(every_viewer_shows, timeout=60, interval=0.1,
                                     message=f"{TITLE} on every viewer (seen so far: {seen})")
            finally:
                fresh_lab.lab.start("apiserver")
        print("\nshown after the stop: " + ", ".join(f"{k} {v - stopped:.1f} s" for k, v in sorted(seen.items())))
        assert max(seen.values()) - min(seen.values()) <= 2.0, seen
        assert "finding opened" in collector.text() and TITLE in collector.text()
    finally:
        tmux(socket, "kill-server")
        stop_process(web)
        collector.stop()


def _status(url: str) -> int | None:
    try:
        return httpx.get(url, timeout=5).status_code
    except httpx.HTTPError:
        return None


def test_a_wrong_token_is_refused_with_one_line(lab, tmp_path):
    collector = Collector(lab, tmp_path)
    try:
        wrong = tmp_path / "wrong"
        wrong.write_text("not-the-token\n")
        done = subprocess.run([*CRDSCOPE, "attach", collector.url, "--token-file", str(wrong), "--headless"],
                              capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert done.returncode == 3, done
        assert done.stderr.strip().count("\n") == 0 and "refused the token" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr + done.stdout
        assert _status(f"{collector.url}/v1/stream") == 401
        gone = subprocess.run([*CRDSCOPE, "attach", f"http://127.0.0.1:{free_port()}", "--token-file",
                               str(collector.token_file), "--headless"], capture_output=True, text=True, timeout=60)
        assert gone.returncode == 3 and "cannot reach the collector" in gone.stderr, gone
        assert gone.stderr.strip().count("\n") == 0
    finally:
        collector.stop()


#: Every probe every 2 s, busy or idle, and the legacy walk only at start: about 200 requests a minute
#: in steady cadences, so that the probes' own phases (a run more or less in a window) weigh about 1%,
#: not the 5% the comparison allows (at the default idle cadences, about 28 a minute, one run of a
#: 2-minute probe inside a window or not is 4%).
STEADY = "[cadences]\n" + "".join(f"{name} = 2.0\n{name}_idle = 2.0\n" for name in
                                    ("version", "discovery", "throttling", "openapi", "health", "latency")) \
    + "discovery_legacy = 3600.0\n"


def test_requests_to_the_api_server_stay_flat_with_three_viewers(fresh_lab, tmp_path):
    from crdscope.probes.registry import monitor_probes
    from tests.e2e.test_rules_prometheus import probes_up

    metrics_port = free_port()
    collector = Collector(fresh_lab, tmp_path, config=STEADY, metrics_port=metrics_port)
    viewers: list[subprocess.Popen] = []
    try:
        # Past the start-up reads (the CRD list, the first legacy walk, every probe once).
        wait_for(lambda: set(monitor_probes()) <= probes_up(scrape_metrics(metrics_port)), timeout=120,
                 message="every probe of the collector up")
        elapse(5, "the cadences settling in")
        counts = {}
        for label, viewer_count in (("none", 0), ("three", 3)):
            viewers = [subprocess.Popen(attach_args(collector, "--headless", "--no-record"), cwd=ROOT,
                                        stdout=open(tmp_path / f"viewer-{label}-{n}.txt", "w"),
                                        stderr=subprocess.STDOUT) for n in range(viewer_count)]
            wait_for(lambda count=viewer_count: _viewers(collector) == count, timeout=60,
                     message=f"{viewer_count} viewers connected")
            before = requests_served(fresh_lab)
            elapse(60, "a minute of requests")
            counts[label] = requests_served(fresh_lab) - before
            for viewer in viewers:
                stop_process(viewer)
            for n in range(viewer_count):  # each viewer attached and took samples, then was stopped
                assert "attached to" in (tmp_path / f"viewer-{label}-{n}.txt").read_text()
        print(f"\nrequests the API server served in 60 s: {counts}")
        assert counts["none"] > 0
        assert abs(counts["three"] - counts["none"]) <= 0.05 * counts["none"], counts
    finally:
        for viewer in viewers:
            stop_process(viewer)
        collector.stop()


def _viewers(collector: Collector) -> int | None:
    try:
        answer = httpx.get(f"{collector.url}/v1/clusters", timeout=5,
                           headers={"Authorization": f"Bearer {collector.token_file.read_text().strip()}"})
        return sum(c["viewers"] for c in json.loads(answer.text)["clusters"])
    except (httpx.HTTPError, ValueError, KeyError):
        return None


def test_a_viewer_follows_the_collector_through_a_restart(lab, tmp_path):
    collector = Collector(lab, tmp_path)
    lines = tmp_path / "viewer.txt"
    viewer = subprocess.Popen(attach_args(collector, "--headless", "--no-record"), cwd=ROOT,
                              stdout=open(lines, "w"), stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: _viewers(collector) == 1, timeout=60, message="the viewer connected")
        collector.stop()
        wait_for(lambda: "collector lost" in lines.read_text(), timeout=30, message="the viewer saying so")
        collector = Collector(lab, tmp_path, port=collector.port, token_file=collector.token_file)
        wait_for(lambda: "collector back" in lines.read_text(), timeout=60, message="the viewer back")
        assert viewer.poll() is None, lines.read_text()
        assert "Traceback" not in lines.read_text()
    finally:
        stop_process(viewer)
        collector.stop()


def test_a_read_only_collector_refuses_control(lab, tmp_path):
    collector = Collector(lab, tmp_path)
    try:
        answer = httpx.post(f"{collector.url}/v1/control", json={"loader": "start", "source": "synthetic:3"},
                            headers={"Authorization": f"Bearer {collector.token_file.read_text().strip()}"})
        assert answer.status_code == 403 and "read-only" in answer.json()["error"]
        assert lab.kubectl_json("get", "crd", "-l", OWNED)["items"] == []
    finally:
        collector.stop()


async def test_with_allow_control_a_viewer_loads_cleans_and_faults_through_the_collector(fresh_lab, tmp_path):
    """The actions the attached monitor offers (its loader and palette call these objects), against the
    collector's real loader and lab: CRDs created with crdscope's label, their progress back on the
    stream, cleaned, and the lab's API server stopped and started."""
    from crdscope.base.samples.loader import LoaderSample
    from crdscope.base.settings import LoaderSettings
    from crdscope.session.attach import Collector as Reach, StreamFeed, attach_core, collector_clusters
    from crdscope.session.control import RemoteFaults, RemoteLoader

    collector = Collector(fresh_lab, tmp_path, allow_control=True)
    reach = Reach(collector.url, collector.token_file)
    clusters, settings = await collector_clusters(reach)
    assert settings.allow_control
    feed = StreamFeed(reach, clusters[0], settings)
    core = attach_core(feed)
    reading = asyncio.create_task(feed.run())
    said: list[str] = []
    try:
        await asyncio.wait_for(feed.live.wait(), 30)
        loader = RemoteLoader(reach, clusters[0].name, core, LoaderSettings(), notify=said.append)
        loader.configure("synthetic:5", "burst", 0.0, 4)
        await loader.run()
        assert said and "loader started on the collector" in said[-1], said
        done = await async_wait_for(lambda: (s := core.store.latest_of(LoaderSample)) and s.state == "done" and s,
                                    timeout=120, message="the collector's load done, seen by the viewer")
        assert done.established == 5
        owned = fresh_lab.kubectl_json("get", "crd", "-l", OWNED)["items"]
        assert len(owned) == 5
        plan = await loader.clean_plan()
        assert sorted(plan.names) == sorted(o["metadata"]["name"] for o in owned)
        line = await loader.clean(plan)
        assert line.startswith("clean: deleted 5 CRDs"), line
        assert fresh_lab.kubectl_json("get", "crd", "-l", OWNED)["items"] == []

        faults = RemoteFaults(reach, clusters[0].name)
        pid = await asyncio.to_thread(faults.stop, "apiserver")
        assert isinstance(pid, int) and pid > 0
        await asyncio.to_thread(faults.start, "apiserver")
        fresh_lab.kubectl("get", "--raw", "/readyz")
    finally:
        reading.cancel()
        collector.stop()


async def test_an_attached_monitor_loads_through_a_collector_that_allows_control(fresh_lab, tmp_path):
    """The viewer's ``l`` key: the loader's set-up, then the collector loads its lab; the progress comes
    back on the stream into the viewer's loader panel, and the CRDs are on the lab (kubectl)."""
    from crdscope.base.settings import LoaderSettings, Settings
    from crdscope.session.attach import Collector as Reach, collector_clusters
    from crdscope.tui.app import CrdscopeApp
    from crdscope.tui.launch import attached_sessions
    from crdscope.tui.screens.dialogs import ChoiceScreen
    from crdscope.tui.screens.loader_setup import LoaderSetupScreen
    from tests.tui.loader_dialogs import choose

    collector = Collector(fresh_lab, tmp_path, allow_control=True)
    try:
        reach = Reach(collector.url, collector.token_file)
        clusters, settings = await collector_clusters(reach)
        loader = LoaderSettings(source="synthetic:6", profile="burst", concurrency=4)
        app = CrdscopeApp(settings=Settings(loader=loader), kubectl=None,
                          sessions=attached_sessions(reach, clusters, settings, loader_settings=loader))
        async with app.run_test(size=(120, 40)) as pilot:
            await async_wait_for(lambda: app.store.last_good("version"), timeout=60, message="the stream")
            await pilot.press("l")
            await choose(pilot, ChoiceScreen, "Start")
            await async_wait_for(lambda: isinstance(app.screen, LoaderSetupScreen), timeout=10, message="the set-up")
            await pilot.press("ctrl+s")
            done = await async_wait_for(
                lambda: (s := app.store.latest("loader")) is not None and s.state == "done" and s,
                timeout=120, message="the collector's load, seen by the viewer")
        assert done.established == 6
        assert len(fresh_lab.kubectl_json("get", "crd", "-l", OWNED)["items"]) == 6
    finally:
        collector.stop()
