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
    # One module graph for the core, the CLI and crane: each is a tool of that module.
    for package in toolchain_crossplane.PACKAGES:
        assert package in text
    assert (toolchain_crossplane.MODULE_DIR / "go.sum").stat().st_size > 0


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
    }
    return LabState(run_dir="/nonexistent", kubeconfig="", server="", kubernetes_version="", binaries_origin="",
                    components=components, supervise_apiservers=supervise_apiservers)


def test_crossplane_is_always_supervised_the_api_server_only_when_asked():
    assert [c.name for c in supervised(_state(False))] == ["registry", "crossplane"]
    assert [c.name for c in supervised(_state(True))] == ["apiserver", "registry", "crossplane"]


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
