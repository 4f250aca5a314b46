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
        screen = app.monitor_screen
        header = screen.query_one(ClusterHeader)
        status, strip = screen.query_one("#header-findings", FindingsView), screen.query_one("#findings-strip",
                                                                                           FindingsView)
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
        screen = app.monitor_screen
        status, strip = screen.query_one("#header-findings", FindingsView), screen.query_one("#findings-strip",
                                                                                           FindingsView)
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
        await async_wait_for(lambda: not screen.query_one(ClusterHeader).has_class("critical"), timeout=5,
                             message="the header no longer critical")
        assert "CRITICAL" not in status.shown and f"{len(remaining)} warning(s)" in status.shown
        assert "API server not answering" not in strip.shown and remaining[0].title in strip.shown
        assert not strip.has_class("critical")
