"""Findings on screen, from a real freeze: the header and strip while the API server is stopped,
and the findings screen (key f) with each finding's evidence, cause and remedy.

``fixtures/frozen-apiserver.jsonl`` is a real session: ``crdscope watch --headless --record``
on a lab whose kube-apiserver was frozen with ``crdscope lab stop apiserver`` for 20 s.  The
samples are cut at the moment both findings were open: "API server not answering" (critical)
and the canary's p99 over its SLO (warning), found by running the findings engine over them.
"""

from __future__ import annotations

import pytest

from crdscope.findings.engine import FindingsEngine
from crdscope.base.settings import Settings
from crdscope.tui.screens.findings import FindingsScreen
from tests.tui.conftest import FIXTURES, widget_text
from tests.tui.test_snapshots import make_app, settle

FROZEN = FIXTURES / "frozen-apiserver.jsonl"


@pytest.fixture(scope="module")
def frozen_samples() -> list:
    """The recorded samples up to the first one after which two findings, one critical, are open."""
    from crdscope.session.replay import read_recording

    samples = list(read_recording(FROZEN).samples)
    engine = FindingsEngine(Settings().thresholds)
    for index, sample in enumerate(samples):
        engine.observe(sample)
        open_now = engine.current()
        if len(open_now) >= 2 and open_now[0].severity.value == "critical":
            return samples[: index + 1]
    raise AssertionError("the recording never had a critical and a second finding open together")


def expected_findings(samples: list) -> list:
    engine = FindingsEngine(Settings().thresholds)
    for sample in samples:
        engine.observe(sample)
    return engine.current()


async def open_findings(pilot) -> None:
    await settle(pilot)
    await pilot.press("f")
    await pilot.pause()


def test_header_and_strip_during_the_freeze(snap_compare, frozen_samples, utc):
    assert snap_compare(make_app(frozen_samples), terminal_size=(120, 30), run_before=settle)


def test_findings_screen_during_the_freeze(snap_compare, frozen_samples, utc):
    assert snap_compare(make_app(frozen_samples), terminal_size=(120, 36), run_before=open_findings)


async def test_each_finding_in_full_and_the_keys(frozen_samples, utc):
    expected = expected_findings(frozen_samples)
    app = make_app(frozen_samples)
    async with app.run_test(size=(120, 36)) as pilot:
        await open_findings(pilot)
        screen = app.screen
        assert isinstance(screen, FindingsScreen)
        details = screen.query_one("#finding-details")
        for position, finding in enumerate(expected):
            text = widget_text(details)
            # The whole verdict of the highlighted finding: title, every piece of evidence, cause, remedy.
            assert finding.title in text and finding.cause in text and finding.remedy in text, text
            assert all(item in text for item in finding.evidence), text
            assert finding.severity.value in text
            others = [f for f in expected if f.id != finding.id]
            assert not any(o.cause in text for o in others if o.cause != finding.cause)
            if position + 1 < len(expected):
                await pilot.press("down")
                await pilot.pause()
        # Closing returns to the monitor; the palette offers the same screen.
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, FindingsScreen)
        assert any(name.startswith("Findings") for name, _, _ in app.palette_commands())
        assert "f: evidence, cause, remedy" in widget_text(app.monitor_screen.query_one("#findings-strip"))


async def test_with_nothing_open_the_screen_says_so(recorded_samples, utc):
    app = make_app(recorded_samples)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        app.core.findings.open.clear()  # nothing open
        await pilot.press("f")
        await pilot.pause()
        text = widget_text(app.screen.query_one("#finding-details"))
        assert "no findings" in text
