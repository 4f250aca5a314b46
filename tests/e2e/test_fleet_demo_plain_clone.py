"""`make demo FLEET=1` from a plain clone: the seed's demo told end to end (issue 48 item 4), expected 20-35 minutes.

A clone of this checkout's HEAD with nothing beside it (no ../shared: the provider is ``synthetic:800``)
and its venv (tests/e2e/test_plain_clone.py's), the real cache (XDG_CACHE_HOME kept: Kubernetes 1.26
and 1.37 and Crossplane come built, the packages too when an earlier run built them), a lab home of
the test's; ``make demo FLEET=1`` typed into a shell in tmux, its screen read with capture-pane.  The
demo must tell the whole story on the oldest and newest released minors: the provider installed into
both labs through their Crossplane, the capped 1.26 lab past 80% of its cap, OOM-killed and restarted
by the lab's supervisor, the crash loop's finding naming the OOM kill, the 1.37 lab installed within
its memory; then ``q``.

Its narration is read where the demo keeps it (the notes it wrote into the 1.26 lab's recording) and
its figures checked against the recorded samples: a line about the 1.26 lab is said on the health
sample that moved it, so its percentage and CRDs are that sample's and the inventory's before it;
the other lab's figures are those of its latest health sample taken before the line, or of the one
before when the latest was still being taken (a scrape in flight).  The same recordings are then
replayed (``crdscope demo --replay --recording ...``'s app, at full speed) and every figure the
replay's narrator states is checked against the replayed stores when it is said (the CI version of
this check runs on the shipped recording: tests/tui/test_fleet_replay.py).

Marked slow (`make soak` or ``-m slow``: not in make test, whose plain-clone test already takes about
20 minutes); run alone under the e2e lock.  Not yet run to its end with Crossplane v2.4.2 (the 1.26
cap, 4.5 GiB, was sized with v2.0: bench/results/demo-cap-20261207/README.md); its time is to be
recorded in bench/RESULTS.md when it has.  It prints how long the story took and the recordings it made.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from crdscope.base.samples.health import HealthSample
from crdscope.base.samples.inventory import InventorySample
from crdscope.tui.format import number, size
from tests.e2e.test_plain_clone import make_plain_clone, screen, tmux
from tests.helpers import wait_for

#: Not measured yet: make demo CROSSPLANE=1 from a plain clone takes about 20 minutes on 2 cores, and
#: the crash loop's finding needs three restarts within 10 minutes after the first kill.
DEMO_TIMEOUT_SECONDS = 45 * 60
pytestmark = [pytest.mark.lab, pytest.mark.slow, pytest.mark.timeout(DEMO_TIMEOUT_SECONDS + 600)]

NEAR = re.compile(r"^demo-126 at (?P<pct>\d+)% of its cap with (?P<crds>[\d,]+) CRDs; (?P<other>.*)$")
KILLED = re.compile(r"^demo-126 was OOM-killed by its cgroup at its (?P<cap>\S+) cap and restarted by the lab's "
                    r"supervisor \(it reloads every CRD and may be killed again\); (?P<other>.*)$")
HOLDS = re.compile(r"^demo-137 holds (?P<crds>[\d,]+) CRDs in (?P<rss>\S+)(, (?P<mib>[\d.]+) MiB per CRD)?$")


def latest_before(samples: list, kind: type, t: float, back: int = 0):
    """The ``back``-th latest sample of ``kind`` taken before ``t`` (0: the latest)."""
    found = [s for s in samples if isinstance(s, kind) and s.timestamp <= t and not s.error]
    return found[-1 - back] if len(found) > back else None


def other_lab_said(text: str, samples: list, t: float) -> None:
    """``demo-137 holds N CRDs in X`` as of its latest health sample before ``t`` (or the one before it)."""
    said = HOLDS.match(text)
    assert said, text
    shown = []
    for back in (0, 1):
        health = latest_before(samples, HealthSample, t, back)
        inventory = latest_before(samples, InventorySample, t, back)
        if health is None or inventory is None:
            continue
        shown.append((number(inventory.crds), size(health.rss_bytes),
                      f"{health.mib_per_crd:.2f}" if health.mib_per_crd else None))
    assert (said["crds"], said["rss"], said["mib"]) in shown or (said["rss"], said["mib"]) in [s[1:] for s in shown], \
        (text, shown)


def test_make_demo_fleet_tells_the_whole_story_from_a_plain_clone(tmp_path: Path):
    from crdscope.lab.binaries import cached_binaries, versions_for
    from crdscope.session.replay import read_recording
    from crdscope.toolchain import crossplane as toolchain_crossplane
    from crdscope.tui.fleet_demo import CROSSPLANE_MEMORY_LIMIT

    if toolchain_crossplane.cached_binaries() is None or not all(cached_binaries(versions_for(m)) for m in ("1.26", "1.37")):
        pytest.skip("Kubernetes 1.26 and 1.37 and Crossplane are not all built (make lab-binaries; lab build --kubernetes 1.26)")
    clone = make_plain_clone(tmp_path)
    lab_home = tmp_path / "lab-home"
    env = {"CRDSCOPE_LAB_HOME": str(lab_home),
           **{k: os.environ[k] for k in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME")
              if k in os.environ}}
    env_all = {**os.environ, **env}
    crdscope = clone / ".venv" / "bin" / "crdscope"
    recordings = Path(os.environ["XDG_DATA_HOME"]) / "crdscope" / "recordings"
    before = set(recordings.glob("*.jsonl")) if recordings.exists() else set()
    socket = tmp_path / "tmux.sock"
    started = time.monotonic()
    seen: list[str] = []
    try:
        done = tmux(socket, "new-session", "-d", "-x", "200", "-y", "50", "-s", "demo", "-c", str(clone),
                    *(f"-e{k}={v}" for k, v in env.items()), "bash --norc --noprofile")
        assert done.returncode == 0, done.stderr
        tmux(socket, "send-keys", "-t", "demo", "make demo FLEET=1", "Enter")

        def story_told() -> bool:
            text = screen(socket)
            seen.append(text)
            if re.search(r"make: \*\*\*|^crdscope: |Traceback", text, re.MULTILINE):
                pytest.fail(f"the demo stopped:\n{text}")
            return "crash-looping" in text and "the end (" in "".join(seen[-200:])

        wait_for(story_told, timeout=DEMO_TIMEOUT_SECONDS, interval=3,
                 message="the end of the story and the crash loop's finding on screen")
        told_after = time.monotonic() - started
        final = screen(socket)
        tmux(socket, "send-keys", "-t", "demo", "q")
        wait_for(lambda: screen(socket, history=True).count("the lab is still running") >= 2, timeout=120,
                 message="the monitor to quit and say both labs are up")
        after = tmux(socket, "capture-pane", "-p", "-J", "-t", "demo", "-S", "-").stdout
    finally:
        tmux(socket, "kill-server")
        for name in ("demo-126", "demo-137"):
            with contextlib.suppress(Exception):
                subprocess.run([str(crdscope), "lab", "down", "--name", name], env=env_all, capture_output=True,
                               timeout=300)

    # Before the monitor: nothing left to build, the generated provider said, the packages ready.
    assert "no ../shared/crds/provider-gcp.tar.xz beside the checkout" in after, after[:3000]
    assert after.count("already built") >= 2 and "to build from Go modules" not in after
    # After it: each lab's findings, and where each was recorded.
    assert re.search(r"findings of demo-126 \(\d+\): .*crash-looping, OOM-killed", after), after[-4000:]
    assert "findings of demo-137" in after
    # On screen at the end: the compare table's restarts row counts the 1.26 lab's.
    restarts = re.search(r"^\s*restarts\s+(\d+)\s+(\d+)", final, re.MULTILINE)
    assert restarts and int(restarts.group(1)) >= 1 and int(restarts.group(2)) == 0, final

    # The narration, as the demo kept it (notes in the capped lab's recording), against the recorded samples.
    made = sorted(set(recordings.glob("*.jsonl")) - before)
    assert len(made) == 2, made
    old, new = sorted((read_recording(p) for p in made), key=lambda r: r.cluster.kubernetes_version)
    assert old.cluster.kubernetes_version.startswith("v1.26.") and new.cluster.kubernetes_version.startswith("v1.37.")
    said = [note.line for note in old.notes]
    near = next(n for n in old.notes if NEAR.match(n.line))
    killed = next(n for n in old.notes if KILLED.match(n.line))
    end = next(n for n in old.notes if n.kind == "end")
    assert near.timestamp < killed.timestamp < end.timestamp
    assert "demo-126 installed" not in end.line and "demo-137 installed" in end.line
    for stage in ("1/4", "2/4", "3/4", "4/4"):
        assert any(line.startswith(f"demo-137: {stage}") for line in said), said
    nearly = NEAR.match(near.line)
    health = latest_before(old.samples, HealthSample, near.timestamp)
    assert int(nearly["pct"]) == round(100 * health.rss_bytes / CROSSPLANE_MEMORY_LIMIT) >= 80, (near.line, health)
    assert nearly["crds"] == number(latest_before(old.samples, InventorySample, near.timestamp).crds)
    other_lab_said(nearly["other"], new.samples, near.timestamp)
    assert KILLED.match(killed.line)["cap"] == size(CROSSPLANE_MEMORY_LIMIT)
    other_lab_said(KILLED.match(killed.line)["other"], new.samples, killed.timestamp)
    oom = latest_before(old.samples, HealthSample, killed.timestamp)
    assert oom.restarts >= 1 and oom.oom_kills >= 1
    # The 1.37 lab installed every CRD within the cap the 1.26 lab crossed.
    peak = max(s.rss_bytes for s in new.samples if isinstance(s, HealthSample) and s.rss_bytes)
    assert peak < CROSSPLANE_MEMORY_LIMIT, size(peak)
    # The same recordings replayed (demo --replay --recording ...): the replay's narrator reads the figures
    # again from the replayed samples, each checked against the replayed stores when said.
    from tests.tui.test_fleet_replay import replay_checking_figures

    replayed, checked = asyncio.run(replay_checking_figures(made, timeout=300))
    assert len(checked) == 2 and any("crash-looping, OOM-killed" in line for line in replayed), replayed
    print(f"\nthe story told {told_after / 60:.1f} min after `make demo FLEET=1`; 1.37 peaked at {size(peak)} "
          f"({peak / CROSSPLANE_MEMORY_LIMIT:.0%} of the cap); narration:\n  " + "\n  ".join(said))
    for path in made:
        print(f"recording: {path} ({path.stat().st_size / 2**20:.1f} MiB)")
