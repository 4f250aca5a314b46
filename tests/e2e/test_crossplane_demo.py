"""The demo's provider install (``crdscope lab --crossplane``) against a real lab with real Crossplane.

A few dozen GCP CRDs (tests/e2e/test_package.py's subset) as one YAML file: packaged once (then
from the cache), pushed to the lab's registry, installed stage by stage by the demo's driver; kubectl
is the reference for what Crossplane did.
"""

from __future__ import annotations

import fnmatch
import json
import subprocess
import sys

import pytest

from crdscope.base.crossplane import becomes_mrd
from tests.e2e.test_package import subset
from tests.helpers import condition_true, established

pytestmark = [pytest.mark.lab, pytest.mark.shared_crds]

LAB_NAME = "xpdemo"
MRD = "managedresourcedefinitions.apiextensions.crossplane.io"


def crdscope(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "crdscope.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def demo_lab(lab_binaries):
    """A named lab with real Crossplane and no default MRAP, as the demo starts it; down at the end."""
    from crdscope.lab.controlplane import Lab

    done = crdscope("lab", "up", "--name", LAB_NAME, "--crossplane", "--activation", "none")
    the_lab = Lab(name=LAB_NAME)
    if done.returncode != 0:
        the_lab.down()
        pytest.fail(done.stderr)
    yield the_lab.require()
    the_lab.down()


def kubectl_json(state, *args: str) -> dict:
    done = subprocess.run(["kubectl", "--kubeconfig", state.kubeconfig, "--context", state.admin_context, *args,
                           "-o", "json"], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout)


def test_the_demo_installs_a_family_through_crossplane_stage_by_stage(demo_lab, shared_crds, tmp_path,
                                                                       monkeypatch):
    from crdscope.toolchain import crossplane as toolchain_crossplane
    from crdscope.base.labrecord import lab_registry
    from crdscope.loader import crossplane_install
    from crdscope.loader.sources import open_source

    crds = subset(shared_crds, tmp_path / "crds")
    source_file = tmp_path / "provider-gcp.yaml"
    source_file.write_text("\n---\n".join(p.read_text() for p in sorted((tmp_path / "crds").iterdir())))
    monkeypatch.setattr(crossplane_install, "packages_cache", lambda: tmp_path / "cache")
    binaries = toolchain_crossplane.cached_binaries()
    assert binaries is not None
    registry = lab_registry(LAB_NAME)
    said: list[str] = []

    def prepare() -> list:
        return crossplane_install.prepare_packages(
            open_source(str(source_file)), name="provider-gcp", registry=registry, crank=binaries.crank,
            crossplane_version=binaries.version, say=said.append)

    first = prepare()
    assert not any("from the cache" in line for line in said)
    said.clear()
    again = prepare()  # the second demo: nothing built, the same packages pushed again
    assert any("from the cache" in line for line in said) and not any(line.startswith("built") for line in said)
    assert [p.plan for p in again] == [p.plan for p in first]
    assert all(p.reference and p.reference.startswith(f"{registry}/crdscope/") for p in again)

    stages = crossplane_install.plan_install([p.plan for p in again], registry)
    client = crossplane_install.LabClient(demo_lab.server, demo_lab.pki_dir)
    try:
        assert crossplane_install.run_install(stages, client, say=said.append), said[-1]
    finally:
        client.close()

    # kubectl's view: every Provider Installed, every CRD of the source an MRD, and exactly the
    # MRAP's kinds (the largest member's) Established as CRDs.
    providers = kubectl_json(demo_lab, "get", "providers")["items"]
    assert {p["metadata"]["name"] for p in providers} == {p.plan.name for p in again}
    assert all(condition_true(p, "Installed")
               for p in providers)
    # ProviderConfig kinds stay CRDs on Crossplane v2.4, Established at install.
    configs = {n for n in crds if not becomes_mrd(n)}
    assert {m["metadata"]["name"] for m in kubectl_json(demo_lab, "get", MRD)["items"]} == set(crds) - configs
    mrap = stages[-1].objects[0]
    activated = {n for n in crds if any(fnmatch.fnmatch(n, p) for p in mrap["spec"]["activate"])} - configs
    assert activated and activated < set(crds)
    ready = {c["metadata"]["name"] for c in kubectl_json(demo_lab, "get", "crds")["items"] if established(c)}
    assert ready & set(crds) == activated | configs


def test_bad_demo_input_is_one_line_before_anything_starts(tmp_path):
    missing = crdscope("lab", "--crossplane", "--name", "never-started", "--provider", str(tmp_path / "absent.tar.xz"))
    assert missing.returncode != 0 and len(missing.stderr.strip().splitlines()) == 1, missing.stderr
    assert "absent.tar.xz" in missing.stderr and "Traceback" not in missing.stderr
    alone = crdscope("lab", "--provider", str(tmp_path))
    assert alone.returncode != 0 and "--crossplane" in alone.stderr and len(alone.stderr.strip().splitlines()) == 1
    from crdscope.lab.controlplane import Lab

    assert Lab(name="never-started").state() is None


async def test_the_demo_monitor_says_each_stage_and_answers_keys_meanwhile(demo_lab, tmp_path):
    """The monitor of `crdscope lab --crossplane`: the install runs beside the screen, one line a stage."""
    import functools

    from crdscope.toolchain import crossplane as toolchain_crossplane
    from crdscope.base.labrecord import lab_registry
    from crdscope.lab.controlplane import Lab
    from crdscope.loader import crossplane_install
    from crdscope.loader.sources import open_source
    from crdscope.tui.crossplane_demo import CrossplaneDemoApp
    from crdscope.tui.launch import build_app
    from tests.crdsets import write_tiny_crds
    from tests.helpers import async_wait_for

    source = write_tiny_crds(tmp_path, 6, prefix="demo", per_group=3)  # two groups: two members
    binaries = toolchain_crossplane.cached_binaries()
    registry = lab_registry(LAB_NAME)
    packages = crossplane_install.prepare_packages(
        open_source(str(source)), name="tiny", registry=registry, crank=binaries.crank,
        crossplane_version=binaries.version, say=lambda line: None)
    stages = crossplane_install.plan_install([p.plan for p in packages], registry)
    app_class = functools.partial(CrossplaneDemoApp, stages=stages, server=demo_lab.server,
                                  pki_dir=demo_lab.pki_dir)
    app = build_app(demo_lab.kubeconfig, demo_lab.admin_context, record=None, lab=Lab(name=LAB_NAME),
                    app_class=app_class)
    said: list[str] = []
    notify = app.notify
    app.notify = lambda line, **kwargs: (said.append(line), notify(line, **kwargs))  # type: ignore[method-assign]
    async with app.run_test(size=(160, 50)) as pilot:
        await async_wait_for(lambda: said, timeout=60, message="the first stage's line")
        await pilot.press("p")  # the event loop is free while the install waits on the lab
        assert app.probes_paused
        await pilot.press("p")
        assert not app.probes_paused
        await async_wait_for(lambda: app.install_result is not None, timeout=400, message="the install's end")
    assert app.install_result is True, said
    assert [line[:3] for line in said if line[1:3] == "/4"][:2] == ["1/4", "2/4"]
    assert any(line.startswith("4/4 done: 3/3 CRDs Established") for line in said), said
    assert said[-1].startswith("install through Crossplane done")
