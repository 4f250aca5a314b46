"""`crdscope demo --replay` from a plain clone (issue 48 item 5): the shipped demo told again with no lab and no build.

A presenter whose machine cannot build: a clone of this checkout's HEAD with nothing beside it and
its venv (tests/e2e/test_plain_clone.py's), a shell in tmux whose PATH has neither ``go`` nor
``kubectl``, an empty XDG_CACHE_HOME (no ~/.cache/crdscope: no binary, no package) and a lab home
of its own.  ``crdscope demo --replay --speed 60`` must open the compare screen on the recorded labs,
tell the story (the 1.26 lab's OOM kill, the end, the crash loop) and reach the recording's end in
well under a minute; then ``q``.  Afterwards nothing was built, cached or started: the cache and the
lab home are as empty as before, and no process of the test's remains.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.test_plain_clone import make_plain_clone, screen, tmux
from tests.helpers import wait_for

ROOT = Path(__file__).resolve().parents[2]
SPEED = 60
#: The shipped demo lasts about 20 minutes: at 60x a third of a minute, plus reading it (seconds).
REPLAY_SECONDS = 120

pytestmark = [pytest.mark.skipif(not list((ROOT / "tui" / "data" / "fleet-demo").glob("*.jsonl.xz")),
                                 reason="the shipped demo recording is not in this tree"),
              pytest.mark.timeout(600)]


def bare_path(tmp_path: Path) -> str:
    """A PATH of a few shell tools: no go, no kubectl (and nothing else a lab would start)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "sh", "env", "ls", "cat"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    return str(bin_dir)


def test_demo_replay_tells_the_shipped_story_with_no_go_no_kubectl_and_no_cache(tmp_path: Path):
    clone = make_plain_clone(tmp_path)
    cache, lab_home = tmp_path / "cache", tmp_path / "lab-home"
    cache.mkdir()
    path = bare_path(tmp_path)
    env = {"PATH": path, "XDG_CACHE_HOME": str(cache), "CRDSCOPE_LAB_HOME": str(lab_home),
           **{k: os.environ[k] for k in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME")}}
    check = subprocess.run(["bash", "-c", "command -v go kubectl || true"], env={**os.environ, "PATH": path},
                           capture_output=True, text=True)
    assert check.stdout.strip() == "", check.stdout  # the shell finds neither
    crdscope = clone / ".venv" / "bin" / "crdscope"
    socket = tmp_path / "tmux.sock"
    seen: list[str] = []
    try:
        done = tmux(socket, "new-session", "-d", "-x", "160", "-y", "50", "-s", "demo", "-c", str(clone),
                    *(f"-e{k}={v}" for k, v in env.items()), "/bin/bash --norc --noprofile")
        assert done.returncode == 0, done.stderr
        started = time.monotonic()
        tmux(socket, "send-keys", "-t", "demo", f"{crdscope} demo --replay --speed {SPEED}", "Enter")

        def told() -> bool:
            text = screen(socket)
            seen.append(text)
            if re.search(r"^crdscope: |Traceback", text, re.MULTILINE):
                pytest.fail(f"the replay stopped:\n{text}")
            return "recording ends here" in text

        wait_for(told, timeout=REPLAY_SECONDS, interval=0.5, message="the replay's last line")
        took = time.monotonic() - started
        final = screen(socket)
        tmux(socket, "send-keys", "-t", "demo", "q")
        wait_for(lambda: re.search(r"[$#]\s*$", screen(socket).rstrip() + " "), timeout=60,
                 message="the shell's prompt after q")
        after = tmux(socket, "capture-pane", "-p", "-J", "-t", "demo", "-S", "-").stdout
    finally:
        tmux(socket, "kill-server")

    everything = "\n".join(seen)
    assert "REPLAY 60x" in everything and "compared with" in everything  # the compare screen, said to be a replay
    assert "OOM-killed" in everything and "the end (" in everything
    assert "crash-looping" in everything
    restarts = re.search(r"restarts\s+(\d+)\s+(\d+)", final)
    assert restarts and int(restarts.group(1)) >= 1, final  # the recorded 1.26 lab's restarts, on screen
    assert "crdscope:" not in after and "Traceback" not in after, after[-3000:]
    print(f"\nthe shipped demo replayed at {SPEED}x to its end in {took:.1f}s")
    # Nothing built, cached or started.
    assert not any(cache.iterdir()), list(cache.rglob("*"))[:10]
    assert not lab_home.exists() or not any(lab_home.rglob("state.json"))
    leftover = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True).stdout.split()
    assert leftover == [], leftover
