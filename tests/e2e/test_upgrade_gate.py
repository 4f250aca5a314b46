"""A gate for upgrades on the lab (issue 47 item 7): an old release installed, the new one priced over it.

``crdscope estimate NEW --context`` compares NEW with the cluster's CRDs of NEW's groups; the test
counts the same delta itself from what kubectl lists (a CRD of those groups NEW lacks is removed,
one whose versions, schemas or names differ is changed) and gates on it with thresholds that cross
(exit 1, one line naming the figure) and that do not (exit 0).  Two old releases: a synthetic one
crdscope generates (always runs) and a slice of the real GCP provider in ``../shared`` with fewer
CRDs, smaller schemas and a kind the new release dropped (skipped where ``../shared`` is absent).
``mrap --from NEW --context`` on real Crossplane: an old provider release installed as a safe-start
package with an MRAP, the new one (fewer kinds, new kinds, larger schemas) read from its package.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from tests.conftest import LabHandle
from tests.helpers import established, wait_for

pytestmark = pytest.mark.lab


def crdscope(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "crdscope.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout)


def write_release(directory: Path, documents: list[dict]) -> Path:
    directory.mkdir(parents=True)
    for document in documents:
        (directory / f"{document['metadata']['name']}.yaml").write_text(yaml.safe_dump(document))
    return directory


def shape(spec: dict) -> object:
    """What the test calls a change: the served versions with their schemas and subresources, the kind,
    plural and scope (the server fills in names and a conversion strategy the files leave out)."""
    return (spec["names"]["kind"], spec["names"]["plural"], spec.get("scope"),
            [(v["name"], v.get("served"), v.get("schema"), v.get("subresources")) for v in spec["versions"]])


def kubectl_delta(handle: LabHandle, release: list[dict]) -> dict[str, set[str]]:
    """NEW against the cluster's CRDs of NEW's groups, as kubectl lists them."""
    groups = {d["spec"]["group"] for d in release}
    cluster = {c["metadata"]["name"]: c["spec"] for c in handle.kubectl_json("get", "crds")["items"]
               if c["spec"]["group"] in groups}
    new = {d["metadata"]["name"]: d["spec"] for d in release}
    both = cluster.keys() & new.keys()
    changed = {name for name in both if shape(cluster[name]) != shape(new[name])}
    return {"installed": set(cluster), "added": new.keys() - cluster.keys(), "removed": cluster.keys() - new.keys(),
            "changed": changed, "unchanged": both - changed}


def estimate(handle: LabHandle, release: Path, *args: str) -> subprocess.CompletedProcess:
    return crdscope("estimate", str(release), "--kubeconfig", handle.kubeconfig, "--context", handle.admin_context,
                    *args)


def load(handle: LabHandle, release: Path) -> None:
    done = crdscope("load", str(release), "--kubeconfig", handle.kubeconfig, "--context", handle.admin_context,
                    "--json")
    assert done.returncode == 0, done.stderr


def clean(handle: LabHandle) -> None:
    crdscope("clean", "--yes", "--kubeconfig", handle.kubeconfig, "--context", handle.admin_context)


def check_the_delta_and_gate_it(handle: LabHandle, release_dir: Path, release: list[dict]) -> dict:
    """NEW's delta by crdscope equals kubectl's count; gates at the counts cross, one past them do not."""
    expected = kubectl_delta(handle, release)
    assert all(expected[key] for key in ("added", "removed", "changed", "unchanged")), expected  # a real mix
    done = estimate(handle, release_dir, "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["installed_crds"] == len(expected["installed"])
    assert set(data["delta"]["added"]) == expected["added"]
    assert set(data["delta"]["removed"]) == expected["removed"]
    assert {c["name"] for c in data["delta"]["changed"]} == expected["changed"]
    assert data["crds_unchanged"] == len(expected["unchanged"])
    added, removed = len(expected["added"]), len(expected["removed"])

    crossed = estimate(handle, release_dir, "--fail-if", f"crds_added>{added - 1}", "--fail-if",
                       f"crds_removed>={removed}", "--fail-if", "memory.held_added_mib>100000")
    assert crossed.returncode == 1, crossed.stderr
    assert "API-server memory added" in crossed.stdout  # the normal output first
    assert crossed.stderr.strip().splitlines() == [
        f"crdscope: --fail-if crossed: crds_added>{added - 1} (crds_added = {added}); "
        f"crds_removed>={removed} (crds_removed = {removed})"]
    passed = estimate(handle, release_dir, "--json", "--fail-if", f"crds_added>{added}", "--fail-if",
                      f"crds_removed>{removed}", "--fail-if", "memory.held_added_mib>100000")
    assert passed.returncode == 0, passed.stderr
    assert json.loads(passed.stdout)["fail_if"]["crossed"] == []
    # Only the CRDs of NEW's names: none removed, the rest as before.
    by_names = json.loads(estimate(handle, release_dir, "--json", "--replaces", "names").stdout)
    assert by_names["crds_removed"] == 0 and by_names["installed_crds"] == len(expected["installed"]) - removed
    assert by_names["crds_added"] == added and by_names["crds_changed"] == len(expected["changed"])
    return data


def test_a_synthetic_release_over_an_older_one(lab, tmp_path):
    from crdscope.loader.synthetic import synthetic_documents

    small, large = list(synthetic_documents(80, schema_props=8)), list(synthetic_documents(80, schema_props=12))
    old_dir = write_release(tmp_path / "old", small[:60])
    # NEW drops the first 5, grows the schemas of 10 and brings 20 kinds.
    new = [large[i] if 10 <= i < 20 else small[i] for i in range(5, 80)]
    new_dir = write_release(tmp_path / "new", new)
    load(lab, old_dir)
    try:
        # The release the cluster runs, priced over itself: nothing new.
        same = json.loads(estimate(lab, old_dir, "--json").stdout)
        assert (same["installed_crds"], same["crds_unchanged"], same["crds_added"], same["crds_changed"]) == \
            (60, 60, 0, 0)
        assert same["memory"]["rss_added_mib"]["value"] == 0 and same["memory"]["held_added_mib"]["value"] == 0
        assert same["discovery"]["group_versions_added"] == 0 and same["openapi"]["v3_paths_added"] == 0
        data = check_the_delta_and_gate_it(lab, new_dir, new)
        # Of the 5 dropped, those of a group NEW still has are removed; a group NEW drops whole is not its own.
        groups = {crd["spec"]["group"] for crd in new}
        dropped = {crd["metadata"]["name"] for crd in small[:5] if crd["spec"]["group"] in groups}
        assert 0 < len(dropped) < 5 and set(data["delta"]["removed"]) == dropped
        assert (data["crds_added"], data["crds_changed"]) == (20, 10)
        assert data["memory"]["held_added_mib"]["value"] > 0  # 20 kinds and larger schemas for 5 kinds less
    finally:
        clean(lab)


#: Groups of the GCP provider small enough for the shared lab: 28 CRDs, about 1 MB of YAML.
GCP_GROUPS = ("tags.gcp.upbound.io", "tags.gcp.m.upbound.io", "spanner.gcp.upbound.io", "sql.gcp.upbound.io",
              "datacatalog.gcp.upbound.io")


def _gcp_release(archive: Path) -> list[dict]:
    with tarfile.open(archive, "r:xz") as tar:
        return sorted((yaml.safe_load(tar.extractfile(member).read()) for member in tar.getmembers()
                       if member.isfile() and member.name.split("/")[-1].split("_")[0] in GCP_GROUPS),
                      key=lambda crd: crd["metadata"]["name"])


def _without_descriptions(node: object) -> object:
    """A schema as an older release had it: no descriptions (smaller, the same fields)."""
    if isinstance(node, dict):
        return {key: _without_descriptions(value) for key, value in node.items()
                if not (key == "description" and isinstance(value, str))}
    if isinstance(node, list):
        return [_without_descriptions(value) for value in node]
    return node


def _dropped_kind(crd: dict) -> dict:
    """A kind the older release had and the new one dropped: a copy of ``crd`` under another name."""
    old = copy.deepcopy(crd)
    names = old["spec"]["names"]
    names.update(kind="Legacy" + names["kind"], listKind="Legacy" + names["kind"] + "List",
                 plural="legacy" + names["plural"], singular="legacy" + names["singular"])
    names.pop("shortNames", None)
    old["metadata"] = {"name": f"{names['plural']}.{old['spec']['group']}"}
    return old


def test_a_slice_of_the_gcp_provider_over_an_older_one(lab, tmp_path, shared_crds):
    new = _gcp_release(shared_crds / "provider-gcp.tar.xz")
    assert {crd["spec"]["group"] for crd in new} == set(GCP_GROUPS)
    spanner = [crd for crd in new if crd["spec"]["group"] == "spanner.gcp.upbound.io"]
    sql = [crd for crd in new if crd["spec"]["group"] == "sql.gcp.upbound.io"]
    old = [copy.deepcopy(crd) for crd in new if crd not in spanner[:2]]  # two spanner kinds are new
    for crd in old:
        if crd["metadata"]["name"] in {s["metadata"]["name"] for s in sql[:3]}:  # three sql schemas grew
            for version in crd["spec"]["versions"]:
                version["schema"] = _without_descriptions(version["schema"])
    old.append(_dropped_kind(new[0]))
    load(lab, write_release(tmp_path / "old", old))
    try:
        data = check_the_delta_and_gate_it(lab, write_release(tmp_path / "new", new), new)
        assert (data["crds_added"], data["crds_removed"], data["crds_changed"]) == (2, 1, 3)
        grown = {c["name"]: c["schema_bytes_after"] - c["schema_bytes_before"] for c in data["delta"]["changed"]}
        assert all(size > 0 for size in grown.values()), grown
    finally:
        clean(lab)


# --------------------------------------------------------------------------- mrap on real Crossplane

XP_LAB = "upgrade"
MRDS = "managedresourcedefinitions.apiextensions.crossplane.io"
MRAPS = "managedresourceactivationpolicies.apiextensions.crossplane.io"
G1, G2, G3, G4 = ("storage.m.synthetic.crdscope.dev", "storage.synthetic.crdscope.dev",
                  "network.m.synthetic.crdscope.dev", "compute.m.synthetic.crdscope.dev")


@pytest.fixture(scope="module")
def crossplane_lab(lab_binaries) -> LabHandle:
    from crdscope.lab.controlplane import Lab

    done = crdscope("lab", "up", "--name", XP_LAB, "--crossplane", "--activation", "none", timeout=900)
    the_lab = Lab(name=XP_LAB)
    if done.returncode != 0:
        the_lab.down()
        pytest.fail(done.stderr)
    state = the_lab.require()
    yield LabHandle(lab=the_lab, state=state, kubeconfig=state.kubeconfig, admin_context=state.admin_context,
                    restricted_context=state.restricted_context)
    the_lab.down()


def _releases() -> tuple[list[dict], list[dict], str]:
    """(old, new, the kind the old MRAP names exactly): NEW brings two kinds of G1 (whose MRAP entry is
    a glob) and G4's, grows two G1 schemas and one of G3, and drops the G2 kind the MRAP names."""
    from crdscope.loader.synthetic import synthetic_documents

    small = {d["metadata"]["name"]: d for d in synthetic_documents(40, schema_props=8)}
    large = {d["metadata"]["name"]: d for d in synthetic_documents(40, schema_props=12)}
    group = {g: sorted(n for n, d in small.items() if d["spec"]["group"] == g) for g in (G1, G2, G3, G4)}
    old = [small[n] for n in (*group[G1][2:], *group[G2], *group[G3])]
    grown = {*group[G1][2:4], group[G3][0]}
    new = [large[n] if n in grown else small[n] for n in (*group[G1], *group[G2][1:], *group[G3], *group[G4])]
    return old, new, group[G2][0]


