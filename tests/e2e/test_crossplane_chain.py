"""Crossplane's install chain against the lab, made by hand as Crossplane v2.0.0 would make it.

The core CRDs come from the shared crossplane-core archive; a Provider, two ProviderRevisions, MRDs,
CRDs and an MRAP are created with kubectl with Crossplane's labels and ownerReferences, their status
written through the status subresource (no Crossplane runs: tests/e2e/test_crossplane.py has the real
core).  ``crdscope probe inventory --json`` must agree with ``kubectl get providers,providerrevisions,
mrds,mraps,crds``.
"""

from __future__ import annotations

import fnmatch
import json
import subprocess
import sys
import tarfile
import uuid
from pathlib import Path

import pytest
import yaml

from crdscope.base.crossplane import MRAPS_CRD, MRDS_CRD, PROVIDERS_CRD, REVISIONS_CRD
from crdscope.connection.crossplane_read import TABLE_ACCEPT, list_all
from tests.conftest import SHARED_CRDS
from tests.crdsets import delete_crds, tiny_crd
from tests.helpers import established, wait_for

pytestmark = pytest.mark.lab

API_CRDS = (PROVIDERS_CRD, REVISIONS_CRD, MRDS_CRD, MRAPS_CRD)
STAMP = "2026-01-02T03:04:05Z"
#: What Crossplane's runtime controller writes while the provider Deployment has no Available condition.
NO_AVAILABLE = ('post establish runtime hook failed for package: provider package deployment has no condition '
                'of type "Available" yet')


def crdscope(lab, *args: str, context: str | None = None) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "crdscope.cli.main", *args, "--kubeconfig", lab.kubeconfig,
            "--context", context or lab.admin_context]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


@pytest.fixture
def crossplane_apis(lab, tmp_path: Path):
    """Crossplane's Provider, ProviderRevision, MRD and MRAP APIs, removed (with every object) afterwards."""
    archive = SHARED_CRDS / "crossplane-core.tar.xz"
    if not archive.exists():
        pytest.skip(f"{archive} is absent")
    files = []
    with tarfile.open(archive, "r:xz") as tar:
        for member in tar.getmembers():
            group_plural = Path(member.name).stem  # <group>_<plural>
            if "_" in group_plural and ".".join(reversed(group_plural.split("_", 1))) in API_CRDS:
                files.append(tmp_path / Path(member.name).name)
                files[-1].write_bytes(tar.extractfile(member).read())
    assert len(files) == len(API_CRDS)
    lab.kubectl("apply", "--server-side", *[f"-f={f}" for f in files])
    lab.kubectl("wait", "--for=condition=Established", "--timeout=60s", *[f"crd/{n}" for n in API_CRDS])
    yield
    delete_crds(lab, *API_CRDS)


def condition(kind: str, status: str, reason: str, message: str = "") -> dict:
    return {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": STAMP}


def ref(obj: dict, controller: bool) -> dict:
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
            "uid": obj["metadata"]["uid"], "controller": controller, "blockOwnerDeletion": True}


def create(lab, tmp_path: Path, document: dict) -> dict:
    path = tmp_path / f"{uuid.uuid4().hex}.yaml"
    path.write_text(yaml.safe_dump(document))
    return json.loads(lab.kubectl("create", "-f", str(path), "-o", "json").stdout)


def patch_status(lab, resource: str, name: str, status: dict) -> None:
    lab.kubectl("patch", resource, name, "--subresource=status", "--type=merge", "-p", json.dumps({"status": status}))


def mrd(name: str, state: str) -> dict:
    plural, _, group = name.partition(".")
    kind = plural[:-1].capitalize()
    return {"apiVersion": "apiextensions.crossplane.io/v1alpha1", "kind": "ManagedResourceDefinition",
            "metadata": {"name": name},
            "spec": {"group": group, "scope": "Cluster", "state": state,
                     "names": {"kind": kind, "plural": plural, "singular": plural[:-1], "listKind": f"{kind}List"},
                     "versions": [{"name": "v1", "served": True, "storage": True}]}}


