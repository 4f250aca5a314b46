"""The lab across Kubernetes versions: the oldest supported (1.26) beside the default, and a memory cap.

A compact suite against 1.26 (built by `make lab-binaries`): the version it reports, every
one-shot probe (discovery falls back to the legacy walk and says why; APF names come from
flowcontrol v1beta3; OpenAPI v3 is beta there), a loader run of 200 CRDs, aggregated
discovery switched on by a feature gate, and an API server OOM-killed by its cgroup limit,
restarted by the lab's supervisor and serving again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from crdscope.lab.controlplane import Lab, LabOptions, admin_tls, pid_alive
from crdscope.lab.supervisor import read_events
from tests.conftest import LabHandle
from tests.crdsets import tiny_crd
from tests.e2e.monitoring import running_monitor
from tests.helpers import async_wait_for, wait_for

pytestmark = pytest.mark.lab

CRDSCOPE = [sys.executable, "-m", "crdscope.cli.main"]
OLD = "1.26"
#: The memory cap of the kill test: above what an idle 1.26 API server needs (about 300 MiB here)
#: and below what a few hundred CRDs need (about 6.5 MiB each on 1.26).
CAP_MIB = 420
#: How many tiny CRDs may be applied before the cap must have killed the server. Where it dies
#: varies with how far the server got building what the CRDs cost (220 to 1,460 seen): a bound, not
#: a figure.
MAX_CAP_CRDS = 6000


def crdscope(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([*CRDSCOPE, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def probe(handle: LabHandle, name: str, *extra: str) -> dict:
    done = crdscope("probe", name, "--json", "--kubeconfig", handle.kubeconfig, "--context", handle.admin_context,
                    *extra)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def old_binaries():
    from crdscope.lab.binaries import ensure_binaries

    return ensure_binaries(kubernetes=OLD, progress=lambda line: print(line, file=sys.stderr))


def _handle(lab: Lab, state) -> LabHandle:
    return LabHandle(lab=lab, state=state, kubeconfig=state.kubeconfig, admin_context=state.admin_context,
                     restricted_context=state.restricted_context)


@pytest.fixture(scope="module")
def old_lab(tmp_path_factory: pytest.TempPathFactory, old_binaries):
    lab = Lab(tmp_path_factory.mktemp("old-lab"), name="old")
    state = lab.up(old_binaries, options=LabOptions(name="old"))
    yield _handle(lab, state)
    lab.down()


def test_two_versions_side_by_side_each_report_their_own(old_lab, lab):
    assert old_lab.state.kubernetes_version.startswith("v1.26.")
    merged = f"{old_lab.kubeconfig}{os.pathsep}{lab.kubeconfig}"
    versions = {}
    for context in (old_lab.admin_context, lab.admin_context):
        done = subprocess.run(["kubectl", "version", "-o", "json", f"--context={context}"], capture_output=True,
                              text=True, timeout=60, env={**os.environ, "KUBECONFIG": merged})
        assert done.returncode == 0, done.stderr
        versions[context] = json.loads(done.stdout)["serverVersion"]["gitVersion"]
    assert old_lab.admin_context == "crdscope-lab-old" and lab.admin_context == "crdscope-lab"
    assert versions["crdscope-lab-old"] == old_lab.state.kubernetes_version
    assert versions["crdscope-lab"] != versions["crdscope-lab-old"]
    assert probe(old_lab, "version")["git_version"] == versions["crdscope-lab-old"]


def test_discovery_on_126_is_the_legacy_walk_with_its_reason(old_lab):
    sample = probe(old_lab, "discovery")
    assert sample["error"] is None
    assert sample["mode"] == "legacy"
    assert "no aggregated discovery" in sample["fallback_reason"] or "406" in sample["fallback_reason"]
    reference = old_lab.kubectl("api-versions").stdout.split()
    assert sample["group_versions"] == len(reference)
    assert sample["requests"] == 2 + len(reference)  # /api, /apis and one per group-version


def test_throttling_on_126_names_levels_through_flowcontrol_v1beta3(old_lab):
    sample = probe(old_lab, "throttling")
    assert sample["error"] is None
    assert sample["flowcontrol_api"] == "v1beta3"
    assert "names" not in sample["unobservable"]
    levels = {level["name"] for level in sample["priority_levels"]}
    assert {"exempt", "global-default"} <= levels
    # Whatever 1.26 does not export is named with a reason, never reported as zero.
    for figure, reason in sample["unobservable"].items():
        assert reason, figure


def test_openapi_and_health_on_126(old_lab):
    openapi = probe(old_lab, "openapi")
    assert openapi["error"] is None and openapi["v3_status"] == 200 and openapi["v3_paths"] > 10
    health = probe(old_lab, "health")
    assert health["error"] is None and health["ready"] is True
    assert health["rss_bytes"] > 50 * 2**20 and health["restarts"] == 0
    for figure, reason in health["unobservable"].items():
        assert reason, figure


async def test_the_monitor_header_says_which_behaviour_applies_on_126(old_lab):
    """The header states the old server's behaviour (legacy discovery and why, APF v1beta3)."""
    from crdscope.tui.launch import build_app

    app = build_app(old_lab.kubeconfig, old_lab.admin_context, record=None, layout="grid")
    async with app.run_test(size=(200, 50)) as pilot:
        header = app.monitor_screen.query_one("#header")
        await async_wait_for(lambda: "discovery: legacy only" in header.markup() and "APF v1beta3" in header.markup(),
                             timeout=90, message=f"the version's behaviour in the header ({header.markup()!r})")
        await pilot.pause()
        assert "no aggregated discovery" in header.markup() or "406" in header.markup()
        assert "v1.26." in header.markup()


