"""``crdscope clean --yes`` SIGKILLed in the middle of its deletions never touches an unlabelled CRD.

The lab holds crdscope's CRDs (label ``app.kubernetes.io/managed-by=crdscope``)
and bystanders without the label, one of them holding an object of its kind.
The clean runs as a subprocess; a CRD watch in the test kills it (SIGKILL)
the moment the first of crdscope's CRDs starts terminating, so that it dies
with deletions in flight.

Proves: at the kill some of crdscope's CRDs were still there (interrupted
mid-way, for real); every bystander is the same object afterwards (same uid
and resourceVersion: not deleted, not overwritten) with its object; the same
command run again removes the rest of crdscope's CRDs and nothing else.
"""

from __future__ import annotations

import asyncio
import json
import signal

import pytest
import yaml

from crdscope.connection.crdwatch import CRDWatch
from tests.conftest import ROOT
from tests.crdsets import tiny_crd, write_tiny_crds
from tests.faults.helpers import CRDSCOPE, OWNED, crdscope, owned_crds
from tests.helpers import async_wait_for, established, wait_for

#: ~50 s of a fresh lab and 200 CRDs: beyond `make test`'s few minutes, so in `make soak`.
pytestmark = [pytest.mark.lab, pytest.mark.soak]

OURS = 200
BYSTANDERS = 5


def bystanders(lab) -> dict[str, tuple[str, str]]:
    """name -> (uid, resourceVersion) of the unlabelled CRDs, as kubectl sees them."""
    items = lab.kubectl_json("get", "crd")["items"]
    return {i["metadata"]["name"]: (i["metadata"]["uid"], i["metadata"]["resourceVersion"]) for i in items
            if (i["metadata"].get("labels") or {}).get("app.kubernetes.io/managed-by") != "crdscope"}


async def test_clean_killed_mid_way_spares_unlabelled_crds(fresh_lab, tmp_path):
    ours = write_tiny_crds(tmp_path, OURS, prefix="doomed", labels={"app.kubernetes.io/managed-by": "crdscope"})
    theirs = [tiny_crd(f"b{i}.bystander.crdscope.test", f"Keeper{i}") for i in range(BYSTANDERS)]
    (tmp_path / "theirs.yaml").write_text(yaml.safe_dump_all(theirs))
    fresh_lab.kubectl("create", "-f", str(ours))
    fresh_lab.kubectl("create", "-f", str(tmp_path / "theirs.yaml"))
    # (not `kubectl wait --all`: kubectl 1.32 fails on a CRD whose status has no conditions yet)
    wait_for(lambda: all(established(i) for i in fresh_lab.kubectl_json("get", "crd")["items"]), timeout=180,
             interval=1.0, message="every CRD Established")
    fresh_lab.kubectl("apply", "-f", "-", input=json.dumps(
        {"apiVersion": "b0.bystander.crdscope.test/v1", "kind": "Keeper0", "metadata": {"name": "keep-me"}}))
    before = bystanders(fresh_lab)
    assert len(before) == BYSTANDERS and len(owned_crds(fresh_lab)) == OURS

    async with fresh_lab.cluster() as cluster:
        watch = CRDWatch(cluster, label_selector=OWNED)
        watching = asyncio.create_task(watch.run())
        await async_wait_for(lambda: watch.status.synced and len(watch.crds) == OURS, timeout=60,
                             message="the test's watch of crdscope's CRDs")
        process = await asyncio.create_subprocess_exec(
            *CRDSCOPE, "clean", "--yes", "--kubeconfig", fresh_lab.kubeconfig, cwd=ROOT,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        left_at_kill: list[int] = []

        def kill_on_first_deletion(event) -> None:
            if not left_at_kill and (event.type == "DELETED" or event.record.terminating):
                process.send_signal(signal.SIGKILL)
                left_at_kill.append(sum(1 for r in watch.crds.values() if not r.terminating))

        watch.add_listener(kill_on_first_deletion)
        try:
            await asyncio.wait_for(process.wait(), timeout=300)
        finally:
            if process.returncode is None:
                process.kill()
            watching.cancel()
            await asyncio.gather(watching, return_exceptions=True)
    assert process.returncode == -signal.SIGKILL, (process.returncode, (await process.stderr.read()).decode())
    assert 0 < left_at_kill[0] < OURS  # killed with deletions under way, not before or after them

    # Nothing unlabelled was deleted or changed, and the bystander's object is still there.
    assert bystanders(fresh_lab) == before
    fresh_lab.kubectl("get", "keeper0.b0.bystander.crdscope.test", "keep-me")

    # Running the same command again finishes the job, and still spares them.
    again = await asyncio.to_thread(crdscope, "clean", "--yes", "--kubeconfig", fresh_lab.kubeconfig)
    assert again.returncode == 0, again.stdout + again.stderr
    assert owned_crds(fresh_lab) == {}
    assert bystanders(fresh_lab) == before
    fresh_lab.kubectl("get", "keeper0.b0.bystander.crdscope.test", "keep-me")
