"""The header's findings status and the strip are one widget bound to the monitor screen's findings
(issue 45): they draw what the core judged at its last sample, their clock only runs the ages, and
nothing reads the core's findings every second.

The samples are the recorded freeze (``fixtures/frozen-apiserver.jsonl``): the API server stops
answering (a critical finding whose evidence, the oldest request's age, grows with each sample),
then the canary's p99 goes over its SLO (a warning) and the API server answers again (the critical
one closes).
"""

from __future__ import annotations

import pytest

from crdscope.base.settings import Settings
from crdscope.findings.engine import FindingsEngine
from crdscope.findings.model import Finding, Severity, format_duration
from crdscope.session.replay import read_recording
from crdscope.tui.app import CrdscopeApp
from crdscope.tui.header import ClusterHeader
from crdscope.tui.panels.findings import FindingsView
from crdscope.tui.panels.text import word_widths
from crdscope.tui.screens.monitor import MonitorScreen
from tests.helpers import async_wait_for
from tests.tui.conftest import FIXTURES, ListFeed
from tests.tui.test_snapshots import KUBECTL

CRITICAL_ID = "apiserver-not-answering"


@pytest.fixture(scope="module")
def recorded() -> list:
    return list(read_recording(FIXTURES / "frozen-apiserver.jsonl").samples)


def opened_at(samples: list, finding_id: str) -> int:
    """The index of the sample after which ``finding_id`` is open (judged here, by a fresh engine)."""
    engine = FindingsEngine(Settings().thresholds)
    for index, sample in enumerate(samples):
        engine.observe(sample)
        if any(f.id == finding_id for f in engine.current()):
            return index
    raise AssertionError(f"{finding_id} never opened in the recording")


class Clock:
    """The feed's clock, moved by the test."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def app_over(samples: list, clock: Clock) -> CrdscopeApp:
    return CrdscopeApp(ListFeed(samples), clock=clock, layout="tabs", kubectl=KUBECTL)


def count_reads(app: CrdscopeApp) -> list[int]:
    """Count the reads of the cluster's open findings from now on (one entry per read)."""
    session = app.session
    read = session.current_findings
    reads: list[int] = []

    def counted() -> list[Finding]:
        reads.append(1)
        return read()

    session.current_findings = counted
    return reads


def take_until(core, clock: Clock, samples: list, start: int, condition, what: str) -> int:
    """Have ``core`` take ``samples`` from ``start`` on, the clock following them, until
    ``condition(taken)``; the index of the sample that met it."""
    for index in range(start, len(samples)):
        clock.now = samples[index].timestamp
        if condition(core.take(samples[index])):
            return index
    raise AssertionError(f"never: {what}")


def parts(app: CrdscopeApp) -> tuple[MonitorScreen, ClusterHeader, FindingsView, FindingsView]:
    """The monitor screen, its header, the header's findings status and the findings strip."""
    screen = app.monitor_screen
    return (screen, screen.query_one(ClusterHeader), screen.query_one("#header-findings", FindingsView),
            screen.query_one("#findings-strip", FindingsView))


async def played(pilot, count: int) -> None:
    app = pilot.app
    await async_wait_for(lambda: app.session.core.samples >= count, timeout=10, message="samples taken")
    await async_wait_for(lambda: app.monitor_screen.findings == tuple(app.session.core.open_findings()),
                         timeout=10, message="the screen told of the findings")


async def test_the_status_and_the_strip_draw_the_screens_findings_and_only_ages_tick(recorded):
    first = opened_at(recorded, CRITICAL_ID) + 1
    samples = recorded[:first]
    clock = Clock(samples[-1].timestamp + 2.0)
    app = app_over(samples, clock)
    async with app.run_test(size=(120, 30)) as pilot:
        await played(pilot, len(samples))
        screen, header, status, strip = parts(app)
        critical = screen.findings[0]
        assert critical.id == CRITICAL_ID and critical.severity is Severity.CRITICAL
        # One bound value, two forms of one widget: both show the critical finding and its age.
        await async_wait_for(lambda: status.findings == strip.findings == screen.findings, timeout=5,
                             message="the widgets bound to the screen's findings")
        age = format_duration(clock.now - critical.since)
        assert f"CRITICAL {age}: {critical.title}" in status.shown, status.shown
        assert f"critical {age}[/]  {critical.title}" in strip.shown, strip.shown
        assert header.has_class("critical") and strip.has_class("critical") and strip.display
        # The clock moves and no sample arrives: the ages run, the core's findings are not read.
        reads = count_reads(app)
        clock.now += 7.0
        later = format_duration(clock.now - critical.since)
        await async_wait_for(lambda: f"CRITICAL {later}" in status.shown and f"critical {later}" in strip.shown,
                             timeout=5, message=f"the ages at {later}")
        assert reads == [], "the clock read the core's findings"