def test_loader_run_of_200_crds_on_126(old_lab):
    done = crdscope("load", "synthetic:200", "--seed", "126", "--json", "--kubeconfig", old_lab.kubeconfig,
                    "--context", old_lab.admin_context, timeout=900)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["established"] == 200 and summary["failed"] == 0
    listed = old_lab.kubectl("get", "crd", "-l", "app.kubernetes.io/managed-by=crdscope", "-o", "name").stdout
    assert len(listed.split()) == 200
    walk = probe(old_lab, "discovery", "--legacy")
    assert walk["group_versions"] >= 200 // 10  # the synthetic groups are now in the legacy walk


async def test_on_126_the_crd_list_comes_in_protobuf_with_the_records_json_gives(old_lab):
    """The oldest supported server answers the CRD list in protobuf too (crdscope's CRDs of the
    loader test above, and whatever else is there), record for record as in JSON."""
    from crdscope.connection.crdwatch import CRDWatch

    async with old_lab.cluster() as cluster:
        in_protobuf, in_json = CRDWatch(cluster), CRDWatch(cluster, protobuf=False)
        assert await in_protobuf.sync_once() is None and await in_json.sync_once() is None
    assert (in_protobuf.status.list_encoding, in_json.status.list_encoding) == ("protobuf", "json")
    assert in_protobuf.crds and set(in_protobuf.crds) == set(in_json.crds)
    for name, record in in_protobuf.crds.items():
        other = in_json.crds[name]
        assert (record.uid, record.resource_version, record.served_versions, record.owner, record.run_id,
                record.established, record.names_accepted, record.created) == (
            other.uid, other.resource_version, other.served_versions, other.owner, other.run_id,
            other.established, other.names_accepted, other.created), name


def test_on_126_the_v3_index_waits_for_the_load_to_settle_and_the_stage_is_still_timed(old_lab, tmp_path):
    """1.26 marshals every changed group-version under its OpenAPI controller's lock for each index
    read (``probes.openapi``): a watch reads no index while CRDs change, and times each new CRD's
    v3 stage from the server's regeneration series instead."""
    from crdscope.base.settings import Cadences
    from tests.e2e.test_footprint import footprints, latest_of, start_watch, stop_watch
    from tests.faults.helpers import crdscope as run_crdscope

    recording = tmp_path / "watch-126.jsonl"
    watch = start_watch(old_lab, recording)
    try:
        index = "GET /openapi/v3"
        # Start-up reads the index once (nothing changes yet): the footprint must have counted it.
        before = wait_for(lambda: next((f for f in footprints(recording)[::-1]
                                        if f["by_path"].get(index, {}).get("requests")), None),
                          timeout=120, message="the first index read counted")
        load_started = time.time()
        done = run_crdscope("load", "synthetic:60", "--seed", "261", "--kubeconfig", old_lab.kubeconfig,
                            "--context", old_lab.admin_context, timeout=600)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr
        loaded_at = time.time()
        # The first footprint after the load: well inside the 60 s the install takes to count as settled.
        during = wait_for(lambda: next((f for f in footprints(recording) if f["timestamp"] >= loaded_at), None),
                          timeout=30, message="a footprint sample after the load")

        def timed() -> dict | None:
            openapi = latest_of(recording, "openapi") or {}
            count = ((openapi.get("lag_seconds") or {}).get("openapi_v3") or {}).get("count") or 0
            return openapi if count >= 60 else None
        openapi = wait_for(timed, timeout=150, message="the v3 stage of all 60 CRDs timed")
    finally:
        stop_watch(watch)
    read = during["by_path"].get(index, {}).get("requests", 0) - before["by_path"].get(index, {}).get("requests", 0)
    assert read == 0, f"{read} index reads while CRDs changed on 1.26: {during['by_path']}"
    rounds = [r["data"] for r in map(json.loads, recording.read_text().splitlines()[:-1])
              if r.get("probe") == "openapi" and load_started + 5 <= r["data"]["timestamp"] <= loaded_at + 40]
    assert rounds and all(r["v3_deferred"].startswith("read once CRDs settle") for r in rounds), rounds[-1:]
    # Timed by the regeneration series, not by an index read once settled (that would be >= 60 s after the last change).
    assert openapi["lag_seconds"]["openapi_v3"]["max"] < Cadences().settle, openapi["lag_seconds"]


