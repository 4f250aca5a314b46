"""Crossplane remedies applied as written on real Crossplane (issue 46 item 4): what a finding's remedy
names (an MRAP, the MRDs and CRDs to delete) is parsed out of it and applied, and the finding closes
and stays closed.

One lab with real Crossplane (no default MRAP) and the platform of ``test_mrap.py``: a safe-start
family crdscope generates and packages (storage, queue, identity), a pipeline Composition composing a
kind of storage and one of queue, and the user's own MRAP whose entry ``*.identity.m...`` activated
identity kinds no one uses; beside them a provider packaged without safe-start (the network group),
whose kinds were all activated at install.  A monitor runs as ``watch --headless`` opens it, its
Crossplane chain read every 5 s (``[cadences] crossplane``, lowered from 30 s to keep this short).
kubectl is the reference for every MRD and CRD.
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
from pathlib import Path

import pytest
import yaml

from crdscope.findings.crossplane import COMPOSED_INACTIVE, UNUSED_ACTIVE
from crdscope.findings.model import CLOSED, OPENED
from tests.conftest import LabHandle
from tests.e2e.test_mrap import COUNT, DOMAIN, MRD, _documents, _established_crds, _mrds, _platform, crdscope
from tests.helpers import async_wait_for, steady_cadences

pytestmark = pytest.mark.lab

LAB_NAME = "remedies"
#: The Crossplane chain is read this often (seconds): 30 s after a change by default, 120 s at rest.
CHAIN_SECONDS = 5.0
#: Chain reads a closed finding must stay closed through.
HELD_READS = 3
PLAIN = "provider-plain"
MRAP_WRITTEN = re.compile(r'(\{"apiVersion": "apiextensions\.crossplane\.io/v1alpha1", "kind": '
                          r'"ManagedResourceActivationPolicy", .*?\]\}\})')
KUBECTL_WRITTEN = re.compile(r"`(kubectl delete (?:managedresourcedefinitions|customresourcedefinitions) [^`]+)`")


@pytest.fixture(scope="module")
def lab(lab_binaries) -> LabHandle:
    from crdscope.lab.controlplane import Lab

    done = crdscope("lab", "up", "--name", LAB_NAME, "--crossplane", "--activation", "none")
    the_lab = Lab(name=LAB_NAME)
    if done.returncode != 0:
        the_lab.down()
        pytest.fail(done.stderr)
    state = the_lab.require()
    yield LabHandle(lab=the_lab, state=state, kubeconfig=state.kubeconfig, admin_context=state.admin_context)
    the_lab.down()


def install(lab: LabHandle, tmp_path: Path, by_group: dict[str, list[dict]]) -> dict[str, set[str]]:
    """The safe-start members, the plain provider and the platform; MRD names by what they are."""
    from crdscope.base.labrecord import lab_registry

    done = crdscope("package", f"synthetic:{COUNT}", "--name", "provider-synthetic", "--family", "--safe-start",
                    "--push", "--registry", lab_registry(LAB_NAME), "--output", str(tmp_path / "family"), "--json")
    assert done.returncode == 0, done.stderr
    members = [p for p in json.loads(done.stdout)["packages"]
               if any(g.split(".", 1)[0] in ("storage", "queue", "identity") for g in p["groups"])]
    network = [d for group, docs in by_group.items() if group.startswith("network.") for d in docs]
    (tmp_path / "network.yaml").write_text(yaml.safe_dump_all(network))
    done = crdscope("package", str(tmp_path / "network.yaml"), "--name", PLAIN, "--push", "--registry",
                    lab_registry(LAB_NAME), "--output", str(tmp_path / "plain"), "--json")
    assert done.returncode == 0, done.stderr
    [plain] = json.loads(done.stdout)["packages"]
    for name, reference in [*((m["name"], m["reference"]) for m in members), (PLAIN, plain["reference"])]:
        lab.kubectl("apply", "-f", "-", input=json.dumps({
            "apiVersion": "pkg.crossplane.io/v1", "kind": "Provider", "metadata": {"name": name},
            "spec": {"package": reference}}))
    groups = {g for m in members for g in m["groups"]}
    mrds = {"members": {d["metadata"]["name"] for g in groups for d in by_group.get(g, [])},
            "network": {d["metadata"]["name"] for d in network},
            "identity": {d["metadata"]["name"] for d in by_group["identity" + DOMAIN]}}
    return mrds


async def chain_reads(live, count: int) -> None:
    """Until the monitor has read Crossplane's chain ``count`` more times."""
    from crdscope.base.samples.inventory import InventorySample

    seen: list[float] = []

    def more() -> bool:
        sample = live.store.latest_of(InventorySample)
        read_at = (sample.crossplane.read_at or 0.0) if sample is not None else 0.0
        if not seen or read_at != seen[-1]:
            seen.append(read_at)
        return len(seen) > count

    await async_wait_for(more, timeout=60 + 10 * count, interval=0.5,
                         message=f"{count} more reads of the Crossplane chain")


async def established(lab: LabHandle) -> set[str]:
    """The lab's Established synthetic CRDs, read with kubectl off the event loop (the monitor runs on it)."""
    return await asyncio.to_thread(_established_crds, lab)


async def mrds_of(lab: LabHandle) -> dict[str, dict]:
    return await asyncio.to_thread(_mrds, lab)


async def established_all(lab: LabHandle, names) -> bool:
    return set(names) <= await established(lab)


