"""``crdscope demo`` (issue 28): one provider into a capped 1.26 lab and a 1.37 lab, compared and narrated.

The demo's own code brings both named labs up (under a lab home of this test's), with real
Crossplane in each when it is built (`make lab-binaries` builds it; else crdscope's loader), and the
monitor opens on the compare screen.  The provider is a few dozen GCP CRDs (tests/e2e/test_package.py's
subset) as one YAML file, packaged once into a cache of this test's.  The real kubectl is the
reference for what reached each lab; the narration must say each stage and end with each cluster's
findings.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from crdscope.base.crossplane import becomes_mrd

from crdscope.lab.controlplane import Lab
from crdscope.tui.fleet_demo import lab_names
from tests.e2e.test_package import subset
from tests.helpers import async_wait_for, established

pytestmark = [pytest.mark.lab, pytest.mark.shared_crds]

PREFIX = "fleetdemo"
MRD = "managedresourcedefinitions.apiextensions.crossplane.io"
OWNED = "app.kubernetes.io/managed-by=crdscope"
#: CRDs the fallback's loader puts into each lab.
LOADED = 20


def crdscope(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "crdscope.cli.main", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **env})


@pytest.fixture(scope="module")
def lab_home(tmp_path_factory):
    """The demo's labs live under a lab home of this module's (both tests use them), down at the end."""
    home = tmp_path_factory.mktemp("fleet-demo-labs")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CRDSCOPE_LAB_HOME", str(home))
        yield home
        for name in lab_names(PREFIX):
            Lab(name=name).down()


def names_on(state, resource: str, *selector: str, only_established: bool = False) -> set[str]:
    """What the real kubectl lists of ``resource`` on a lab (CRDs: only Established ones, if asked)."""
    import json

    done = subprocess.run(["kubectl", "--kubeconfig", state.kubeconfig, "--context", state.admin_context, "get",
                           resource, *selector, "-o", "json"], capture_output=True, text=True, timeout=120,
                          check=True)
    items = json.loads(done.stdout)["items"]
    return {i["metadata"]["name"] for i in items if not only_established or established(i)}


async def test_the_demo_installs_one_provider_into_both_labs_and_ends_with_their_findings(
        lab_home, lab_binaries, shared_crds, tmp_path, monkeypatch):
    from crdscope.toolchain import crossplane as toolchain_crossplane
    from crdscope.loader import crossplane_install
    from crdscope.tui.fleet_demo import build_demo_app, default_memory_limit, prepare_demo
    from crdscope.tui.format import size
    from crdscope.tui.screens.compare import CompareScreen

    crds = subset(shared_crds, tmp_path / "crds")
    provider = tmp_path / "provider-gcp.yaml"
    provider.write_text("\n---\n".join(p.read_text() for p in sorted((tmp_path / "crds").iterdir())))
    monkeypatch.setattr(crossplane_install, "packages_cache", lambda: tmp_path / "package-cache")
    through_crossplane = toolchain_crossplane.cached_binaries() is not None
    prepared: list[str] = []
    demo = prepare_demo(str(provider), prefix=PREFIX, say=prepared.append)
    old, new = (install.state for install in demo.installs)
    assert old.kubernetes_version.startswith("v1.26.") and new.kubernetes_version.startswith("v1.37.")
    cap = default_memory_limit(through_crossplane)
    assert (old.memory_limit, new.memory_limit) == (cap, 0)
    assert (demo.fallback == "") == through_crossplane, demo.fallback

    app = build_demo_app(demo, record=None, layout="tabs")
    shown: list[str] = []
    notify = app.notify
    app.notify = lambda line, **kwargs: (shown.append(line), notify(line, **kwargs))  # type: ignore[method-assign]
    async with app.run_test(size=(160, 50)) as pilot:
        assert isinstance(app.screen, CompareScreen)
        await async_wait_for(lambda: app.ended, timeout=170, message="the demo's last stage")
        await pilot.press("p")  # the screen answers keys while the labs work
        assert app.probes_paused
        await pilot.press("p")
    assert all(install.result for install in demo.installs), app.narration
    said = app.narration
    assert all(line in shown for line in said)  # every line of narration was on screen
    assert said[0].startswith(f"{PREFIX}-126 (1.26, capped at {size(cap)}) beside {PREFIX}-137 (1.37)"), said
    assert said[1].startswith(f"installing {provider}"), said
    if through_crossplane:
        for name in lab_names(PREFIX):  # each stage of the driver, said for each lab
            stages = [line.split()[1] for line in said if line.startswith(f"{name}: ") and line.split()[1][1:2] == "/"]
            assert stages[:2] == ["1/4", "2/4"] and "4/4" in stages, said
    end = next(i for i, line in enumerate(said) if line.startswith("the end ("))
    for install in demo.installs:
        assert any(line.startswith(f"findings of {install.name}") for line in said[end:]), said[end:]
        assert f"{install.lab.name} installed" in said[end]

    # The real kubectl: the same CRDs reached both labs, Established (through Crossplane: each an MRD
    # first, every kind activated).
    on_old = names_on(old, "crds", only_established=True) & set(crds)
    on_new = names_on(new, "crds", only_established=True) & set(crds)
    assert on_old == on_new == set(crds)
    if through_crossplane:  # ProviderConfig kinds stay CRDs on Crossplane v2.4
        assert names_on(old, MRD) == names_on(new, MRD) == {n for n in crds if becomes_mrd(n)}

    # Another demo on the same names with another cap: the 1.26 lab is not its own, one line, nothing changes.
    taken = crdscope("demo", "--name", PREFIX, "--memory-limit", "5Gi", "--provider", str(provider),
                     env={"CRDSCOPE_LAB_HOME": str(lab_home)})
    assert taken.returncode != 0 and len(taken.stderr.strip().splitlines()) == 1, taken.stderr
    assert f"a lab named {PREFIX}-126 is already up" in taken.stderr
    assert Lab(name=f"{PREFIX}-126").require().server == old.server


async def test_without_crossplane_the_loader_puts_the_same_crds_into_both_labs(lab_home, lab_binaries):
    """The fallback (Crossplane declined here, or not built): crdscope's loader, the same source and pace in both,
    said in one line; the labs are the ones the test above left up (the demo's own: watched again)."""
    from crdscope.tui.fleet_demo import build_demo_app, prepare_demo

    demo = prepare_demo(f"synthetic:{LOADED}", prefix=PREFIX, crossplane=False)
    assert demo.fallback and all(install.stages is None for install in demo.installs)
    app = build_demo_app(demo, record=None, layout="tabs")
    async with app.run_test(size=(160, 50)):
        await async_wait_for(lambda: app.ended, timeout=90, message="the demo's last stage")
    assert all(install.result for install in demo.installs), app.narration
    assert demo.fallback in app.narration and "with crdscope's loader, at the same pace" in app.narration[1]
    owned = [names_on(install.state, "crds", "-l", OWNED) for install in demo.installs]
    assert len(owned[0]) == LOADED and owned[0] == owned[1]


def test_bad_demo_input_is_one_line_before_any_lab_starts(tmp_path):
    env = {"CRDSCOPE_LAB_HOME": str(tmp_path / "labs")}
    missing = crdscope("demo", "--provider", str(tmp_path / "absent.tar.xz"), env=env)
    assert missing.returncode != 0 and len(missing.stderr.strip().splitlines()) == 1, missing.stderr
    assert "absent.tar.xz" in missing.stderr and "Traceback" not in missing.stderr
    # No Go and nothing built (an empty cache, no go on PATH): one line, no lab.
    no_go = crdscope("demo", "--no-crossplane", "--provider", "synthetic:5",
                     env={**env, "XDG_CACHE_HOME": str(tmp_path / "cache"), "PATH": str(tmp_path / "bin"),
                          "KUBEBUILDER_ASSETS": ""})
    assert no_go.returncode != 0 and len(no_go.stderr.strip().splitlines()) == 1, no_go.stderr
    assert "Kubernetes 1.26 is not built" in no_go.stderr
    assert not (tmp_path / "labs").exists() or not any((tmp_path / "labs").rglob("state.json"))