def make_chain(lab, tmp_path: Path, tag: str) -> dict:
    """Provider -> revisions 1 (Inactive) and 2 (Active, safe-start) -> 3 MRDs (2 Active) -> 2 CRDs; an MRAP."""
    name = f"provider-chain-{tag}"
    group = f"chain-{tag}.crdscope.test"
    provider = create(lab, tmp_path, {"apiVersion": "pkg.crossplane.io/v1", "kind": "Provider",
                                      "metadata": {"name": name},
                                      "spec": {"package": f"registry.test/{name}:v2"}})
    revisions = []
    for number, state in ((1, "Inactive"), (2, "Active")):
        revisions.append(create(lab, tmp_path, {
            "apiVersion": "pkg.crossplane.io/v1", "kind": "ProviderRevision",
            "metadata": {"name": f"{name}-r{number}", "labels": {"pkg.crossplane.io/package": name},
                         "ownerReferences": [ref(provider, controller=True)]},
            "spec": {"desiredState": state, "image": f"registry.test/{name}:v{number}", "revision": number}}))
    old, current = revisions
    states = {f"buckets.{group}": "Active", f"tables.{group}": "Active", f"queues.{group}": "Inactive"}
    mrds = {}
    for mrd_name, state in states.items():
        document = mrd(mrd_name, state)
        document["metadata"]["ownerReferences"] = [ref(current, controller=True), ref(provider, controller=False)]
        mrds[mrd_name] = create(lab, tmp_path, document)
    crd_names = []
    for mrd_name, state in states.items():
        if state != "Active":
            continue
        kind = mrd_name.split(".")[0][:-1].capitalize()
        document = tiny_crd(group, kind)
        # As the MRD controller makes it: owned by the MRD, controlled by the MRD's controller.
        # The bucket CRD is still controlled by the old revision (one an upgrade has not taken over).
        controller = old if mrd_name.startswith("buckets.") else current
        document["metadata"]["ownerReferences"] = [ref(mrds[mrd_name], controller=False), ref(controller, True)]
        crd_names.append(create(lab, tmp_path, document)["metadata"]["name"])
    lab.kubectl("wait", "--for=condition=Established", "--timeout=60s", *[f"crd/{n}" for n in crd_names])
    for mrd_name, state in states.items():
        status = condition("Established", "True", "EstablishedManagedResource") if state == "Active" else \
            condition("Established", "False", "InactiveManagedResource")
        patch_status(lab, "managedresourcedefinition", mrd_name, {"conditions": [status]})
    mrd_refs = [{"apiVersion": "apiextensions.crossplane.io/v1alpha1", "kind": "ManagedResourceDefinition",
                 "name": n, "uid": mrds[n]["metadata"]["uid"]} for n in states]
    patch_status(lab, "providerrevision", old["metadata"]["name"], {
        "objectRefs": mrd_refs[:1], "conditions": [condition("RevisionHealthy", "True", "HealthyPackageRevision")]})
    patch_status(lab, "providerrevision", current["metadata"]["name"], {
        "objectRefs": mrd_refs, "capabilities": ["safe-start"],
        "conditions": [condition("RevisionHealthy", "True", "HealthyPackageRevision"),
                       condition("RuntimeHealthy", "False", "UnhealthyPackageRevision", NO_AVAILABLE)]})
    patch_status(lab, "provider", name, {
        "currentRevision": current["metadata"]["name"], "resolvedPackage": f"registry.test/{name}:v2",
        "conditions": [condition("Installed", "True", "ActivePackageRevision"),
                       condition("Healthy", "False", "UnhealthyPackageRevision",
                                 f'Package runtime health is "False" with message: {NO_AVAILABLE}')]})
    mrap_name = f"activate-{tag}"
    create(lab, tmp_path, {"apiVersion": "apiextensions.crossplane.io/v1alpha1",
                           "kind": "ManagedResourceActivationPolicy", "metadata": {"name": mrap_name},
                           "spec": {"activate": [f"buckets.{group}", f"*.{group}"]}})
    patch_status(lab, "managedresourceactivationpolicy", mrap_name, {
        "activated": sorted(n for n, s in states.items() if s == "Active"),
        "conditions": [condition("Healthy", "True", "Running")]})
    return {"name": name, "group": group, "crds": crd_names, "mrap": mrap_name}


