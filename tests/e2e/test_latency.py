"""The latency probe against the real lab: canaries, server-side p99 from real bucket deltas,
and descriptor / etcd-connection growth as custom resource kinds come into use."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from crdscope.probes.latency import WINDOW_SECONDS
from tests.crdsets import crd_names, write_tiny_crds
from tests.e2e.monitoring import (apply_and_establish, delete_and_wait, kubectl, running_monitor,
                                  ss_etcd_connections)

pytestmark = pytest.mark.lab

CRDSCOPE = [sys.executable, "-m", "crdscope.cli.main"]
OURS = {"app.kubernetes.io/managed-by": "crdscope"}


async def test_canaries_answer_200_with_plausible_times(lab, tmp_path: Path):
    path = write_tiny_crds(tmp_path, 3, prefix="canary", labels=OURS)
    try:
        await apply_and_establish(lab, path)
        done = subprocess.run([*CRDSCOPE, "probe", "latency", "--json", "--kubeconfig", lab.kubeconfig],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        sample = json.loads(done.stdout)
        listed = await kubectl(lab, "get", "--raw", sample["canaries"]["list_cr"]["path"])
    finally:
        await delete_and_wait(lab, path)
    assert sample["error"] is None
    assert set(sample["canaries"]) == {"version", "get_namespace", "list_crds", "list_cr"}
    for name, canary in sample["canaries"].items():
        assert canary["status"] == 200, (name, canary)
        assert 0 < canary["seconds"] < 5, (name, canary)
    # The custom resource canary lists one of the kinds crdscope created, and kubectl can too.
    assert sample["cr_resource"] in crd_names([path])
    assert json.loads(listed.stdout)["kind"].endswith("List")
    # The server-side window spans the canaries: their lists and reads are in it.
    assert sample["requests_by_verb_scope"]["LIST cluster"] >= 2
    assert sample["requests_by_verb_scope"]["GET resource"] >= 1
    assert {"GET", "LIST"} <= set(sample["p99_by_verb"])
    assert isinstance(sample["slo_breaches"], list)


async def test_p99_by_verb_and_descriptor_growth_after_loading_crds(lab, tmp_path: Path):
    count = 200
    batches = [write_tiny_crds(tmp_path / f"b{i}", 50, prefix=f"lat{i}", labels=OURS) for i in range(4)]
    names = crd_names(batches)
    try:
        async with running_monitor(lab, ["health", "latency"], health=1.0, latency=1.0) as (monitor, collected):
            before = await collected.next("health", lambda s: s.etcd_connections is not None and s.open_fds)
            assert before.etcd_connections == pytest.approx(ss_etcd_connections(lab), abs=3)
            await collected.next("latency", lambda s: s.window_seconds is not None)
            for path in batches:
                await apply_and_establish(lab, path, monitor)
            # The first request to a kind creates its storage in the server (and, in 1.37, its
            # own etcd client): list every new kind once, with kubectl.
            plurals = [name.split(".", 1)[0] for name in names]
            await kubectl(lab, "get", ",".join(plurals), "--ignore-not-found", "-o", "name", timeout=600)
            reference = ss_etcd_connections(lab)
            await collected.next("health")  # may have started before the lists: skip it
            after = await collected.next("health", lambda s: s.etcd_connections is not None
                                         and abs(s.etcd_connections - reference) <= 3, timeout=60,
                                         message=f"{reference} etcd connections")
            latency = await collected.next("latency", lambda s: s.requests_by_verb_scope.get("POST resource", 0) >= count,
                                           timeout=60, message=f"{count} creates in the window")
    finally:
        await delete_and_wait(lab, *batches)

    # Server side: p99 per verb from bucket deltas over a window that saw kubectl's creates.
    assert 0 < latency.window_seconds <= WINDOW_SECONDS + 5
    assert latency.server_family == "apiserver_request_sli_duration_seconds"
    assert {"POST", "GET", "LIST"} <= set(latency.p99_by_verb)
    for verb, seconds in latency.p99_by_verb.items():
        assert 0 < seconds <= 60, (verb, seconds)
    assert latency.slo_seconds["POST resource"] == 1.0 and latency.slo_seconds["LIST cluster"] == 30.0
    # Every verb and scope with an SLO is judged, both ways: a breach is exactly a p99 over its SLO (the
    # breaches themselves are provoked in test_latency_slo.py; on this idle lab there may be none).
    judged = {name: latency.p99_by_verb_scope[name] > slo for name, slo in latency.slo_seconds.items()}
    assert {"POST resource", "GET resource", "LIST cluster"} <= set(judged), judged
    assert set(latency.slo_breaches) == {name for name, over in judged.items() if over}, judged
    # Descriptors and etcd connections grow together, one per kind brought into use.
    etcd_growth = after.etcd_connections - before.etcd_connections
    fds_growth = after.open_fds - before.open_fds
    assert etcd_growth >= count // 2, (before.etcd_connections, after.etcd_connections)
    assert fds_growth >= etcd_growth - 5, (before.open_fds, after.open_fds)
    assert after.fds_per_crd is not None and after.fds_per_crd > 0
    print(f"\netcd connections {before.etcd_connections} -> {after.etcd_connections}, open fds "
          f"{before.open_fds} -> {after.open_fds} ({after.fds_per_crd:.2f} fds/CRD); p99 by verb "
          f"{ {k: round(v, 3) for k, v in latency.p99_by_verb.items()} }, breaches {latency.slo_breaches}")
