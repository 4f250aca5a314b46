"""Issue 28's done-when: one monitor on two named labs, the same CRDs loaded into both from one action.

A 1.26 lab of this test's own (its contexts named after it, as ``crdscope lab up --name`` makes
them) beside the session's 1.37 lab, one merged KUBECONFIG, and the monitor opened on both as
``crdscope compare A B`` opens it (``tui.launch.build_fleet_app(..., compare=True)``).  One
``l`` on the compare screen, one set-up dialog, and the loader runs into both labs at the same
pace; the real kubectl must then see the same crdscope CRDs on each, and the compare screen must
show both clusters and state how they differ.
"""

from __future__ import annotations

import os
import sys

import pytest

from crdscope.lab.controlplane import Lab, LabOptions
from crdscope.tui.screens.compare import CompareScreen
from crdscope.tui.screens.fleet import FleetScreen
from crdscope.tui.screens.loader_setup import LoaderSetupScreen
from tests.conftest import LabHandle
from tests.helpers import async_wait_for
from tests.tui.conftest import widget_text

pytestmark = pytest.mark.lab

OLD = "1.26"
#: CRDs loaded into each lab (a modest synthetic set: this is about the fleet, not the load).
LOAD = 40
OWNED = "app.kubernetes.io/managed-by=crdscope"


@pytest.fixture
def old_lab(tmp_path_factory: pytest.TempPathFactory):
    """A named 1.26 lab (built by `make lab-binaries`) of this test's own."""
    from crdscope.lab.binaries import ensure_binaries

    binaries = ensure_binaries(kubernetes=OLD, progress=lambda line: print(line, file=sys.stderr))
    lab = Lab(tmp_path_factory.mktemp("fleet-old"), name="fleet-old")
    state = lab.up(binaries, options=LabOptions(name="fleet-old"))
    try:
        yield LabHandle(lab=lab, state=state, kubeconfig=state.kubeconfig, admin_context=state.admin_context)
    finally:
        lab.down()


def owned_crds(handle: LabHandle, kubeconfig: str) -> set[str]:
    """crdscope's CRDs on a lab, as the real kubectl lists them through the merged kubeconfig."""
    done = handle.kubectl("get", "crd", "-l", OWNED, "-o", "name", env={"KUBECONFIG": kubeconfig})
    return {line.strip() for line in done.stdout.splitlines() if line.strip()}


def measured_difference(screen: CompareScreen) -> str | None:
    """A difference the compare screen states in a measured figure (memory, discovery, canary p99)."""
    screen.redraw()
    said = widget_text(screen.query_one("#compare-differences")).splitlines()
    return next((line for line in said if "memory" in line or "slower" in line), None)


async def test_the_monitor_loads_two_labs_from_one_action_and_compares_them(lab, old_lab, monkeypatch):
    from crdscope.base.settings import LoaderSettings, Settings
    from crdscope.tui.launch import build_fleet_app

    assert old_lab.state.kubernetes_version.startswith("v1.26.")
    assert lab.state.kubernetes_version.startswith("v1.37.")
    old, new = old_lab.admin_context, lab.admin_context
    # The session's lab may hold crdscope CRDs of an earlier test: both labs start with none.
    lab.kubectl("delete", "crd", "-l", OWNED, "--wait=true", "--timeout=180s", check=False)
    merged = os.pathsep.join((old_lab.kubeconfig, lab.kubeconfig))
    monkeypatch.setenv("KUBECONFIG", merged)
    settings = Settings(loader=LoaderSettings(source=f"synthetic:{LOAD}", rate=40.0, concurrency=8))
    app = build_fleet_app(None, [old, new], record=None, settings=settings, compare=True, layout="tabs")
    try:
        async with app.run_test(size=(140, 50)) as pilot:
            assert isinstance(app.screen, CompareScreen)
            await async_wait_for(lambda: all(s.store.last_good("inventory") and s.store.last_good("health")
                                             for s in app.sessions), timeout=120, message="both labs' first samples")
            await pilot.press("l")
            await async_wait_for(lambda: isinstance(app.screen, LoaderSetupScreen)
                                 and "Will apply" in str(app.screen.query_one("#plan").render()),
                                 timeout=30, message="the loader's set-up dialog and its plan")
            await pilot.press("ctrl+s")
            await async_wait_for(lambda: all((s.store.latest("loader") is not None
                                              and s.store.latest("loader").state == "done")
                                             for s in app.sessions), timeout=240, message="both loads done")
            for session in app.sessions:
                final = session.store.latest("loader")
                assert final.created == LOAD and final.failed == 0, (session.name, final)
                assert final.rate_limit_per_s == 40.0  # the same pace in both
            # The real kubectl agrees, on each lab.
            crds_old, crds_new = owned_crds(old_lab, merged), owned_crds(lab, merged)
            assert len(crds_old) == LOAD and crds_old == crds_new

            # The compare screen shows both and states how they differ, in figures the probes measured.
            assert isinstance(app.screen, CompareScreen)
            await async_wait_for(lambda: all((s.store.last_good("inventory").crds >= LOAD) for s in app.sessions),
                                 timeout=60, message="both inventories counting the new CRDs")
            app.screen.redraw()
            await pilot.pause()
            table = widget_text(app.screen.query_one("#compare-table"))
            assert old in table and new in table and "v1.26." in table and "v1.37." in table
            said = widget_text(app.screen.query_one("#compare-differences"))
            assert f"{old} runs v1.26." in said, said
            await async_wait_for(lambda: measured_difference(app.screen), timeout=60,
                                 message="a stated difference in memory, discovery or latency")
            # c goes to the fleet screen: both rows.
            await pilot.press("c")
            assert isinstance(app.screen, FleetScreen)
            assert {row.name for row in app.screen.rows} == {old, new}
    finally:
        # The session's lab is shared: leave it as found, the CRDs gone (not terminating) before the next test.
        lab.kubectl("delete", "crd", "-l", OWNED, "--wait=true", "--timeout=180s", check=False)