def kubectl_view(lab) -> dict:
    """What kubectl says, in one listing."""
    items = lab.kubectl_json("get", "providers,providerrevisions,mrds,mrap,crds")["items"]
    view: dict[str, list[dict]] = {}
    for item in items:
        view.setdefault(item["kind"], []).append(item)
    return view


def controller_of(item: dict) -> dict | None:
    return next((r for r in item["metadata"].get("ownerReferences") or [] if r.get("controller")), None)


def test_inventory_follows_the_chain_as_kubectl_lists_it(lab, crossplane_apis, tmp_path: Path):
    made = make_chain(lab, tmp_path, uuid.uuid4().hex[:6])
    try:
        sample = json.loads(wait_for(lambda: crdscope(lab, "probe", "inventory", "--json").stdout,
                                     timeout=60, message="an inventory sample"))
        view = kubectl_view(lab)
        assert sample["error"] is None
        provider = next(p for p in view["Provider"] if p["metadata"]["name"] == made["name"])
        revisions = sorted((r for r in view["ProviderRevision"]
                            if (r["metadata"].get("labels") or {}).get("pkg.crossplane.io/package") == made["name"]),
                           key=lambda r: -r["spec"]["revision"])
        names = {r["metadata"]["name"] for r in revisions}
        mrds = {m["metadata"]["name"]: m for m in view["ManagedResourceDefinition"]}
        listed = {ref["name"] for r in revisions for ref in r["status"].get("objectRefs") or []
                  if ref["kind"] == "ManagedResourceDefinition"}
        crds = [c for c in view["CustomResourceDefinition"]
                if (controller_of(c) or {}).get("kind") == "ProviderRevision" and controller_of(c)["name"] in names]
        assert len(crds) == len(made["crds"]) == 2

        # The CRD owner shown is the Provider, whichever of its revisions controls the CRD.
        owner = f"Provider/{made['name']}"
        assert sample["by_owner"][owner] == len(crds)
        assert not any(o.startswith("ProviderRevision/") and o.partition("/")[2] in names for o in sample["by_owner"])
        [chain] = [p for p in sample["crossplane"]["providers"] if p["name"] == made["name"]]
        assert sample["crossplane"]["present"] is True and chain["owner"] == owner
        assert chain["package"] == provider["spec"]["package"]
        assert chain["current_revision"] == provider["status"]["currentRevision"]
        assert chain["healthy"] == "False" and chain["installed"] == "True"
        assert [(r["name"], r["revision"], r["desired_state"]) for r in chain["revisions"]] == [
            (r["metadata"]["name"], r["spec"]["revision"], r["spec"]["desiredState"]) for r in revisions]
        assert [r["safe_start"] for r in chain["revisions"]] == [
            "safe-start" in (r["status"].get("capabilities") or []) for r in revisions]
        assert [r["mrd_refs"] for r in chain["revisions"]] == [len(r["status"]["objectRefs"]) for r in revisions]
        # MRDs by spec.state and Established, as kubectl lists them.
        states = [mrds[n]["spec"]["state"] for n in listed]
        assert (chain["mrds"], chain["mrds_active"], chain["mrds_inactive"]) == (
            len(listed), states.count("Active"), states.count("Inactive"))
        assert chain["mrds_established"] == sum(
            established(mrds[n]) for n in listed)
        assert list(chain["active_mrd_names"]) == sorted(n for n in listed if mrds[n]["spec"]["state"] == "Active")
        assert list(chain["inactive_mrd_names"]) == sorted(
            n for n in listed if mrds[n]["spec"]["state"] == "Inactive")
        # CRDs created and Established; the active revision will have one per Active MRD it lists.
        assert (chain["crds"], chain["crds_established"]) == (len(crds), sum(established(i) for i in crds))
        active_refs = [ref["name"] for ref in revisions[0]["status"]["objectRefs"]]
        assert chain["expected_crds"] == sum(mrds[n]["spec"]["state"] == "Active" for n in active_refs)
        # The lab runs no kubelet: a Deployment that never becomes Available is a state, not a fault.
        nodes = lab.kubectl_json("get", "nodes")["items"]
        assert chain["runtime"] == ("no-kubelet" if not nodes else "deployment-unavailable")
        assert sample["crossplane"]["has_nodes"] is bool(nodes)
        assert [r["runtime"] for r in chain["revisions"]] == [chain["runtime"], "inactive"]
        # The MRAP: its patterns, what it activated, what matches now.
        kubectl_mrap = next(m for m in view["ManagedResourceActivationPolicy"] if m["metadata"]["name"] == made["mrap"])
        [mrap] = [m for m in sample["crossplane"]["mraps"] if m["name"] == made["mrap"]]
        assert list(mrap["patterns"]) == kubectl_mrap["spec"]["activate"]
        assert (mrap["activated"], list(mrap["activated_names"])) == (
            len(kubectl_mrap["status"]["activated"]), kubectl_mrap["status"]["activated"])
        matching = [n for n in mrds if any(fnmatch.fnmatchcase(n, p) for p in kubectl_mrap["spec"]["activate"])]
        assert (mrap["matching"], mrap["matching_inactive"]) == (
            len(matching), sum(mrds[n]["spec"]["state"] == "Inactive" for n in matching))
        assert mrap["healthy"] == "True"
        # The old MRD counts agree too.
        all_states = [m["spec"]["state"] for m in mrds.values()]
        assert (sample["mrds"]["total"], sample["mrds"]["active"], sample["mrds"]["inactive"]) == (
            len(all_states), all_states.count("Active"), all_states.count("Inactive"))

        # For people: the chain as a table.
        text = crdscope(lab, "probe", "inventory").stdout
        row = next(line for line in text.splitlines() if line.strip().startswith(made["name"]))
        assert provider["spec"]["package"] in row and chain["runtime"] in row
        assert "activation policies:" in text
    finally:
        delete_crds(lab, *made["crds"])


