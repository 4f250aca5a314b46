"""The CRD inventory against the lab: kubectl-made CRDs, owners, states, Crossplane objects, restarts."""

from __future__ import annotations

import asyncio
import collections
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from crdscope.connection.crdwatch import CRDWatch
from crdscope.connection.credentials import parse_rfc3339
from crdscope.probes.inventory import summarize
from crdscope.base.samples.inventory import InventorySample
from tests.conftest import SHARED_CRDS
from tests.crdsets import delete_crds, tiny_crd, write_tiny_crds
from tests.helpers import async_wait_for, condition_true, wait_for

pytestmark = pytest.mark.lab

CRDSCOPE = [sys.executable, "-m", "crdscope.cli.main"]
HOLD_FINALIZER = "crdscope.test/hold"


def crdscope_json(*args: str) -> dict:
    done = subprocess.run([*CRDSCOPE, *args, "--json"], check=False, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def kubectl_crds(lab) -> list[dict]:
    return lab.kubectl_json("get", "crd")["items"]


def apply_documents(lab, documents: list[dict], tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    lab.kubectl("apply", "-f", str(path))
    return path


def delete_and_wait(lab, names: list[str]) -> None:
    if not names:
        return
    for name in names:  # a held CRD would never go away
        lab.kubectl("patch", "crd", name, "--type=json",
                    "-p", '[{"op": "remove", "path": "/metadata/finalizers"}]', check=False)
    delete_crds(lab, *names)


def test_kubectl_crds_appear_with_owner_and_state(lab, tmp_path: Path):
    group = f"inv-{uuid.uuid4().hex[:8]}.crdscope.test"
    revision = f"provider-made-up-{uuid.uuid4().hex[:6]}"
    owned = tiny_crd(group, "Owned")
    # The server does not check that a cluster-scoped owner exists (only the garbage
    # collector would, and the lab runs no controller manager).
    owned["metadata"]["ownerReferences"] = [{
        "apiVersion": "pkg.crossplane.io/v1", "kind": "ProviderRevision", "name": revision,
        "uid": str(uuid.uuid4()), "controller": True}]
    labelled = tiny_crd(group, "Labelled", labels={"pkg.crossplane.io/provider": "provider-family-made-up"})
    ours = tiny_crd(group, "Ours", labels={"app.kubernetes.io/managed-by": "crdscope"})
    plain = tiny_crd(group, "Plain")
    # Same kind as `plain` in the same group: its names are refused (KindConflict), it never
    # becomes Established, and counts as not yet accepted.
    conflicting = tiny_crd(group, "Plain")
    conflicting["metadata"]["name"] = f"otherplains.{group}"
    conflicting["spec"]["names"].update(plural="otherplains", singular="otherplain")
    held = tiny_crd(group, "Held")
    held["metadata"]["finalizers"] = [HOLD_FINALIZER]
    documents = [owned, labelled, ours, plain, conflicting, held]
    names = [d["metadata"]["name"] for d in documents]
    apply_documents(lab, documents, tmp_path, "owners")
    try:
        lab.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                    *[f"crd/{d['metadata']['name']}" for d in (owned, labelled, ours, plain, held)])
        lab.kubectl("delete", "crd", held["metadata"]["name"], "--wait=false")  # stays Terminating

        def agreeing() -> tuple[dict, list[dict]] | None:
            before = kubectl_crds(lab)
            sample = crdscope_json("probe", "inventory", "--kubeconfig", lab.kubeconfig)
            after = kubectl_crds(lab)
            same = [i["metadata"]["resourceVersion"] for i in before] == \
                   [i["metadata"]["resourceVersion"] for i in after]
            return (sample, after) if same else None

        sample, items = wait_for(agreeing, timeout=60, message="a quiet moment to compare with kubectl")
        assert sample["error"] is None
        ours_by_name = {i["metadata"]["name"]: i for i in items if i["metadata"]["name"] in names}
        assert len(ours_by_name) == len(names)
        # Totals, as kubectl counts them.
        assert sample["crds"] == len(items)
        assert sample["established"] == sum(condition_true(i, "Established") for i in items)
        assert sample["by_state"]["Terminating"] == sum(bool(i["metadata"].get("deletionTimestamp")) for i in items)
        assert sample["by_state"]["Pending"] == sum(not condition_true(i, "NamesAccepted") for i in items)
        assert sample["by_state"]["Pending"] >= 1  # the conflicting one
        assert sample["by_state"]["Terminating"] >= 1  # the held one
        assert not condition_true(ours_by_name[conflicting["metadata"]["name"]], "NamesAccepted")
        assert sum(sample["by_owner"].values()) == len(items)
        # Owners: ownerReference, then Crossplane's package labels, then crdscope's label, else other.
        assert sample["by_owner"][f"ProviderRevision/{revision}"] == 1
        assert sample["by_owner"]["crossplane/provider-family-made-up"] == 1
        plain_kubectl = [i for i in items if not i["metadata"].get("ownerReferences")
                         and not any(k.startswith("pkg.crossplane.io/") for k in i["metadata"].get("labels") or {})
                         and (i["metadata"].get("labels") or {}).get("app.kubernetes.io/managed-by") != "crdscope"]
        assert sample["by_owner"]["other"] == len(plain_kubectl)
        crdscope_kubectl = sum((i["metadata"].get("labels") or {}).get("app.kubernetes.io/managed-by") == "crdscope"
                               for i in items)
        assert sample["crdscope_owned"] == crdscope_kubectl >= 1
        # Creation rate: creationTimestamps in the 60 s before the sample, by hand.
        created = [parse_rfc3339(i["metadata"]["creationTimestamp"]) for i in items]
        recent = sum(sample["timestamp"] - 60 <= c <= sample["timestamp"] + 1 for c in created)
        assert sample["per_minute"] == pytest.approx(recent)
        assert sample["per_minute"] >= len(names) - 1  # ours were created moments ago (the held one too)
        # "other" has a CRD that cannot be Established: it is still installing, its backlog as kubectl sees it.
        other = sample["installing"]["other"]
        assert other["backlog"] == sum(not condition_true(i, "Established") and not i["metadata"].get("deletionTimestamp")
                                       for i in plain_kubectl) >= 1
        assert other["expected"] is None and other["eta_basis"] in ("backlog", "")
        assert (other["eta_seconds"] is None) == (other["eta_basis"] == "") != (other["eta_note"] == "")
        assert sample["mrds"]["present"] is False and sample["mrds"]["unobservable"]
    finally:
        delete_and_wait(lab, names)


@pytest.fixture
def crossplane_core(lab, tmp_path: Path):
    """The two Crossplane v2 CRDs the inventory reads (MRDs, ProviderRevisions), removed afterwards."""
    archive = SHARED_CRDS / "crossplane-core.tar.xz"
    if not archive.exists():
        pytest.skip(f"{archive} is absent")
    import tarfile

    wanted = ("apiextensions.crossplane.io_managedresourcedefinitions.yaml", "pkg.crossplane.io_providerrevisions.yaml")
    with tarfile.open(archive, "r:xz") as tar:
        for member in tar.getmembers():
            if Path(member.name).name in wanted:
                (tmp_path / Path(member.name).name).write_bytes(tar.extractfile(member).read())
    names = ["managedresourcedefinitions.apiextensions.crossplane.io", "providerrevisions.pkg.crossplane.io"]
    lab.kubectl("apply", "--server-side", *[f"-f={tmp_path / w}" for w in wanted])
    lab.kubectl("wait", "--for=condition=Established", "--timeout=60s", *[f"crd/{n}" for n in names])
    yield
    delete_and_wait(lab, names)


def mrd(name: str, state: str) -> dict:
    plural, _, group = name.partition(".")
    return {"apiVersion": "apiextensions.crossplane.io/v1alpha1", "kind": "ManagedResourceDefinition",
            "metadata": {"name": name},
            "spec": {"group": group, "scope": "Cluster", "state": state,
                     "names": {"kind": plural.capitalize()[:-1], "plural": plural},
                     "versions": [{"name": "v1", "served": True, "storage": True}]}}


def test_crossplane_mrds_and_revision_eta(lab, crossplane_core, tmp_path: Path):
    tag = uuid.uuid4().hex[:6]
    mrds = [mrd(f"buckets{i}s.mrd-{tag}.crdscope.test", state)
            for i, state in enumerate(["Active", "Active", "Inactive"])]
    revision_name = f"provider-made-up-{tag}"
    revision = {"apiVersion": "pkg.crossplane.io/v1", "kind": "ProviderRevision",
                "metadata": {"name": revision_name},
                "spec": {"desiredState": "Active", "image": "example.test/provider:v0", "revision": 1}}
    apply_documents(lab, [*mrds, revision], tmp_path, "crossplane-objects")
    crd_names: list[str] = []
    try:
        uid = lab.kubectl_json("get", "providerrevision", revision_name)["metadata"]["uid"]
        group = f"pr-{tag}.crdscope.test"
        expected_refs = [{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                          "name": f"kind{i}s.{group}"} for i in range(5)]
        lab.kubectl("patch", "providerrevision", revision_name, "--subresource=status", "--type=merge",
                    "-p", json.dumps({"status": {"objectRefs": expected_refs}}))
        installed = [tiny_crd(group, f"Kind{i}") for i in range(2)]
        for document in installed:
            document["metadata"]["ownerReferences"] = [{
                "apiVersion": "pkg.crossplane.io/v1", "kind": "ProviderRevision", "name": revision_name,
                "uid": uid, "controller": True}]
        crd_names = [d["metadata"]["name"] for d in installed]
        apply_documents(lab, installed, tmp_path, "revision-crds")
        lab.kubectl("wait", "--for=condition=Established", "--timeout=60s", *[f"crd/{n}" for n in crd_names])

        sample = crdscope_json("probe", "inventory", "--kubeconfig", lab.kubeconfig)
        listed = lab.kubectl_json("get", "managedresourcedefinitions")["items"]
        states = collections.Counter(i["spec"].get("state") for i in listed)
        assert sample["mrds"]["present"] is True and sample["mrds"]["unobservable"] is None
        assert sample["mrds"]["version"] == "v1alpha1"
        assert sample["mrds"]["total"] == len(listed)
        assert (sample["mrds"]["active"], sample["mrds"]["inactive"]) == (states["Active"], states["Inactive"])
        owner = f"ProviderRevision/{revision_name}"
        progress = sample["installing"][owner]
        assert progress["expected"] == len(expected_refs)
        assert progress["crds"] == progress["established"] == len(installed)
        assert progress["eta_basis"] == "expected"
        # (expected - established) at the owner's Established rate over the window, by hand.
        rate = progress["established_per_minute"]
        assert rate >= len(installed)
        assert progress["eta_seconds"] == pytest.approx((len(expected_refs) - len(installed)) / rate * 60)
    finally:
        lab.kubectl("delete", "--ignore-not-found", "-f", str(tmp_path / "crossplane-objects.yaml"))
        delete_and_wait(lab, crd_names)


async def _kubectl_uids(lab) -> dict[str, str]:
    items = await asyncio.to_thread(kubectl_crds, lab)
    return {i["metadata"]["name"]: i["metadata"]["uid"] for i in items}


async def test_watch_survives_a_restarted_apiserver(fresh_lab, tmp_path: Path):
    lab = fresh_lab
    first = write_tiny_crds(tmp_path / "first", 12, prefix="before")
    await asyncio.to_thread(lab.kubectl, "apply", "-f", str(first))
    async with lab.cluster() as cluster:
        watch = CRDWatch(cluster, backoff_max=2.0)
        events: list[tuple[str, str, str]] = []
        watch.add_listener(lambda e: events.append((e.type, e.record.name, e.record.uid)))
        task = asyncio.create_task(watch.run())
        try:
            await asyncio.wait_for(watch.synced.wait(), 30)
            assert await watch.wait_until(lambda crds: len(crds) >= 12, timeout=30)
            before = await _kubectl_uids(lab)
            names = sorted(before)

            # 1. The watch follows the server down and back, and resumes from its resourceVersion.
            await asyncio.to_thread(lab.lab.kill, "apiserver")
            await async_wait_for(lambda: not watch.status.connected, timeout=30, message="the watch to notice")
            await asyncio.to_thread(lab.lab.start, "apiserver")
            later = write_tiny_crds(tmp_path / "later", 6, prefix="after")
            await asyncio.to_thread(lab.kubectl, "apply", "-f", str(later))
            await asyncio.to_thread(lab.kubectl, "delete", "crd", "--wait=true", *names[:3])
            await _replace(lab, first, names[3])
            await _until_watch_matches(lab, watch, replaced={names[3]: before[names[3]]})
            assert watch.status.reconnects >= 1 and watch.status.connected
            assert sum(kind == "ADDED" for kind, *_ in events) == 12 + 6 + 1  # no re-ADDED survivor
            _assert_counted_once(events, watch)

            # 2. Changes made while the watch is away entirely (stopped before the kill, started after
            # the restart): its list reconciles them - deletions, additions, a replaced uid.
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await asyncio.to_thread(lab.lab.kill, "apiserver")
            await asyncio.to_thread(lab.lab.start, "apiserver")
            middle = await _kubectl_uids(lab)
            third = write_tiny_crds(tmp_path / "third", 4, prefix="away")
            await asyncio.to_thread(lab.kubectl, "apply", "-f", str(third))
            away_names = sorted(n for n in middle if ".after." in n)
            await asyncio.to_thread(lab.kubectl, "delete", "crd", "--wait=true", *away_names[:2])
            await _replace(lab, later, away_names[2])
            lists = watch.status.lists
            task = asyncio.create_task(watch.run())
            await _until_watch_matches(lab, watch, replaced={away_names[2]: middle[away_names[2]]})
            assert watch.status.lists == lists + 1
            _assert_counted_once(events, watch)
            # The inventory of this watch counts what kubectl counts.
            sample = summarize(watch.crds.values())
            assert isinstance(sample, InventorySample)
            assert sample.crds == len(await _kubectl_uids(lab)) == 12 + 6 - 3 + 4 - 2
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def _replace(lab, source: Path, name: str) -> None:
    """Delete CRD ``name`` and create it again from ``source`` (same name, new uid)."""
    await asyncio.to_thread(lab.kubectl, "delete", "crd", "--wait=true", name)
    again = [d for d in yaml.safe_load_all(source.read_text()) if d["metadata"]["name"] == name]
    await asyncio.to_thread(lab.kubectl, "apply", "-f", "-", input=yaml.safe_dump_all(again))


async def _until_watch_matches(lab, watch: CRDWatch, replaced: dict[str, str]) -> None:
    async def matches() -> bool:
        server = await _kubectl_uids(lab)
        mine = {name: record.uid for name, record in watch.crds.items()}
        return server == mine and all(server.get(n) not in (None, old) for n, old in replaced.items())

    await async_wait_for(matches, timeout=90, interval=0.5, message="the watch to match kubectl")


def _assert_counted_once(events: list[tuple[str, str, str]], watch: CRDWatch) -> None:
    """Per uid, ADDED minus DELETED never leaves 0..1 and ends at 1 exactly for the present CRDs."""
    balance: collections.Counter = collections.Counter()
    for kind, name, uid in events:
        balance[uid] += {"ADDED": 1, "DELETED": -1}.get(kind, 0)
        assert balance[uid] in (0, 1), f"{name} ({uid}) counted twice"
    assert {uid for uid, n in balance.items() if n == 1} == {r.uid for r in watch.crds.values()}