def _kubectl_upgrade(handle: LabHandle, new: list[dict]) -> dict[str, set[str]]:
    """The upgrade as the README's rules count it, from what kubectl lists."""
    import fnmatch

    groups = {d["spec"]["group"] for d in new}
    mrds = {m["metadata"]["name"]: m["spec"].get("state", "Inactive") for m in handle.kubectl_json("get", MRDS)["items"]
            if m["spec"]["group"] in groups}
    patterns = [p for policy in handle.kubectl_json("get", MRAPS)["items"] for p in policy["spec"]["activate"]]
    cluster_crds = {c["metadata"]["name"]: c["spec"] for c in handle.kubectl_json("get", "crds")["items"]
                    if c["spec"]["group"] in groups}
    release = {d["metadata"]["name"]: d["spec"] for d in new}
    active = {n for n in release if mrds.get(n) == "Active" or n in cluster_crds
              or any(fnmatch.fnmatchcase(n, p) for p in patterns)}  # safe-start: Inactive in the package
    both = active & cluster_crds.keys()
    changed = {n for n in both if shape(cluster_crds[n]) != shape(release[n])}
    return {"mrds": set(mrds), "mrds_added": release.keys() - mrds.keys(), "mrds_removed": mrds.keys() - release.keys(),
            "mrds_activated": (release.keys() - mrds.keys()) & active, "crds_added": active - cluster_crds.keys(),
            "crds_removed": cluster_crds.keys() - active, "crds_changed": changed, "crds_unchanged": both - changed}


