"""The health panel's memory line: the model's attribution of the cluster's own CRDs (the attribution
probe's sample, priced by their schemas) beside the live fit."""

from __future__ import annotations

from crdscope.base.samples.attribution import AttributionSample
from crdscope.base.samples.health import HealthSample
from crdscope.base.samples.version import VersionSample
from crdscope.tui.panels.health import fit_line, model_attribution

VERSION = VersionSample(major="1", minor="37", git_version="v1.37.2")
GIB = 2**30
PRICED = AttributionSample(model_minor="1.37", kubernetes_minor="1.37", crds=2065, groups=354,
                           memory_bytes={"ec2.aws.upbound.io": 0.4 * GIB}, crd_memory_bytes=4.6 * GIB,
                           mib_per_crd=2.28, mrds=817, mrd_memory_bytes=817 * 0.8 * 2**20, rss_bytes=9 * GIB)


def test_one_crd_count_gets_the_models_attribution():
    sample = HealthSample(crds=2065, rss_bytes=9 * GIB)
    modelled = model_attribution(PRICED)
    assert modelled == ("CRDs ~ 4.60 GiB by their schemas (2,065 CRDs, 2.3 MiB each) · 817 MRDs ~ 0.64 GiB, "
                        "of 9.0 GiB RSS (model for 1.37)")
    line = fit_line(sample, PRICED)
    assert "needs CRD counts that change" in line and modelled in line


def test_the_live_fit_and_the_model_side_by_side():
    sample = HealthSample(crds=500, rss_bytes=3 * GIB, mib_per_crd=4.5, r2=0.99, fit_points=40, fit_crd_counts=9)
    line = fit_line(sample, PRICED)
    assert "4.50 MiB" in line and "(model for 1.37)" in line
    # With MRDs apart, the CRDs' own slope beside the model's mean by their schemas.
    own = HealthSample(crds=500, rss_bytes=3 * GIB, mib_per_crd=3.0, mib_per_crd_own=2.1, mrds=817,
                       mib_per_mrd=0.8, fit_points=40, fit_crd_counts=9)
    assert "RSS/CRD own [b]2.10 MiB (model 2.28 MiB)[/b]" in fit_line(own, PRICED)


def test_nothing_priced_no_attribution():
    assert model_attribution(None) == ""
    unpriced = AttributionSample(unobservable={"crd_memory_bytes": "the server's version is not known yet"})
    assert model_attribution(unpriced) == ""
    assert fit_line(HealthSample(crds=10), unpriced).endswith("needs CRD counts that change[/]")
    # A minor without coefficients of its own is priced by the nearest model, named as such.
    nearest = AttributionSample(model_minor="1.37", kubernetes_minor="1.99", crds=10, crd_memory_bytes=GIB / 10)
    assert "(model for 1.37, nearest to 1.99)" in model_attribution(nearest)


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
    import dataclasses

    line = model_attribution(dataclasses.replace(PRICED, headroom_crds=310))
    assert line.endswith(" · headroom ~ 310 more CRDs like these")
    assert "headroom" not in model_attribution(PRICED)
