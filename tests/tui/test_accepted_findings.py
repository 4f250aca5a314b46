"""An accepted finding (``[[silence]]``) on screen, from the recorded freeze: the header does not turn
critical, the strip and the findings screen show it accepted with its until and why; the same
acceptance lapsed before the freeze pages as before."""

from __future__ import annotations

from crdscope.base.silences import Silence
from crdscope.tui.header import ClusterHeader
from crdscope.tui.panels.findings import FindingsView
from crdscope.tui.screens.findings import FindingsScreen
from tests.tui.conftest import widget_text
from tests.tui.test_findings_screen import frozen_samples, open_findings  # noqa: F401 - the fixture, by name
from tests.tui.test_snapshots import make_app, settle

#: 2036-01-01T00:00:00Z, long after the recording.
LATER = 2082758400.0


def accepting(samples: list, until: float, *kinds: str):
    app = make_app(samples)
    app.session.core.accept(tuple(Silence(kind, "*", until, "planned freeze, OPS-7")
                                  for kind in ("apiserver-not-answering", *kinds)))
    return app


async def test_an_accepted_critical_finding_is_shown_but_does_not_page(frozen_samples, utc):  # noqa: F811
    app = accepting(frozen_samples, LATER)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        header = app.monitor_screen.query_one(ClusterHeader)
        strip = app.monitor_screen.query_one("#findings-strip", FindingsView)
        header.redraw()
        assert not header.has_class("critical") and "CRITICAL" not in header.markup()
        assert not strip.has_class("critical") and strip.display
        text = widget_text(strip)
        assert "accepted" in text and "planned freeze, OPS-7" in text and "2036-01-01T00:00:00Z" in text, text
        # The warning that pages is listed first; the accepted critical after it.
        findings = app.session.current_findings()
        assert findings[0].pages and not findings[-1].pages, findings
        await open_findings(pilot)
        screen = app.screen
        assert isinstance(screen, FindingsScreen)
        for _ in findings[:-1]:
            await pilot.press("down")
            await pilot.pause()
        details = widget_text(screen.query_one("#finding-details"))
        assert "Accepted until 2036-01-01T00:00:00Z" in details and "planned freeze, OPS-7" in details, details


async def test_with_every_open_finding_accepted_nothing_pages(frozen_samples, utc):  # noqa: F811
    app = accepting(frozen_samples, LATER, "latency-slo")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        header = app.monitor_screen.query_one(ClusterHeader)
        strip = app.monitor_screen.query_one("#findings-strip", FindingsView)
        header.redraw()
        strip.redraw()
        findings = app.session.current_findings()
        assert len(findings) >= 2 and not any(f.pages for f in findings)
        assert findings[0].severity.value == "critical"  # the worst is first, accepted as the rest
        assert not header.has_class("critical") and "CRITICAL" not in header.markup()
        assert "warning(s)" not in header.markup()
        assert not strip.has_class("critical") and "do:" not in widget_text(strip)


async def test_a_lapsed_acceptance_pages_as_before(frozen_samples, utc):  # noqa: F811
    app = accepting(frozen_samples, min(s.timestamp for s in frozen_samples))
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        header = app.monitor_screen.query_one(ClusterHeader)
        header.redraw()
        assert header.has_class("critical") and "CRITICAL" in header.markup()
        assert all(f.pages for f in app.session.current_findings())
