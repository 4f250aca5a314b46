"""The lab's Crossplane part without a cluster: pins, MRAP patterns, supervision, errors."""

from __future__ import annotations

import pytest

from crdscope.lab import crossplane
from crdscope.toolchain import crossplane as toolchain_crossplane
from crdscope.base.labrecord import lab_registry
from crdscope.base.errors import LabError
from crdscope.lab.controlplane import Lab, LabState
from crdscope.base.labrecord import Component
from crdscope.lab.restarts import platform_restarts
from crdscope.lab.supervisor import supervised


def test_the_module_pins_crossplane_v2_and_its_registry():
    text = (toolchain_crossplane.MODULE_DIR / "go.mod").read_text()
    assert toolchain_crossplane.pinned_version().startswith("v2.")
    # One module graph for the v2.0 core, the CLI and crane: each is a tool of that module.
    for package in toolchain_crossplane.PACKAGES:
        assert package in text
    assert (toolchain_crossplane.MODULE_DIR / "go.sum").stat().st_size > 0


def test_the_default_core_is_v2_4_and_v2_0_stays_selectable():
    releases = {r.line: r for r in toolchain_crossplane.RELEASES}
    assert toolchain_crossplane.RELEASES[0].line == "v2.4" and toolchain_crossplane.default_version() == "v2.4.2"
    assert releases["v2.0"].version == "v2.0.0" and toolchain_crossplane.CLI_RELEASE is releases["v2.0"]
    # v2.4.2's module holds the core only (the CLI left the repository); its build says how it differs.
    v24 = (releases["v2.4"].module_dir / "go.mod").read_text()
    assert "tool github.com/crossplane/crossplane/v2/cmd/crossplane" in v24 and "cmd/crank" not in v24
    assert releases["v2.4"].packages == (toolchain_crossplane.CORE_PACKAGE,)
    assert "crossplane-runtime/v2 => github.com/crossplane/crossplane-runtime/v2 v2.4.0" in v24
    assert "crossplane-runtime v2.4.0" in releases["v2.4"].note
    for given, line in (("v2.4", "v2.4"), ("2.4", "v2.4"), ("v2.4.2", "v2.4"), (None, "v2.4"), ("2.0", "v2.0"),
                        ("v2.0.0", "v2.0")):
        assert toolchain_crossplane.release_of(given).line == line
    with pytest.raises(LabError, match=r"not one the lab runs \(supported: v2.4 \(v2.4.2\), v2.0 \(v2.0.0\)\)") as bad:
        toolchain_crossplane.release_of("v2.3")
    assert bad.value.exit_code == 2