def test_feature_gate_turns_aggregated_discovery_on_in_126(old_binaries, tmp_path: Path):
    env = {"CRDSCOPE_LAB_HOME": str(tmp_path / "home")}
    up = crdscope("lab", "up", "--kubernetes", OLD, "--name", "gated", "--feature-gates",
                  "AggregatedDiscoveryEndpoint=true", "--", "--max-requests-inflight=150", env=env)
    assert up.returncode == 0, up.stderr
    try:
        status = json.loads(crdscope("lab", "status", "--name", "gated", "--json", env=env).stdout)
        assert status["kubernetes_version"].startswith("v1.26.") and status["context"] == "crdscope-lab-gated"
        argv = Path(f"/proc/{status['components']['apiserver']['pid']}/cmdline").read_bytes().split(b"\0")
        assert b"--max-requests-inflight=150" in argv
        sample = json.loads(crdscope("probe", "discovery", "--json", "--kubeconfig", status["kubeconfig"]).stdout)
        assert sample["mode"] == "aggregated" and sample["fallback_reason"] is None
        assert "v2beta1" in sample["format"]
    finally:
        assert crdscope("lab", "down", "--name", "gated", env=env).returncode == 0


async def _fetch_openapi_v2(client: httpx.AsyncClient) -> None:
    """Stream /openapi/v2 and drop it (the server builds the whole spec for it); a dying server may not answer."""
    try:
        async with client.stream("GET", "/openapi/v2", headers={"Accept": "application/json"}) as response:
            async for _ in response.aiter_bytes():
                pass
    except httpx.HTTPError:
        pass


async def _apply(client: httpx.AsyncClient, documents: list[dict], answers: dict[int, int]) -> tuple[int, bool]:
    """(CRDs created, whether the server went away: the kill this test waits for); ``answers`` counts
    every other status, for the failure message."""
    created = 0
    for document in documents:
        try:
            response = await client.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=document)
        except httpx.HTTPError:
            return created, True
        if response.status_code == 201:
            created += 1
        else:
            answers[response.status_code] = answers.get(response.status_code, 0) + 1
    return created, False


async def test_memory_cap_kills_the_apiserver_and_the_lab_restarts_it(old_binaries, tmp_path: Path):
    env = {"CRDSCOPE_LAB_HOME": str(tmp_path / "home")}
    lab = Lab(tmp_path / "home" / "named" / "capped", name="capped")  # where `crdscope lab ... --name` finds it
    state = lab.up(old_binaries, options=LabOptions(name="capped", memory_limit=CAP_MIB << 20))
    handle = _handle(lab, state)
    try:
        assert state.supervisor_pid and pid_alive(state.supervisor_pid)
        async with running_monitor(handle, ["health"], context=handle.admin_context, health=1.0) as (_, collected):
            before = await collected.next("health", lambda s: s.start_time is not None and s.ready)
            assert before.restarts == 0
            loaded = sent = 0
            answers: dict[int, int] = {}

            def died_yet() -> bool:
                return any(e["event"] == "died" for e in read_events(state.events_log))

            async with httpx.AsyncClient(base_url=state.server, verify=admin_tls(state.pki_dir), timeout=30) as client:
                while not died_yet():
                    assert sent < MAX_CAP_CRDS, (f"{loaded} CRDs created ({sent} sent; other answers {answers}) "
                                                 f"did not exceed a {CAP_MIB} MiB cap")
                    batch = [tiny_crd(f"g{n // 5}.cap.crdscope.test", f"Cap{n}") for n in range(sent, sent + 20)]
                    created, went_away = await _apply(client, batch, answers)
                    loaded += created
                    sent += len(batch)
                    if went_away:  # the supervisor notices within its poll and logs the death
                        await async_wait_for(died_yet, timeout=60, interval=0.25, message="the supervisor logging the death")
                        break
                    if sent % 200 == 0:
                        await _fetch_openapi_v2(client)  # what clients make the server build, at its cost
            died = next(e for e in read_events(state.events_log) if e["event"] == "died")
            assert died["oom_killed"] is True, died
            # With its CRDs an API server needs more at start than the cap that killed it (it
            # crash-loops, as managed control planes did): give it room, as a provider resizes one.
            resized = crdscope("lab", "limit", "2Gi", "--name", "capped", env=env)
            assert resized.returncode == 0, resized.stderr
            await async_wait_for(lambda: any(e["event"] == "restarted" for e in read_events(state.events_log)),
                                 timeout=300, interval=0.5, message="the supervisor's restart")
            back = await collected.next("health", lambda s: s.ready and s.restarts >= 1, timeout=120,
                                        message="the health probe counting the restart")
        assert back.start_time > before.start_time
        status = json.loads(crdscope("lab", "status", "--name", "capped", "--json", env=env).stdout)
        assert status["ready"] is True and status["components"]["apiserver"]["restarts"] >= 1
        after = probe(handle, "health")
        assert after["start_time"] >= died["at"] - 1  # the process serving now started after the kill
        outages = [e["outage_seconds"] for e in read_events(state.events_log) if e["event"] == "restarted"]
        print(f"\nkilled after {loaded} CRDs applied; outages {outages} s")
    finally:
        lab.down()
