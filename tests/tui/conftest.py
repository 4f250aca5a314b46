"""Fixtures of the TUI tests: recorded lab samples, a feed that plays them, fixed clocks."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
#: A real session captured from the lab: the monitor running while the loader added 80 CRDs.
LAB_SESSION = FIXTURES / "lab-session.jsonl"


class ListFeed:
    """A feed that hands over a fixed list of samples, then idles (for deterministic renders)."""

    def __init__(self, samples: list) -> None:
        self.samples = list(samples)
        self.sinks: list = []
        self.paused = False
        self.delivered = asyncio.Event()
        self.context = "crdscope-lab"
        self.server = "https://127.0.0.1:6443"

    def add_sink(self, sink) -> None:
        self.sinks.append(sink)

    async def run(self) -> None:
        for sample in self.samples:
            for sink in self.sinks:
                sink(sample)
        self.delivered.set()
        await asyncio.Event().wait()

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False

    def now(self) -> float:
        return time.time()


@pytest.fixture(scope="session")
def recorded_samples() -> list:
    """The samples of the recorded lab session, rebuilt as sample objects."""
    from crdscope.session.replay import read_recording

    return list(read_recording(LAB_SESSION).samples)


@pytest.fixture
def utc():
    """Event times render in UTC, whatever the machine's zone."""
    saved = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    yield
    if saved is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = saved
    time.tzset()


def widget_text(widget) -> str:
    """The plain text of a widget and every Static inside it (what a person reads)."""
    from textual.widgets import Static

    statics = [widget] if isinstance(widget, Static) else []
    statics += list(widget.query(Static))
    return "\n".join(str(static.render()) for static in statics)


def shown(screen, cls):
    """Bring a panel's tab into view (as a person would, its number key) and return the panel.

    Panels behind inactive tabs do not draw (tui.panels.base): read a panel where it is shown.
    """
    from crdscope.tui.screens.monitor import PANELS

    screen.action_show_panel(PANELS.index(cls))
    return screen.panel(cls)


def status_text(panel) -> str:
    """A panel's first line: freshness, staleness, or its error."""
    return widget_text(panel.query_one(".panel-status"))


def fake_kubectl(directory: Path, monkeypatch, git_version: str) -> Path:
    """A kubectl first on PATH that answers ``kubectl version --client -o json`` as the real one of
    ``git_version`` (``v1.23.17``) does: what the TUI finds as "the local kubectl"."""
    import json

    major, minor = git_version.lstrip("v").split(".")[:2]
    bin_dir = directory / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "kubectl"
    answer = {"clientVersion": {"major": major, "minor": minor, "gitVersion": git_version}}
    fake.write_text(f"#!/bin/sh\necho '{json.dumps(answer)}'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return fake