def test_every_core_takes_crank_and_crane_from_the_cli_build(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert toolchain_crossplane.cached_binaries() is None
    for version, names in (("v2.0.0", ("crossplane", "crank", "crane")), ("v2.4.2", ("crossplane",))):
        directory = toolchain_crossplane.binaries_dir(version)
        directory.mkdir(parents=True)
        for name in names:
            (directory / name).write_text("#!/bin/sh\n")
            (directory / name).chmod(0o755)
        (directory.parent / "crds").mkdir()
        (directory.parent / "crds" / "x.yaml").write_text("{}")
    found = toolchain_crossplane.cached_binaries()
    assert found is not None and found.version == "v2.4.2" and found.cli_version == "v2.0.0"
    assert found.crossplane == toolchain_crossplane.binaries_dir("v2.4.2") / "crossplane"
    assert found.crank == toolchain_crossplane.binaries_dir("v2.0.0") / "crank"
    assert found.crds == toolchain_crossplane.binaries_dir("v2.4.2").parent / "crds"
    old = toolchain_crossplane.cached_binaries("v2.0.0")
    assert old is not None and old.crossplane.parent == old.crank.parent
    (toolchain_crossplane.binaries_dir("v2.0.0") / "crank").unlink()  # no CLI: no core is usable
    assert toolchain_crossplane.cached_binaries() is None


def test_the_controller_manager_runs_the_deployment_controllers_only(tmp_path):
    from pathlib import Path

    from crdscope.lab import controllermanager

    state = LabState(run_dir=str(tmp_path), kubeconfig=str(tmp_path / "kubeconfig"), server="",
                     kubernetes_version="v1.37.2", binaries_origin="cache")
    component = controllermanager.component(Path("/bin/kcm"), state, 12345)
    assert component.role == "controller-manager" and component.port == 12345
    assert "--controllers=deployment,replicaset" in component.argv
    assert f"--kubeconfig={state.kubeconfig}" in component.argv and "--leader-elect=false" in component.argv
    assert "--secure-port=12345" in component.argv and "--bind-address=127.0.0.1" in component.argv


def test_bad_pin_is_a_clear_error(tmp_path):
    go_mod = tmp_path / "go.mod"
    go_mod.write_text("module x\n\ngo 1.24\n")
    with pytest.raises(LabError, match="does not pin"):
        toolchain_crossplane.pinned_version(go_mod)


@pytest.mark.parametrize(("given", "patterns"), [
    ((), ["*"]),
    (("none",), []),
    (("*.sqs.aws.upbound.io", "buckets.s3.aws.upbound.io"), ["*.sqs.aws.upbound.io", "buckets.s3.aws.upbound.io"]),
])
def test_default_mrap_patterns(given, patterns):
    assert crossplane.activations_of(given) == patterns


def test_none_with_other_patterns_is_refused():
    with pytest.raises(LabError, match="alone"):
        crossplane.activations_of(("none", "*"))


def _state(supervise_apiservers: bool) -> LabState:
    components = {
        "etcd": Component("etcd", ["etcd"], "", 1),
        "apiserver": Component("apiserver", ["kube-apiserver"], "", 2),
        "registry": Component("registry", ["crane"], "", 3, role="registry"),
        "crossplane": Component("crossplane", ["crossplane"], "", 4, role="crossplane"),
        "controller-manager": Component("controller-manager", ["kcm"], "", 5, role="controller-manager"),
    }
    return LabState(run_dir="/nonexistent", kubeconfig="", server="", kubernetes_version="", binaries_origin="",
                    components=components, supervise_apiservers=supervise_apiservers)


def test_crossplane_is_always_supervised_the_api_server_only_when_asked():
    assert [c.name for c in supervised(_state(False))] == ["registry", "crossplane", "controller-manager"]
    assert [c.name for c in supervised(_state(True))] == ["apiserver", "registry", "crossplane", "controller-manager"]


def test_a_crossplane_death_is_no_api_server_restart():
    events = [{"event": "died", "component": "crossplane", "at": 1.0, "ran_seconds": 3},
              {"event": "died", "component": "apiserver", "at": 2.0, "ran_seconds": 9, "oom_killed": True}]
    restarts = platform_restarts(events, {}, None, {"apiserver"})
    assert restarts.restarts == 1
    assert restarts.events[0].replica == "apiserver" and restarts.events[0].oom_killed


def test_state_round_trips_with_crossplane_fields():
    state = _state(True)
    state.crossplane_version = "v2.0.0"
    state.components["crossplane"].env = {"KUBECONFIG": "/x"}
    again = LabState.from_json(state.to_json())
    assert again.crossplane_version == "v2.0.0"
    assert again.components["crossplane"].env == {"KUBECONFIG": "/x"}
    assert again.supervise_apiservers


def test_lab_registry_without_a_lab_or_without_crossplane(tmp_path, monkeypatch):
    monkeypatch.setenv("CRDSCOPE_LAB_HOME", str(tmp_path))
    with pytest.raises(LabError, match="no lab"):
        lab_registry()
    state = _state(False)
    del state.components["registry"]
    Lab().save(state)
    with pytest.raises(LabError, match="no registry"):
        lab_registry()