async def test_a_judged_sample_reaches_both_forms_without_their_clock(recorded):
    first = opened_at(recorded, CRITICAL_ID) + 1
    clock = Clock(recorded[first - 1].timestamp)
    app = app_over(recorded[:first], clock)
    async with app.run_test(size=(120, 30)) as pilot:
        await played(pilot, first)
        screen, header, status, strip = parts(app)
        core = app.session.core
        shown = strip.shown

        def evidence_moved(taken) -> bool:
            worst = core.open_findings()[0]
            return worst.id == CRITICAL_ID and not taken.changes and worst.evidence[0] not in shown

        # The next samples change the open finding's evidence (the oldest request's age) without
        # opening or closing anything: the strip follows the core, sample by sample.
        at = take_until(core, clock, recorded, first, evidence_moved, "the open finding's evidence changed")
        evidence = core.open_findings()[0].evidence[0]
        await async_wait_for(lambda: evidence in strip.shown, timeout=5,
                             message=f"the new evidence in the strip ({evidence!r})")
        # Then the API server answers again: the critical finding closes, in both forms at once.
        take_until(core, clock, recorded, at + 1, lambda _taken: all(f.id != CRITICAL_ID for f in core.open_findings()),
                   "the critical finding closed")
        remaining = core.open_findings()
        assert remaining and remaining[0].severity is Severity.WARNING
        await async_wait_for(lambda: not header.has_class("critical"), timeout=5,
                             message="the header no longer critical")
        assert "CRITICAL" not in status.shown and f"{len(remaining)} warning(s)" in status.shown
        assert "API server not answering" not in strip.shown and remaining[0].title in strip.shown
        assert not strip.has_class("critical")


async def test_running_ages_repaint_without_laying_the_screen_out(recorded):
    """The header's and the strip's clock move their ages each second: while no age changes width
    ("21.0 s" to "22.0 s"), that repaints them and lays nothing out (a layout visits every widget of
    the screen; one a second per clock made key presses wait behind them, ``bench ui_latency``)."""
    first = opened_at(recorded, CRITICAL_ID) + 1
    samples = recorded[:first]
    engine = FindingsEngine(Settings().thresholds)
    for sample in samples:
        engine.observe(sample)
    since = next(f.since for f in engine.current() if f.id == CRITICAL_ID)
    clock = Clock(since + 20.5)  # the finding's age 20.5 s: two digits until 99 s
    app = app_over(samples, clock)
    async with app.run_test(size=(120, 30)) as pilot:
        await played(pilot, len(samples))
        screen, header, status, strip = parts(app)
        await async_wait_for(lambda: "CRITICAL 20.5 s" in status.shown, timeout=5, message="the first age")
        await pilot.pause()
        layouts: list[object] = []
        screen.screen_layout_refresh_signal.subscribe(screen, layouts.append)
        for step in range(1, 4):
            clock.now += 1.0
            age = format_duration(20.5 + step)
            await async_wait_for(lambda age=age: f"CRITICAL {age}" in status.shown and f"critical {age}" in strip.shown
                                 and f"CRITICAL {age}" in str(status.render()), timeout=5, message=f"the age {age}")
        chips = header.markup().split("\n")[1]
        await pilot.pause()
        assert layouts == [], f"{len(layouts)} layouts while ages ran ({chips})"


def test_word_widths_tell_when_a_text_needs_other_room():
    assert word_widths("[$probe-ok]●[/]ver 3s [b]x[/b]") == word_widths("[$probe-ok]●[/]ver 4s [b]y[/b]")
    assert word_widths("●ver 9s") != word_widths("●ver 10s")  # a wider word may wrap elsewhere
    assert word_widths("one line") != word_widths("one\nline")
    assert word_widths("") != word_widths("x")