def run_written(lab: LabHandle, command: str) -> None:
    """A kubectl command as the remedy writes it, against the lab (its kubeconfig and context added)."""
    argv = shlex.split(command)
    assert argv[0] == "kubectl", command
    lab.kubectl(*argv[1:])


async def test_the_crossplane_remedies_applied_as_written_close_their_findings(lab, tmp_path):
    from crdscope.base.settings import Settings
    from crdscope.connection.cluster import Cluster
    from crdscope.session.live import open_live_core

    by_group = _documents()
    mrds = await asyncio.to_thread(install, lab, tmp_path, by_group)
    await async_wait_for(lambda: _mrds(lab).keys() >= mrds["members"] | mrds["network"], timeout=300, interval=2,
                         message="the providers' MRDs")
    objects, composed = _platform(by_group)
    lab.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(objects))
    await async_wait_for(lambda: mrds["identity"] | mrds["network"] <= _established_crds(lab), timeout=300,
                         interval=2, message="the identity and network CRDs")

    settings = Settings().override("cadences", **steady_cadences(crossplane=CHAIN_SECONDS))
    live = open_live_core(Cluster.connect(lab.kubeconfig, lab.admin_context), settings)
    changes: list = []
    live.core.add_listener(lambda taken: changes.extend(taken.changes))
    running = asyncio.create_task(live.run())
    try:
        opened = live.core.findings.open
        identity_id, plain_id = f"{UNUSED_ACTIVE}:provider-synthetic-identity", f"{UNUSED_ACTIVE}:{PLAIN}"
        await async_wait_for(lambda: {COMPOSED_INACTIVE, identity_id, plain_id} <= set(opened), timeout=240,
                             interval=1.0, message="the composed-kind and unused-kinds findings")

        # The kinds the user's own MRAP entry activated: that entry named, and no reinstall with safe-start
        # (the provider is safe-start); the figure is the kinds the plan leaves out.
        identity = opened[identity_id]
        active_identity = sorted(mrds["identity"])  # the MRAP's entry matches the whole group
        assert f"MRAP identity's entry `*.identity{DOMAIN}` activated {len(active_identity)} of them" in \
            identity.evidence[3], identity.evidence
        assert f"{len(active_identity)} of {len(active_identity)} active kinds are neither composed nor in use" in \
            identity.title, identity.title
        assert "deactivates nothing (crossplane#6984)" in identity.remedy and "declares safe-start" not in \
            identity.remedy, identity.remedy
        # The provider without safe-start: every kind Active since install, and the safe-start advice.
        plain = opened[plain_id]
        assert "declares no safe-start" in plain.evidence[3], plain.evidence
        assert plain.remedy.startswith(f"move {PLAIN} to a release that declares safe-start"), plain.remedy
        assert f"{len(mrds['network'])} of {len(mrds['network'])} active kinds" in plain.title, plain.title

        # The composed kinds: the remedy's MRAP, applied as written, activates them; the finding closes.
        critical = opened[COMPOSED_INACTIVE]
        written = MRAP_WRITTEN.search(critical.remedy)
        assert written, critical.remedy
        plan = json.loads(written.group(1))  # as kubectl reads it
        assert set(plan["spec"]["activate"]) == set(composed), plan  # nothing in use: exactly the composed kinds
        await asyncio.to_thread(lab.kubectl, "apply", "-f", "-", input=written.group(1))
        await async_wait_for(lambda: COMPOSED_INACTIVE not in opened, timeout=180, interval=1.0,
                             message="the composed-kind finding closing")
        mrd_states = await mrds_of(lab)
        assert all(mrd_states[name]["spec"]["state"] == "Active" for name in composed)  # kubectl agrees
        await async_wait_for(lambda: established_all(lab, composed), timeout=120, interval=1.0,
                             message="the composed kinds' CRDs Established")
        await chain_reads(live, HELD_READS)
        assert [c.change for c in changes if c.finding.id == COMPOSED_INACTIVE] == [OPENED, CLOSED]

        # The identity kinds: the entry replaced by the plan's MRAP (which the remedy writes out: applied
        # above), then the MRDs and then the CRDs deleted by the commands the remedy writes.
        identity = opened[identity_id]
        assert "narrow `*.identity" + DOMAIN + "` (MRAP identity)" in identity.remedy, identity.remedy
        assert json.loads(MRAP_WRITTEN.search(identity.remedy).group(1)) == plan
        commands = KUBECTL_WRITTEN.findall(identity.remedy)
        assert [c.split()[2] for c in commands] == ["managedresourcedefinitions", "customresourcedefinitions"]
        assert sorted(commands[0].split()[3:]) == active_identity == sorted(commands[1].split()[3:])
        await asyncio.to_thread(lab.kubectl, "delete", "managedresourceactivationpolicies", "identity")
        for command in commands:
            await asyncio.to_thread(run_written, lab, command)
        await async_wait_for(lambda: identity_id not in opened, timeout=180, interval=1.0,
                             message="the identity unused-kinds finding closing")
        assert not set(active_identity) & await established(lab)  # their CRDs are gone (kubectl)
        left = await mrds_of(lab)  # the revision may have made the MRDs again: never Active
        assert all(left[n]["spec"].get("state", "Inactive") == "Inactive" for n in active_identity if n in left)
        await chain_reads(live, HELD_READS)
        assert [c.change for c in changes if c.finding.id == identity_id] == [OPENED, CLOSED]
        assert plain_id in opened  # its remedy was not applied: still open
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    active = sum(1 for m in _mrds(lab).values() if m["spec"].get("state") == "Active")
    print(f"\n{active} {MRD} Active after both remedies (kubectl)")
