"""Attribution from the cluster's own schemas on real Crossplane (issue 47 item 3), with MRDs present.

One lab with real Crossplane (v2.4.2, no default MRAP) watched from the start by ``crdscope watch
--headless --serve-metrics --record``, as a platform team runs it:

1. the MRDs arrive: a safe-start family crdscope packages with the real ``crossplane xpkg``
   (``synthetic:N``), its members installed as Providers, every MRD Inactive (no CRD);
2. CRDs arrive directly: a slice of the real AWS provider's CRDs applied with kubectl, while the MRD
   count stands: the health probe's plane fit tells the CRDs' own memory per CRD
   (``health.mib_per_crd_own``) from the MRDs';
3. the MRDs are activated (an MRAP ``*``): Crossplane makes their CRDs (the activation path).

The exporter's ``crdscope_attribution_memory_bytes{group=...}`` must price each group as the cost model
prices the CRDs kubectl lists (their own schemas), and ``crdscope_attribution_mrd_memory_bytes`` the MRDs
kubectl lists; after stage 2 the model's price of the CRDs that came (by their schemas) must be within
25% of the live fit, both printed.  Stage 3's figures (the activation path, which issue 47 item 2
calibrates apart) are printed beside.  ``doctor`` and the headless watch's last lines say the same.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from crdscope.base.activation import MRD_BYTES
from crdscope.base.fit import LinearFit
from crdscope.costmodel.features import features_of_spec
from crdscope.costmodel.model import Target, estimate
from crdscope.lab.controlplane import free_port
from crdscope.loader.synthetic import synthetic_documents
from tests.conftest import LabHandle
from tests.crdsets import crd_names, extract
from tests.helpers import wait_for

pytestmark = pytest.mark.lab

LAB_NAME = "attrib"
#: The safe-start family's size: its MRDs (Inactive) in stage 1, its CRDs in stage 3.
FAMILY = 200
#: The AWS provider's first API groups (by name), applied directly in stage 2: about 240 CRDs.
AWS_GROUPS = 40
MRD = "managedresourcedefinitions.apiextensions.crossplane.io"
MIB = float(1 << 20)
#: The live fit takes this many health samples at the final CRD count of a stage before it is read.
SETTLED_POINTS = 8
TOLERANCE = 0.25
#: The health and attribution probes' cadence, busy and at rest (defaults 10 s and 20 s: eight points at
#: rest would take minutes a stage).
CADENCE = 3


def crdscope(*args: str, timeout: float = 900, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "crdscope.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def paced_config(tmp_path: Path) -> dict[str, str]:
    """An environment whose config.toml paces the health and attribution probes at :data:`CADENCE`."""
    config = tmp_path / "config"
    (config / "crdscope").mkdir(parents=True)
    (config / "crdscope" / "config.toml").write_text(
        "[cadences]\n" + "".join(f"{probe}{idle} = {CADENCE}\n" for probe in ("health", "attribution")
                                 for idle in ("", "_idle")))
    return {"XDG_CONFIG_HOME": str(config)}


@pytest.fixture(scope="module")
def lab(lab_binaries) -> LabHandle:
    from crdscope.lab.controlplane import Lab

    done = crdscope("lab", "up", "--name", LAB_NAME, "--crossplane", "--activation", "none")
    the_lab = Lab(name=LAB_NAME)
    if done.returncode != 0:
        the_lab.down()
        pytest.fail(done.stderr)
    state = the_lab.require()
    yield LabHandle(lab=the_lab, state=state, kubeconfig=state.kubeconfig, admin_context=state.admin_context,
                    restricted_context=state.restricted_context)
    the_lab.down()


class Watch:
    """``crdscope watch --headless --serve-metrics --record`` on the lab, read through its exporter."""

    def __init__(self, lab: LabHandle, recording: Path, env: dict[str, str]) -> None:
        self.port = free_port()
        self.recording = recording
        self.process = subprocess.Popen(
            [sys.executable, "-m", "crdscope.cli.main", "watch", "--headless", "--kubeconfig", lab.kubeconfig,
             "--context", lab.admin_context, "--duration", "60m", "--serve-metrics", f"127.0.0.1:{self.port}",
             "--record", str(recording)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **env, "NO_COLOR": "1"})

    def series(self) -> dict[tuple[str, tuple], float]:
        if self.process.poll() is not None:
            raise AssertionError(f"the watch ended: {self.process.communicate()}")
        try:
            text = httpx.get(f"http://127.0.0.1:{self.port}/metrics", timeout=10).text
        except httpx.HTTPError:
            return {}
        return {(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "cluster"))): s.value
                for family in text_string_to_metric_families(text) for s in family.samples}

    def figure(self, name: str, **labels: str) -> float | None:
        return self.series().get((name, tuple(sorted(labels.items()))))

    def by_group(self) -> dict[str, float]:
        return {dict(labels)["group"]: value for (name, labels), value in self.series().items()
                if name == "crdscope_attribution_memory_bytes"}

    def stop(self) -> str:
        self.process.send_signal(signal.SIGTERM)
        stdout, stderr = self.process.communicate(timeout=60)
        assert self.process.returncode == 130, stdout + stderr
        assert "Traceback" not in stderr, stderr
        return stdout


def health_samples(recording: Path) -> list[dict]:
    return [record["data"] for record in map(json.loads, recording.read_text().splitlines())
            if record.get("type") == "sample" and record.get("probe") == "health" and not record["data"].get("error")]


def kubectl_crds(lab: LabHandle) -> list[dict]:
    """Every CRD, whole (schemas and all: a big answer, read once a stage, after its figures)."""
    return lab.kubectl_json("get", "crds")["items"]


def names(lab: LabHandle, resource: str) -> set[str]:
    """The names kubectl lists, from the server's table (no schema sent: cheap to poll)."""
    return {line.split()[0] for line in lab.kubectl("get", resource, "--no-headers").stdout.splitlines() if line}