def test_mrap_prices_a_provider_release_over_the_one_crossplane_runs(crossplane_lab, tmp_path):
    from crdscope.base.labrecord import lab_registry

    handle = crossplane_lab
    old, new, named = _releases()
    done = crdscope("package", str(write_release(tmp_path / "old", old)), "--name", "provider-upgrade",
                    "--safe-start", "--push", "--registry", lab_registry(XP_LAB), "--output", str(tmp_path / "v1"),
                    "--json")
    assert done.returncode == 0, done.stderr
    [package] = json.loads(done.stdout)["packages"]
    handle.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "pkg.crossplane.io/v1", "kind": "Provider", "metadata": {"name": "provider-upgrade"},
        "spec": {"package": package["reference"]}}))
    old_names = {d["metadata"]["name"] for d in old}
    wait_for(lambda: old_names <= {m["metadata"]["name"] for m in handle.kubectl_json("get", MRDS)["items"]},
             timeout=300, interval=1, message="the old release's MRDs")
    handle.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "apiextensions.crossplane.io/v1alpha1", "kind": "ManagedResourceActivationPolicy",
        "metadata": {"name": "upgrade"}, "spec": {"activate": [f"*.{G1}", named]}}))
    activated = {n for n in old_names if n.endswith("." + G1)} | {named}
    wait_for(lambda: activated <= {c["metadata"]["name"] for c in handle.kubectl_json("get", "crds")["items"]
                                   if established(c)}, timeout=300, interval=1, message="the activated CRDs")
    done = crdscope("package", str(write_release(tmp_path / "new", new)), "--name", "provider-upgrade",
                    "--safe-start", "--version", "v0.2.0", "--output", str(tmp_path / "v2"), "--json")
    assert done.returncode == 0, done.stderr

    def mrap(*args: str) -> subprocess.CompletedProcess:
        return crdscope("mrap", "--from", str(tmp_path / "v2"), "--kubeconfig", handle.kubeconfig, "--context",
                        handle.admin_context, *args)

    expected = _kubectl_upgrade(handle, new)
    done = mrap("--json")
    assert done.returncode == 0, done.stderr
    upgrade = json.loads(done.stdout)["upgrade"]
    assert upgrade["installed_mrds"] == len(expected["mrds"]) == 22
    assert set(upgrade["mrd_names"]["added"]) == expected["mrds_added"]
    assert set(upgrade["mrd_names"]["removed"]) == expected["mrds_removed"] == {named}
    assert set(upgrade["mrd_names"]["activated"]) == expected["mrds_activated"]
    assert set(upgrade["delta"]["added"]) == expected["crds_added"]
    assert set(upgrade["delta"]["removed"]) == expected["crds_removed"] == {named}
    assert {c["name"] for c in upgrade["delta"]["changed"]} == expected["crds_changed"]
    assert upgrade["crds_unchanged"] == len(expected["crds_unchanged"])
    # By construction: G1's two new kinds (its glob) Active at once, G4's Inactive; two G1 schemas grew
    # (G3's grew too, but its MRDs are Inactive: no CRD), and the named G2 kind is gone.
    assert (upgrade["mrds_added"], upgrade["mrds_activated"], upgrade["mrds_removed"]) == (3, 2, 1)
    assert (upgrade["crds_added"], upgrade["crds_removed"], upgrade["crds_changed"]) == (2, 1, 2)
    assert upgrade["mrds_memory_added_mib"] == pytest.approx(2 * 0.8, abs=0.05)

    crossed = mrap("--fail-if", "upgrade.crds_added>1", "--fail-if", "upgrade.mrds_removed>1")
    assert crossed.returncode == 1, crossed.stderr
    assert "Upgrade:" in crossed.stdout
    assert crossed.stderr.strip().splitlines()[-1] == \
        "crdscope: --fail-if crossed: upgrade.crds_added>1 (upgrade.crds_added = 2)"
    passed = mrap("--fail-if", "upgrade.crds_added>2", "--fail-if", "upgrade.mrds_removed>1")
    assert passed.returncode == 0, passed.stderr
    # A gate crossed before --apply: nothing is written.
    refused = crdscope("mrap", "--apply", "--kubeconfig", handle.kubeconfig, "--context", handle.admin_context,
                       "--fail-if", "mrds>0")
    assert refused.returncode == 1, refused.stderr
    assert "nothing written" in refused.stderr
    assert {p["metadata"]["name"] for p in handle.kubectl_json("get", MRAPS)["items"]} == {"upgrade"}
