"""The HTML report of a real recorded session, opened in headless Chromium (Debian's package).

A session is recorded against the lab while CRDs are loaded (so every chart has data),
``crdscope report FILE --format html`` writes the page, and Chromium loads it over the
DevTools protocol: no console error or exception, every chart drawn (a non-empty SVG
with the series its legend names), and a full-page PNG kept beside the test's files
(its path is printed: look at it).
"""

from __future__ import annotations

import base64
import itertools
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import wait_for

pytestmark = [pytest.mark.lab]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
#: What each chart of a session with a load must show: title -> series its legend names.
EXPECTED_CHARTS = {
    "CRDs installed": ["CRDs"],
    "Discovery seconds": ["measured"],
    "APF rejections": ["rejected/s"],
    "OpenAPI backlog": ["backlog"],
    "Resident memory against CRDs": ["RSS"],
}


def crdscope(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "crdscope.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout)


class DevTools:
    """Just enough of the Chrome DevTools protocol: commands, and the events they cause."""

    def __init__(self, url: str) -> None:
        import websocket

        self.socket = websocket.create_connection(url, timeout=60, suppress_origin=True)
        self.ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        ident = next(self.ids)
        message: dict[str, Any] = {"id": ident, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        self.socket.send(json.dumps(message))
        while True:
            answer = json.loads(self.socket.recv())
            if answer.get("id") == ident:
                if "error" in answer:
                    raise AssertionError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self.events.append(answer)

    def wait_event(self, method: str, deadline: float = 60) -> dict[str, Any]:
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            for event in self.events:
                if event.get("method") == method:
                    return event
            self.events.append(json.loads(self.socket.recv()))
        raise AssertionError(f"no {method} within {deadline}s")


@pytest.fixture
def browser(tmp_path: Path):
    if CHROMIUM is None:
        pytest.fail("chromium is not installed (lab/system-deps.sh installs it)")
    profile = tmp_path / "chromium-profile"
    process = subprocess.Popen(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--remote-debugging-port=0",
         f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    port_file = profile / "DevToolsActivePort"
    try:
        wait_for(lambda: port_file.exists() and len(port_file.read_text().splitlines()) >= 2, timeout=60,
                 message="chromium's DevTools port")
        port, path = port_file.read_text().splitlines()[:2]
        tools = DevTools(f"ws://127.0.0.1:{port}{path}")
        yield tools
        tools.socket.close()
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def record_a_session_with_a_load(lab, path: Path) -> None:
    """A headless session recorded while synthetic CRDs are loaded, then cleaned."""
    cluster = ["--kubeconfig", lab.kubeconfig, "--context", lab.admin_context]
    watcher = subprocess.Popen([sys.executable, "-m", "crdscope.cli.main", "watch", "--headless", *cluster,
                                "--duration", "75s", "--record", str(path)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: path.exists() and path.stat().st_size > 0, timeout=60, message="the recording to start")
        loaded = crdscope("load", "synthetic:60", "--rate", "4", *cluster)
        assert loaded.returncode == 0, loaded.stderr
        _, err = watcher.communicate(timeout=180)
        assert watcher.returncode == 0, err
    finally:
        if watcher.poll() is None:
            watcher.kill()
        crdscope("clean", "--yes", *cluster)


CHARTS_JS = """
Array.from(document.querySelectorAll('svg.chart')).map(svg => {
  const box = svg.getBoundingClientRect();
  return {
    title: (svg.querySelector('text.title') || {}).textContent || svg.querySelector('title').textContent,
    width: box.width, height: box.height,
    empty: svg.querySelector('text.empty') !== null,
    legend: Array.from(svg.querySelectorAll('text.legend')).map(t => t.textContent),
    lines: Array.from(svg.querySelectorAll('polyline.line')).map(p => ({
      cls: p.getAttribute('class'), points: p.points.numberOfItems,
      stroke: getComputedStyle(p).stroke, length: p.getTotalLength()})),
    dots: svg.querySelectorAll('circle.dot').length,
  };
})
"""


def test_html_report_renders_in_chromium(lab, browser: DevTools, tmp_path: Path):
    recording = tmp_path / "session.jsonl"
    record_a_session_with_a_load(lab, recording)
    page_file = tmp_path / "report.html"
    done = crdscope("report", str(recording), "--format", "html", "--output", str(page_file))
    assert done.returncode == 0, done.stderr

    target = browser.send("Target.createTarget", url="about:blank")["targetId"]
    session = browser.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
    for domain in ("Page", "Runtime", "Log"):
        browser.send(f"{domain}.enable", session)
    browser.send("Emulation.setDeviceMetricsOverride", session, width=1000, height=800, deviceScaleFactor=1,
                 mobile=False)
    browser.send("Page.navigate", session, url=page_file.as_uri())
    browser.wait_event("Page.loadEventFired")

    charts = browser.send("Runtime.evaluate", session, expression=CHARTS_JS, returnByValue=True)["result"]["value"]
    height = browser.send("Runtime.evaluate", session, expression="document.documentElement.scrollHeight",
                          returnByValue=True)["result"]["value"]
    shot = browser.send("Page.captureScreenshot", session, format="png", captureBeyondViewport=True,
                        clip={"x": 0, "y": 0, "width": 1000, "height": height, "scale": 1})
    png = tmp_path / "report.png"
    png.write_bytes(base64.b64decode(shot["data"]))
    print(f"\nreport screenshot: {png}\nreport page: {page_file}")

    problems = [e for e in browser.events if e.get("method") == "Runtime.exceptionThrown"
                or (e.get("method") == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "assert"))
                or (e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")]
    assert problems == []
    assert png.stat().st_size > 10_000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    by_title = {chart["title"]: chart for chart in charts}
    assert set(EXPECTED_CHARTS) <= set(by_title), sorted(by_title)
    for title, series in EXPECTED_CHARTS.items():
        chart = by_title[title]
        assert not chart["empty"], f"{title}: no data"
        assert chart["width"] > 300 and chart["height"] > 100, (title, chart)
        for name in series:
            assert name in chart["legend"], (title, chart["legend"])
        drawn = [line for line in chart["lines"] if line["points"] >= 2 and line["stroke"] not in ("none", "")]
        assert drawn or chart["dots"] >= 2, (title, chart)
    # The load shows: the CRD count rises by the 60 loaded.
    crds = by_title["CRDs installed"]["lines"][0]
    assert crds["length"] > 0