def mrd_count(lab: LabHandle) -> int:
    return len(names(lab, MRD))


def wait_established(lab: LabHandle, wanted: set[str]) -> None:
    """Until every CRD of ``wanted`` exists (the server's table) and is Established (kubectl wait)."""
    wait_for(lambda: wanted <= names(lab, "crds"), timeout=900, interval=5, message=f"{len(wanted)} CRDs created")
    ordered = sorted(wanted)
    for start in range(0, len(ordered), 100):
        lab.kubectl("wait", "--for=condition=Established", "--timeout=600s",
                    *[f"crd/{name}" for name in ordered[start:start + 100]], timeout=660)


def priced_by_group(crds: list[dict], minor: str) -> dict[str, float]:
    """What the cost model's estimate puts on each group's CRDs, from the specs kubectl lists (the
    server's first-CRDs cost apart: the lab has CRDs already)."""
    groups: dict[str, list] = {}
    for item in crds:
        groups.setdefault(item["spec"]["group"], []).append(features_of_spec(item["metadata"]["name"], item["spec"]))
    return {group: estimate(features, minor, target=Target(crds=1)).memory_bytes.value
            for group, features in groups.items()}


def settle(watch: Watch, crds: int) -> None:
    """Wait until the health probe counted ``crds`` CRDs and took :data:`SETTLED_POINTS` more samples."""
    wait_for(lambda: watch.figure("crdscope_health_crds") == crds, timeout=300, interval=2,
             message=f"the health probe to count {crds} CRDs")
    points = watch.figure("crdscope_health_fit_points") or 0
    wait_for(lambda: (watch.figure("crdscope_health_fit_points") or 0) >= points + SETTLED_POINTS, timeout=600,
             interval=2, message="the fit to take samples at the final CRD count")


def stage_slope(samples: list[dict], since: float) -> float:
    """MiB per CRD over the health samples from ``since`` on (one mean RSS per CRD count, as the
    probe's fits weigh them)."""
    fit = LinearFit()
    for sample in samples:
        if sample["timestamp"] >= since and sample.get("rss_bytes") and sample.get("crds") is not None:
            fit.add(sample["crds"], sample["rss_bytes"])
    result = fit.result()
    assert result is not None, "the stage's samples fit no line"
    return result.slope / MIB


