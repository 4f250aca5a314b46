"""The discovery probe against the real lab with a few hundred Crossplane CRDs, kubectl as the reference.

How kubectl counts (and so how the probe's figures are compared):
- ``kubectl api-versions`` prints every group-version of the server's group list (fresh ones only in
  aggregated discovery): compared as a set with the probe's visible group-versions, and by count.
- ``kubectl api-resources`` prints one line per (group, resource) of ``ServerPreferredResources``:
  subresources (``pods/status``) are not listed, a resource served by several versions of a group is
  listed once (the preferred version's), and verb-less resources are dropped.  ``-o name`` prints
  ``<resource>.<group>`` (``<resource>`` for core): compared as a set with the probe's view, and by count.
Each comparison runs kubectl before and after the probe and requires both to agree (same moment).
kubectl (1.32) itself uses aggregated discovery and has no switch for the legacy walk, so the probe's
aggregated and legacy modes are both held to the same kubectl answers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from crdscope.probes.discovery import DiscoveryProbe, once
from crdscope.base.settings import Cadences
from tests.conftest import SHARED_CRDS
from tests.crdsets import extract, tiny_crd
from tests.helpers import async_wait_for, wait_for

pytestmark = [pytest.mark.lab, pytest.mark.shared_crds]

LABEL_KEY = "crdscope.dev/test"
LABEL = f"{LABEL_KEY}=discovery"
CRD_COLLECTION = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
#: Parallel kubectl processes for the apply: each has its own client-side limit (QPS 5).
APPLY_PROCESSES = 2


def kubectl_view(lab) -> tuple[set[str], set[str]]:
    """(api-versions, api-resources -o name) as kubectl reports them now."""
    versions = set(lab.kubectl("api-versions").stdout.split())
    resources = set(lab.kubectl("api-resources", "-o", "name").stdout.split())
    return versions, resources


def delete_labelled(lab, label: str) -> None:
    """One DELETE of the CRD collection (kubectl would send one per CRD at 5 QPS), then wait until gone."""
    selector = label.replace("/", "%2F").replace("=", "%3D")
    lab.kubectl("delete", "--raw", f"{CRD_COLLECTION}?labelSelector={selector}")
    wait_for(lambda: not lab.kubectl("get", "crd", "-l", label, "-o", "name").stdout.strip(),
             timeout=180, interval=0.5, message=f"CRDs labelled {label} to be gone")


@pytest.fixture(scope="module")
def gcp_crds(lab, tmp_path_factory) -> list[str]:
    """The CRDs of 40 provider-gcp API groups (about 200), labelled, applied by kubectl, Established."""
    if not SHARED_CRDS.is_dir():
        pytest.skip(f"{SHARED_CRDS} is absent")
    source = tmp_path_factory.mktemp("gcp-yaml")
    target = tmp_path_factory.mktemp("gcp-json")
    names = []
    for index, path in enumerate(extract("provider-gcp", source, groups=40)):
        document = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        document["metadata"].setdefault("labels", {})[LABEL_KEY] = "discovery"
        names.append(document["metadata"]["name"])
        part = target / f"part-{index % APPLY_PROCESSES}"
        part.mkdir(exist_ok=True)
        (part / f"{path.stem}.json").write_text(json.dumps(document))
    argv = ["kubectl", f"--kubeconfig={lab.kubeconfig}", f"--context={lab.admin_context}", "apply",
            "--server-side", "-o", "name", "-f"]
    processes = [subprocess.Popen([*argv, str(part)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for part in sorted(target.iterdir())]
    try:
        for process in processes:
            _, errors = process.communicate(timeout=300)
            assert process.returncode == 0, errors
        # kubectl wait gives up at once on a CRD whose conditions are not written yet: ask again until it succeeds.
        wait_for(lambda: lab.kubectl("wait", "--for=condition=Established", "crd", "-l", LABEL, "--timeout=60s",
                                     check=False).returncode == 0,
                 timeout=300, interval=1.0, message="the CRDs to be Established")
        yield names
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
        delete_labelled(lab, LABEL)


@pytest.mark.parametrize("mode", ["aggregated", "legacy"])
async def test_figures_equal_kubectl(lab, gcp_crds, mode):
    before = kubectl_view(lab)
    async with lab.cluster() as cluster:
        probe = DiscoveryProbe(cluster)
        sample = await probe.observe(mode)
    after = kubectl_view(lab)
    assert before == after, "the lab changed during the comparison"
    versions, resources = before
    assert sample.error is None and sample.mode == mode
    assert set(probe.view.visible_since) == versions
    assert set(probe.view.resources) == resources
    assert (sample.group_versions, sample.resources) == (len(versions), len(resources))
    # The Crossplane CRDs are part of it: every one of their groups is visible.
    groups = {name.split(".", 1)[1] for name in gcp_crds}
    assert groups <= {gv.split("/")[0] for gv in versions if "/" in gv}
    if mode == "aggregated":
        assert (sample.format, sample.requests) == ("v2", 2)
    else:
        assert sample.requests == sample.walk_requests == 2 + sample.group_versions
        assert sample.failed_group_versions == {}


async def test_legacy_walk_latencies_and_client_models(lab, gcp_crds):
    async with lab.cluster() as cluster:
        sample = await once(cluster, legacy=True, qps=20, burst=40)
    assert sample.error is None
    assert 0 < sample.gv_p50_seconds <= sample.gv_p95_seconds <= sample.gv_max_seconds <= sample.walk_seconds
    slowest = [s.seconds for s in sample.slowest]
    assert len(slowest) == 5 and slowest == sorted(slowest, reverse=True) and slowest[0] == sample.gv_max_seconds
    models = {m.name: m for m in sample.client_models}
    assert list(models) == ["client-go default", "kubectl <=1.23", "kubectl >=1.24", "user qps=20 burst=40"]
    requests = sample.walk_requests
    # By hand: /api and /apis take 2 of the 10 tokens; while they run (less than the walk's seconds)
    # at most 5 tokens a second come back; every group-version beyond what is left waits 1/5 s more.
    beyond_burst = (requests - 10) / 5.0
    client_go = models["client-go default"]
    assert beyond_burst - sample.walk_seconds <= client_go.waited_seconds <= beyond_burst + 1e-9
    assert client_go.seconds >= client_go.waited_seconds
    # Within kubectl's burst of 300 nothing waits: the walk takes what it took without a limiter
    # (the model starts each group-version at once, so it can only be as fast or faster).
    assert requests <= 300
    assert models["kubectl >=1.24"].waited_seconds == 0.0
    assert models["kubectl >=1.24"].seconds <= sample.walk_seconds
    if requests <= 100:
        assert models["kubectl <=1.23"].waited_seconds == 0.0
    else:
        assert models["kubectl <=1.23"].waited_seconds > 0


async def test_adding_a_crd_is_a_change_and_unchanged_runs_cost_304s(lab, tmp_path: Path):
    label = f"{LABEL_KEY}=discovery-change"
    crd = tiny_crd("change.discovery.crdscope.test", "Probe", labels={LABEL_KEY: "discovery-change"})
    (tmp_path / "crd.json").write_text(json.dumps(crd))
    gv = "change.discovery.crdscope.test/v1"
    async with lab.cluster() as cluster:
        probe = DiscoveryProbe(cluster, Cadences(discovery_legacy=3600.0))
        baseline = await probe.observe("aggregated")
        assert baseline.error is None and gv not in probe.view.visible_since
        # An unchanged second run costs two 304s (/api and /apis); wait out changes still settling.
        unchanged = await async_wait_for(lambda: _run_with(probe, lambda s: s.not_modified == 2 and not s.changed),
                                         timeout=60, message="an unchanged run answered by 304s")
        assert unchanged.group_versions == baseline.group_versions
        assert unchanged.not_modified_total >= 2
        created = time.time()
        try:
            lab.kubectl("apply", "--server-side", "-f", str(tmp_path / "crd.json"))
            lab.kubectl("wait", "--for=condition=Established", f"crd/{crd['metadata']['name']}", "--timeout=60s")
            seen = await async_wait_for(lambda: _run_with(probe, lambda s: s.changed), timeout=60,
                                        message=f"{gv} to appear in discovery")
            # /api (core) did not change: still a 304; /apis did.
            assert (seen.appeared, seen.vanished, seen.not_modified) == ((gv,), (), 1)
            assert created - 1.0 <= probe.view.visible_since[gv] <= time.time()
            assert gv in lab.kubectl("api-versions").stdout.split()
        finally:
            delete_labelled(lab, label)
        gone = await async_wait_for(lambda: _run_with(probe, lambda s: s.changed), timeout=60,
                                    message=f"{gv} to vanish from discovery")
        assert (gone.appeared, gone.vanished) == ((), (gv,))
        assert gv not in probe.view.visible_since


async def _run_with(probe: DiscoveryProbe, condition):
    sample = await probe.observe("aggregated")
    assert sample.error is None, sample.error
    return sample if condition(sample) else None


async def test_kubectl_cache_and_timing_next_to_the_probe(lab, gcp_crds):
    lab.kubectl("api-resources")  # fills $KUBECACHEDIR (the test session's own) for this server
    ran = time.time()
    async with lab.cluster() as cluster:
        sample = await once(cluster, kubectl=True)
    cache = sample.kubectl_cache
    root = Path(os.environ["KUBECACHEDIR"]) / "discovery"
    # The folder kubectl made for this server is the one the probe looks at.
    assert Path(cache.path).parent == root and Path(cache.path).is_dir()
    files = [p for p in Path(cache.path).rglob("*") if p.is_file()]
    assert (cache.present, cache.files, cache.bytes) == (True, len(files), sum(p.stat().st_size for p in files))
    assert (Path(cache.path) / "servergroups.json").is_file()
    assert 0 <= cache.age_seconds <= time.time() - ran + 60 and cache.expired is False
    assert cache.read_seconds > 0 and cache.unreadable_files == 0
    timing = sample.kubectl
    assert timing.error is None
    assert timing.resources == sample.resources == len(lab.kubectl("api-resources", "--no-headers").stdout.splitlines())
    assert timing.cold_seconds > 0 and timing.warm_seconds > 0 and timing.cached_seconds > 0
    # Aggregated discovery is two requests: kubectl has nothing to be throttled on.
    assert timing.throttling_messages == 0


@pytest.mark.parametrize("extra", [[], ["--legacy", "--qps", "2", "--burst", "5"]])
def test_cli_prints_the_sample(lab, gcp_crds, extra):
    before = kubectl_view(lab)
    done = subprocess.run([sys.executable, "-m", "crdscope.cli.main", "probe", "discovery", "--json",
                           "--kubeconfig", lab.kubeconfig, *extra], capture_output=True, text=True, timeout=300,
                          check=False)
    assert before == kubectl_view(lab)
    assert done.returncode == 0, done.stderr
    sample = json.loads(done.stdout)
    assert {"mode", "group_versions", "resources", "requests", "bytes", "seconds", "client_models"} <= set(sample)
    assert (sample["group_versions"], sample["resources"]) == (len(before[0]), len(before[1]))
    if extra:
        assert sample["mode"] == "legacy"
        user = sample["client_models"][-1]
        assert (user["name"], user["qps"], user["burst"]) == ("user qps=2 burst=5", 2.0, 5)
        assert set(user) == {"name", "qps", "burst", "seconds", "waited_seconds"}
    else:
        assert sample["mode"] == "aggregated" and sample["client_models"] == []


def test_cli_rejects_a_model_without_the_walk(lab):
    done = subprocess.run([sys.executable, "-m", "crdscope.cli.main", "probe", "discovery", "--qps", "5", "--burst", "10",
                           "--kubeconfig", lab.kubeconfig], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 2
    assert done.stderr.strip() == "crdscope: --qps/--burst model the legacy walk: add --legacy"
