"""The health panel's memory line: the model's attribution from one CRD count, beside the live fit."""

from __future__ import annotations

from crdscope.base.samples.health import HealthSample
from crdscope.base.samples.version import VersionSample
from crdscope.tui.panels.health import fit_line, model_attribution

VERSION = VersionSample(major="1", minor="37", git_version="v1.37.2")


def test_one_crd_count_gets_the_models_attribution():
    sample = HealthSample(crds=2065, rss_bytes=9 * 2**30)
    modelled = model_attribution(sample, VERSION)
    assert modelled.startswith("CRDs ~ ") and modelled.endswith("GiB of 9.0 GiB RSS (model for 1.37)")
    line = fit_line(sample, modelled)
    assert "needs CRD counts that change" in line and modelled in line


def test_the_live_fit_and_the_model_side_by_side():
    sample = HealthSample(crds=500, rss_bytes=3 * 2**30, mib_per_crd=4.5, r2=0.99, fit_points=40, fit_crd_counts=9)
    line = fit_line(sample, model_attribution(sample, VERSION))
    assert "4.50 MiB" in line and "(model for 1.37)" in line


def test_no_version_or_no_crds_no_attribution():
    assert model_attribution(HealthSample(crds=10, rss_bytes=2**30), None) == ""
    assert model_attribution(HealthSample(crds=0, rss_bytes=2**30), VERSION) == ""
    # A minor without coefficients of its own still gets the nearest model, named as such (no calibration
    # will cover 1.99).
    assert "(model for 1.37, nearest to 1.99)" in model_attribution(HealthSample(crds=10, rss_bytes=2**30),
                                                                     VersionSample(major="1", minor="99+"))


async def test_the_estimate_dialog_prices_a_source_for_the_watched_cluster():
    from textual.app import App
    from textual.widgets import Input, Static

    from crdscope.tui.screens.estimate import EstimateScreen
    from crdscope.session.core import SessionStore
    from tests.helpers import async_wait_for

    store = SessionStore()
    store.add(VERSION)
    store.add(HealthSample(crds=12, rss_bytes=2**30))

    class Host(App[None]):
        def on_mount(self) -> None:
            self.push_screen(EstimateScreen(store))

    async with Host().run_test() as pilot:
        screen = pilot.app.screen
        screen.query_one(Input).value = "synthetic:8"
        await pilot.press("enter")
        result = screen.query_one("#estimate-result", Static)
        text = await async_wait_for(lambda: "model for 1.37" in str(result.render()) and str(result.render()),
                                    timeout=30, message="the estimate table")
        assert "synthetic:8: 8 CRDs" in text
        assert "RSS after" in text  # from the watched cluster's RSS
        screen.query_one(Input).value = "/nonexistent.yaml"
        await pilot.press("enter")
        await async_wait_for(lambda: "cannot estimate" in str(result.render()), timeout=30,
                             message="a one-line error")


def test_a_memory_limit_gives_a_headroom_in_crds():
    sample = HealthSample(crds=300, rss_bytes=2 * 2**30)
    line = model_attribution(sample, VERSION, memory_limit=4 * 2**30)
    assert "headroom ~ " in line and "more CRDs like these" in line
    assert "headroom" not in model_attribution(sample, VERSION)