def test_a_user_without_crossplane_rights_gets_reasons(lab, crossplane_apis, tmp_path: Path):
    made = make_chain(lab, tmp_path, uuid.uuid4().hex[:6])
    try:
        done = crdscope(lab, "probe", "inventory", "--json", context=lab.restricted_context)
        assert done.returncode == 0, done.stderr
        sample = json.loads(done.stdout)
        assert sample["error"] is None and sample["crossplane"]["present"] is True
        reasons = sample["crossplane"]["unobservable"]
        names = {p["name"] for p in sample["crossplane"]["providers"]}
        # Whatever the role allows is read; what it does not is a reason naming the refusal.
        assert made["name"] in names or "403" in reasons.get("providers", "")
        if "403" in reasons.get("providerrevisions", ""):
            assert sample["by_owner"][f"ProviderRevision/{made['name']}-r2"] == 1
        else:
            assert sample["by_owner"][f"Provider/{made['name']}"] == 2
    finally:
        delete_crds(lab, *made["crds"])


async def test_table_pages_from_the_watch_cache_follow_continue_tokens(lab, crossplane_apis, tmp_path: Path):
    made = make_chain(lab, tmp_path, uuid.uuid4().hex[:6])
    try:
        async with lab.cluster() as cluster:
            answer = await list_all(cluster, "/apis/apiextensions.crossplane.io/v1alpha1/managedresourcedefinitions",
                                    accept=TABLE_ACCEPT, limit=1)
        assert not isinstance(answer, str), answer
        rows, columns = answer
        assert {c["name"].upper() for c in columns} >= {"NAME", "STATE", "ESTABLISHED"}
        mine = sorted(r["cells"][0] for r in rows if r["cells"][0].endswith(made["group"]))
        assert mine == sorted(f"{p}.{made['group']}" for p in ("buckets", "tables", "queues"))
        assert all("object" not in r or r["object"] is None for r in rows)  # no schemas sent
    finally:
        delete_crds(lab, *made["crds"])