@pytest.mark.timeout(1800)
def test_crds_priced_by_their_own_schemas_against_the_live_fit_with_mrds_present(lab, shared_crds, tmp_path):
    from crdscope.base.labrecord import lab_registry

    started = time.monotonic()

    version = lab.kubectl_json("version")["serverVersion"]
    minor = f"{version['major']}.{version['minor'].rstrip('+')}"
    env = paced_config(tmp_path)
    watch = Watch(lab, tmp_path / "watch.jsonl", env)
    wait_for(lambda: watch.figure("crdscope_attribution_crds") is not None, timeout=120, interval=1,
             message="the first attribution")

    # 1. The family's MRDs, all Inactive: no CRD of theirs.
    packages_dir = tmp_path / "packages"
    done = crdscope("package", f"synthetic:{FAMILY}", "--name", "provider-synthetic", "--family", "--safe-start",
                    "--push", "--registry", lab_registry(LAB_NAME), "--output", str(packages_dir), "--json")
    assert done.returncode == 0, done.stderr
    members = [p for p in json.loads(done.stdout)["packages"] if p["name"] != "provider-family-synthetic"]
    for member in members:
        lab.kubectl("apply", "-f", "-", input=json.dumps({
            "apiVersion": "pkg.crossplane.io/v1", "kind": "Provider", "metadata": {"name": member["name"]},
            "spec": {"package": member["reference"]}}))
    member_groups = {group for member in members for group in member["groups"]}
    family_crds = {d["metadata"]["name"] for d in synthetic_documents(FAMILY) if d["spec"]["group"] in member_groups}
    wait_for(lambda: mrd_count(lab) >= len(family_crds), timeout=900, interval=5, message="the family's MRDs")
    mrds = mrd_count(lab)
    wait_for(lambda: watch.figure("crdscope_health_mrds") == mrds, timeout=300, interval=2,
             message="the health probe to count the MRDs")
    wait_for(lambda: watch.figure("crdscope_attribution_mrd_memory_bytes") == pytest.approx(mrds * MRD_BYTES),
             timeout=120, interval=2, message="the MRDs' memory priced")
    settle(watch, len(names(lab, "crds")))
    print(f"\nstage 1 settled at {time.monotonic() - started:.0f} s")

    # 2. CRDs applied directly, the MRD count standing.
    crd_dir = tmp_path / "aws"
    direct = crd_names(extract("provider-aws", crd_dir, groups=AWS_GROUPS))
    lab.kubectl("apply", "--server-side", "-f", str(crd_dir), timeout=600)
    wait_established(lab, set(direct))
    settle(watch, len(names(lab, "crds")))
    print(f"\nstage 2 settled at {time.monotonic() - started:.0f} s")
    # Read before kubectl's whole list below (its answer costs the server memory of its own).
    live = watch.figure("crdscope_health_mib_per_crd_own")
    per_mrd = watch.figure("crdscope_health_mib_per_mrd")
    points = watch.figure("crdscope_health_fit_points")
    crds = kubectl_crds(lab)

    # Every group kubectl lists, priced as the cost model prices its CRDs' own specs (the watch measures a
    # schema by its protobuf: within a few percent), and the MRDs at their measured cost.
    expected = priced_by_group(crds, minor)
    exported = wait_for(lambda: (lambda found: found if set(found) == set(expected) else None)(watch.by_group()),
                        timeout=120, interval=2, message="a series per group")
    for group, held in expected.items():
        assert exported[group] == pytest.approx(held, rel=0.05), group
    assert sum(exported.values()) == pytest.approx(sum(expected.values()), rel=0.02)
    assert watch.figure("crdscope_attribution_mrd_memory_bytes") == pytest.approx(mrd_count(lab) * MRD_BYTES)

    # The CRDs' own share, priced by their schemas, against the live fit with the MRDs apart.
    direct_groups = {c["spec"]["group"] for c in crds if c["metadata"]["name"] in set(direct)}
    modelled = sum(exported[g] for g in direct_groups) / len(direct) / MIB
    print(f"\nstage 2 (direct): {len(direct)} AWS CRDs of {len(direct_groups)} groups beside {mrds} MRDs: model "
          f"{modelled:.2f} MiB/CRD by their schemas; live fit health.mib_per_crd_own "
          f"{live if live is None else f'{live:.2f}'} MiB/CRD (MRDs {per_mrd if per_mrd is None else f'{per_mrd:.2f}'}"
          f" MiB each; fit {points} points)")
    assert live is not None, "no own share: the fit could not tell the CRDs from the MRDs"
    assert abs(modelled / live - 1) <= TOLERANCE, (modelled, live)

    # 3. The MRDs activated: Crossplane makes their CRDs.
    stage3 = time.time()
    lab.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "apiextensions.crossplane.io/v1alpha1", "kind": "ManagedResourceActivationPolicy",
        "metadata": {"name": "everything"}, "spec": {"activate": ["*"]}}))
    wait_established(lab, family_crds)
    settle(watch, len(names(lab, "crds")))
    print(f"\nstage 3 settled at {time.monotonic() - started:.0f} s")
    family_groups = {d["spec"]["group"] for d in synthetic_documents(FAMILY) if d["metadata"]["name"] in family_crds}
    activated_model = sum(watch.by_group()[g] for g in family_groups) / len(family_crds) / MIB
    after = kubectl_crds(lab)

    # What every other front end says: doctor's evidence and the headless watch's last lines.
    done = crdscope("doctor", "--json", "--duration", "30s", "--kubeconfig", lab.kubeconfig,
                    "--context", lab.admin_context, timeout=300, env=env)
    assert done.returncode in (0, 1, 2), done.stderr
    attribution = json.loads(done.stdout)["attribution"]
    assert attribution["crds"] == len(after) and attribution["mrds"] == mrd_count(lab)
    assert attribution["crd_memory_bytes"] == pytest.approx(
        sum(priced_by_group(after, minor).values()) + attribution["first_crds_bytes"], rel=0.02)
    stdout = watch.stop()
    [line] = [line for line in stdout.splitlines() if line.startswith("memory by the cost model: CRDs ~ ")]
    assert f"({len(after):,} CRDs" in line and f"{mrd_count(lab):,} MRDs" in line, line

    activated_live = stage_slope(health_samples(watch.recording), stage3)
    print(f"stage 3 (activation): {len(family_crds)} CRDs Crossplane made from MRDs: model {activated_model:.2f} "
          f"MiB/CRD by their schemas (priced as direct installs); live slope over the stage {activated_live:.2f} "
          f"MiB/CRD ({activated_live / activated_model:.2f}x the model)")
