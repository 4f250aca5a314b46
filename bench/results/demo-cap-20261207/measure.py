"""The fleet demo's 1.26 cap, sized again for Crossplane v2.4.2 (issue 48 item 4).

The demo's own code (tui.fleet_demo: prepare_demo, build_demo_app, the monitor headless) runs once
with the 1.26 lab capped so high it is never reached (--memory-limit 12Gi), with the plain clone's
provider (synthetic:800 through each lab's Crossplane, every kind activated), recorded.  Before the
monitor opens (Crossplane running, packages pushed, nothing installed) the API servers' RSS is read
from /proc for a minute: the idle server.  Then the recordings (the health probe's RSS, as the
monitor shows it) give each lab's RSS through the install: after the MRDs, and its peak.

    flock /tmp/crdscope-e2e.lock nice -n 5 .venv/bin/python bench/results/demo-cap-20261207/measure.py OUT
"""

import asyncio
import json
import sys
import time
from pathlib import Path

from crdscope.lab.controlplane import Lab
from crdscope.tui.fleet_demo import build_demo_app, lab_names, prepare_demo
from tests.helpers import async_wait_for

PREFIX = "capsize"
NEVER = 12 * 2**30
OUT = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/demo-cap")


def rss_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def idle(demo, seconds: float = 60.0) -> dict[str, int]:
    peaks: dict[str, int] = {}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for install in demo.installs:
            pid = install.lab.require().apiservers()[0].pid
            peaks[install.lab.name] = max(peaks.get(install.lab.name, 0), rss_of(pid))
        time.sleep(2)
    return peaks


async def run(app) -> list[str]:
    async with app.run_test(size=(160, 50)):
        await async_wait_for(lambda: app.ended, timeout=3600, interval=5, message="the demo's end")
        await asyncio.sleep(30)  # the end's findings (and a crash loop's) are said in the 30 s after
    for session in app.sessions:
        session.close_recorder()
    return app.narration


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    said: list[str] = []
    demo = prepare_demo("synthetic:800", prefix=PREFIX, memory_limit=NEVER, crossplane=True, say=said.append)
    figures = {"prepared": said, "idle_rss_bytes": idle(demo)}
    (OUT / "figures.json").write_text(json.dumps(figures, indent=1))
    app = build_demo_app(demo, record=str(OUT / "demo.jsonl"), layout="tabs")  # outside the loop: it asks /version
    figures["narration"] = asyncio.run(run(app))
    (OUT / "figures.json").write_text(json.dumps(figures, indent=1))
    for name in lab_names(PREFIX):
        Lab(name=name).down()


if __name__ == "__main__":
    main()
