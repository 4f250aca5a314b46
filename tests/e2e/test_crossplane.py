"""Real Crossplane v2 in the lab (issues 26, 47): its core, a registry and real packages, watched by the monitor.

One lab for the module: ``crdscope lab up --crossplane --activation none`` (no default MRAP, so a
safe-start provider activates nothing by itself), real ``crossplane core start`` (v2.4.2, the lab's
default), real ``crane`` registry, real kube-controller-manager (Deployment controllers only: provider
Deployments get a status, their Pods never run), packages built and pushed by ``crdscope package``
with the real ``crossplane xpkg`` (v2.0.0's CLI).  kubectl is the reference for every object the
chain is made of.  Crossplane v2.0 stays selectable: one light test brings it up beside.
"""

from __future__ import annotations

import fnmatch
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crdscope.base.crossplane import PLAIN_CRD_KINDS
from tests.conftest import LabHandle
from tests.helpers import condition_true, established, wait_for

pytestmark = pytest.mark.lab

LAB_NAME = "xp"
#: A few dozen CRDs of two AWS services and the provider's own config group.
FAMILY_GROUPS = ("aws.upbound.io", "aws.m.upbound.io", "sqs.aws.upbound.io", "sqs.aws.m.upbound.io",
                 "sns.aws.upbound.io", "sns.aws.m.upbound.io")
#: The groups installing the sqs member brings: its own two and the family package's two.
SQS_WITH_FAMILY = ("sqs.aws.upbound.io", "sqs.aws.m.upbound.io", "aws.upbound.io", "aws.m.upbound.io")
MRD = "managedresourcedefinitions.apiextensions.crossplane.io"


def crdscope(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "crdscope.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def crossplane_lab(lab_binaries) -> LabHandle:
    """A named lab with real Crossplane (no default MRAP); torn down at the end of the module."""
    from crdscope.lab.controlplane import Lab

    done = crdscope("lab", "up", "--name", LAB_NAME, "--crossplane", "--activation", "none")
    the_lab = Lab(name=LAB_NAME)
    if done.returncode != 0:  # the lab may be up without Crossplane: never leave it running
        the_lab.down()
        pytest.fail(done.stderr)
    state = the_lab.require()
    handle = LabHandle(lab=the_lab, state=state, kubeconfig=state.kubeconfig, admin_context=state.admin_context,
                       restricted_context=state.restricted_context)
    yield handle
    the_lab.down()
    assert the_lab.state() is None and not Path(state.run_dir).exists()


def test_lab_status_shows_crossplane_and_registry(crossplane_lab):
    from crdscope.toolchain.crossplane import default_version

    done = crdscope("lab", "status", "--name", LAB_NAME, "--json")
    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout)
    assert status["crossplane"]["healthy"] is True
    assert status["crossplane"]["version"] == default_version() == "v2.4.2"
    assert status["components"]["registry"]["state"] == "running"
    assert status["components"]["crossplane"]["state"] == "running"
    assert status["components"]["controller-manager"]["state"] == "running"
    # What `core init` did, as kubectl sees it: core CRDs, the Lock, no default MRAP.
    names = {c["metadata"]["name"] for c in crossplane_lab.kubectl_json("get", "crds")["items"]}
    assert {"providers.pkg.crossplane.io", MRD, "managedresourceactivationpolicies.apiextensions.crossplane.io"} <= names
    assert crossplane_lab.kubectl_json("get", "managedresourceactivationpolicies")["items"] == []
    assert crossplane_lab.kubectl("get", "serviceaccount", "crossplane", "-n", "crossplane-system").returncode == 0


def _subset(shared_crds: Path, root: Path) -> tuple[Path, list[dict]]:
    """The CRDs of FAMILY_GROUPS from the shared AWS set, as one YAML file."""
    import tarfile

    import yaml

    # The shared sets name each file <group>_<plural>.yaml: only FAMILY_GROUPS' files are parsed (parsing all
    # 2,000 with the pure-Python loader took over 10 minutes on a loaded machine), with libyaml where present.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    documents = []
    with tarfile.open(shared_crds / "provider-aws.tar.xz") as archive:
        for member in archive:
            group = Path(member.name).name.partition("_")[0]
            if not member.isfile() or not member.name.endswith((".yaml", ".yml")) or group not in FAMILY_GROUPS:
                continue
            handle = archive.extractfile(member)
            assert handle is not None
            for document in yaml.load_all(handle, Loader=loader):
                if isinstance(document, dict) and document.get("kind") == "CustomResourceDefinition" \
                        and document["spec"]["group"] in FAMILY_GROUPS:
                    documents.append(document)
    assert 20 <= len(documents) <= 80, len(documents)
    path = root / "subset.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    return path, documents


def _established(handle: LabHandle, names: set[str]) -> set[str]:
    items = handle.kubectl_json("get", "crds")["items"]
    return {c["metadata"]["name"] for c in items if c["metadata"]["name"] in names and established(c)}


def test_safe_start_family_installs_through_crossplane(crossplane_lab, shared_crds, tmp_path):
    source, documents = _subset(shared_crds, tmp_path)
    done = crdscope("package", str(source), "--name", "provider-aws", "--family", "--safe-start", "--push",
                    "--registry", _registry(), "--output", str(tmp_path / "packages"), "--json")
    assert done.returncode == 0, done.stderr
    built = json.loads(done.stdout)
    packages = built["packages"]
    assert all(p["reference"] and p["safe_start"] for p in packages)
    member = next(p for p in packages if "sqs.aws.upbound.io" in p["groups"])
    crossplane_lab.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "pkg.crossplane.io/v1", "kind": "Provider", "metadata": {"name": member["name"]},
        "spec": {"package": member["reference"]}}))
    # Safe start: the revision turns every CRD of the member and of its family dependency into an MRD,
    # except the ProviderConfig kinds, which Crossplane v2.4 installs as CRDs (Established at once).
    configs = {d["metadata"]["name"] for d in documents if d["spec"]["names"]["kind"] in PLAIN_CRD_KINDS}
    names = {d["metadata"]["name"] for d in documents} - configs
    installed = {d["metadata"]["name"] for d in documents if d["spec"]["group"] in SQS_WITH_FAMILY}
    expected = installed - configs
    assert configs & installed and expected

    def mrds() -> dict[str, dict]:
        return {m["metadata"]["name"]: m for m in crossplane_lab.kubectl_json("get", MRD)["items"]}

    wait_for(lambda: expected <= set(mrds()), timeout=300)
    assert not set(mrds()) & configs
    wait_for(lambda: _established(crossplane_lab, configs) == configs & installed, timeout=120)
    assert all(m["spec"].get("state", "Inactive") == "Inactive" for m in mrds().values())
    assert not _established(crossplane_lab, names), "no managed resource CRD may be created before an activation"
    asleep = _awaiting_activation(crossplane_lab, member["name"])
    composition = _compose_queues(crossplane_lab)
    try:
        _planner_wakes_the_member(crossplane_lab, member["name"])
    finally:
        crossplane_lab.kubectl("delete", "composition", composition)
    # An MRAP activating one kind pattern: exactly the matching CRDs are created and Established.
    pattern = "*queues.sqs.aws.upbound.io"
    done = crdscope("estimate", "--activate", pattern, "--kubeconfig", crossplane_lab.kubeconfig,
                    "--context", crossplane_lab.admin_context, "--json")
    assert done.returncode == 0, done.stderr
    predicted = json.loads(done.stdout)
    gvs_before = _served_group_versions(crossplane_lab)
    crossplane_lab.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "apiextensions.crossplane.io/v1alpha1", "kind": "ManagedResourceActivationPolicy",
        "metadata": {"name": "sqs-queues"}, "spec": {"activate": [pattern]}}))
    matching = {n for n in expected if fnmatch.fnmatch(n, pattern)}
    assert matching
    wait_for(lambda: _established(crossplane_lab, names) == matching, timeout=300)
    gvs_after = _served_group_versions(crossplane_lab)
    # What `estimate --activate` read from the MRDs before anything was activated.
    assert predicted["activate"]["mrds"] == sorted(matching)
    assert predicted["crds"] == len(matching)
    assert predicted["discovery"]["group_versions_added"] == len(gvs_after - gvs_before)
    active = {n for n, m in mrds().items() if m["spec"].get("state") == "Active"}
    assert active == matching
    # The monitor's view of the chain agrees with kubectl's.
    done = crdscope("probe", "inventory", "--json", "--kubeconfig", crossplane_lab.kubeconfig,
                    "--context", crossplane_lab.admin_context)
    assert done.returncode == 0, done.stderr
    chain = json.loads(done.stdout)["crossplane"]
    providers = {p["metadata"]["name"]: p for p in crossplane_lab.kubectl_json("get", "providers")["items"]}
    assert {p["name"] for p in chain["providers"]} == set(providers)
    sqs = next(p for p in chain["providers"] if p["name"] == member["name"])
    assert sqs["package"] == member["reference"]
    _woken(crossplane_lab, asleep, sqs)
    revisions = crossplane_lab.kubectl_json("get", "providerrevisions")["items"]
    assert {r["name"] for p in chain["providers"] for r in p["revisions"]} == {r["metadata"]["name"] for r in revisions}
    assert sum(p["mrds"] for p in chain["providers"]) == len(mrds())
    assert sum(p["mrds_active"] for p in chain["providers"]) == len(matching)
    assert sum(p["crds_established"] for p in chain["providers"]) == len(matching) + len(configs & installed)
    [mrap] = chain["mraps"]
    assert mrap["name"] == "sqs-queues" and mrap["patterns"] == [pattern] and mrap["activated"] == len(matching)


def test_unused_active_kinds_finding_names_them_and_the_mrap_of_kinds_in_use(crossplane_lab, tmp_path):
    """After the MRAP of every cluster-scoped SQS kind (none has objects) the doctor names them all;
    once one Queue exists, that kind is in use: no longer named, and the proposed MRAP holds only it."""
    mrds = {m["metadata"]["name"]: m for m in crossplane_lab.kubectl_json("get", MRD)["items"]}
    [provider] = [p["metadata"]["name"] for p in crossplane_lab.kubectl_json("get", "providers")["items"]
                  if p["metadata"]["name"].endswith("-sqs")]
    sqs = {n for n in mrds if fnmatch.fnmatch(n, "*.sqs.aws.upbound.io")}
    assert len(sqs) >= 3
    crossplane_lab.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "apiextensions.crossplane.io/v1alpha1", "kind": "ManagedResourceActivationPolicy",
        "metadata": {"name": "sqs-all"}, "spec": {"activate": ["*.sqs.aws.upbound.io"]}}))
    wait_for(lambda: sqs <= _established(crossplane_lab, sqs), timeout=300)
    config = tmp_path / "config"
    (config / "crdscope").mkdir(parents=True)
    (config / "crdscope" / "config.toml").write_text("[thresholds]\ncrossplane_unused_mrds_info = 1\n")

    def unused_finding() -> dict:
        done = subprocess.run([sys.executable, "-m", "crdscope.cli.main", "doctor", "--json", "--duration", "30s",
                               "--kubeconfig", crossplane_lab.kubeconfig, "--context", crossplane_lab.admin_context],
                              capture_output=True, text=True, timeout=300,
                              env={**os.environ, "XDG_CONFIG_HOME": str(config)})
        assert done.returncode in (0, 1, 2), done.stderr
        findings = {f["id"]: f for f in json.loads(done.stdout)["findings"]}
        key = f"crossplane-unused-active-mrds:{provider}"
        assert key in findings, sorted(findings)
        return findings[key]

    finding = unused_finding()
    assert f"{len(sqs)} of {len(sqs)} active kinds are neither composed nor in use" in finding["title"]
    assert finding["title"].endswith("the activation plan keeps the other 0")
    assert f"active kinds the plan leaves out ({', '.join(sorted(sqs))})" in " ".join(finding["evidence"])
    # Activated by the user's own MRAP entry: the remedy names it, and the plan is no MRAP at all.
    assert "`*.sqs.aws.upbound.io` (MRAP sqs-all)" in finding["remedy"]
    assert "no MRAP at all (nothing is composed or in use)" in finding["remedy"]
    # One object of one active kind: once the server counts it, that kind is in use.
    crossplane_lab.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "sqs.aws.upbound.io/v1beta1", "kind": "Queue", "metadata": {"name": "in-use"},
        "spec": {"forProvider": {"region": "us-east-1"}}}))
    wait_for(lambda: _stored_objects(crossplane_lab, "sqs.aws.upbound.io", "queues") >= 1, timeout=180)
    finding = unused_finding()
    unused = sorted(sqs - {"queues.sqs.aws.upbound.io"})
    assert f"{len(unused)} of {len(sqs)} active kinds are neither composed nor in use" in finding["title"]
    assert finding["title"].endswith("the activation plan keeps the other 1")
    assert f"active kinds the plan leaves out ({', '.join(unused)})" in " ".join(finding["evidence"])
    assert '"spec": {"activate": ["queues.sqs.aws.upbound.io"]}' in finding["remedy"]


def _revision(handle: LabHandle, provider: str) -> dict:
    [revision] = [r for r in handle.kubectl_json("get", "providerrevisions")["items"]
                  if r["metadata"]["labels"].get("pkg.crossplane.io/package") == provider]
    return revision


def _revision_when(handle: LabHandle, provider: str, holds, message: str) -> dict:
    """The provider's revision once ``holds(revision)`` (polled with a deadline)."""
    def ready() -> dict | None:
        revision = _revision(handle, provider)
        return revision if holds(revision) else None
    return wait_for(ready, timeout=180, message=message)


def _condition(item: dict, kind: str) -> dict:
    return next((c for c in (item.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


def _doctor(handle: LabHandle) -> dict[str, dict]:
    done = crdscope("doctor", "--json", "--duration", "20s", "--kubeconfig", handle.kubeconfig,
                    "--context", handle.admin_context, timeout=300)
    assert done.returncode in (0, 1, 2), done.stderr
    return {f["id"]: f for f in json.loads(done.stdout)["findings"]}


def _awaiting_activation(handle: LabHandle, provider: str) -> dict:
    """Crossplane v2.4 keeps a safe-start runtime with no Active MRD scaled to zero, and says so (RuntimeActive
    False, AwaitingActivation; RuntimeHealthy True: a Deployment of zero replicas is Available): the chain
    shows it as awaiting activation, and the doctor has nothing to say about runtimes."""
    revision = _revision_when(handle, provider, lambda r: bool(_condition(r, "RuntimeActive")),
                              "RuntimeActive on the member's revision")
    active = _condition(revision, "RuntimeActive")
    assert (active["status"], active["reason"]) == ("False", "AwaitingActivation"), active
    assert condition_true(revision, "RuntimeHealthy")
    deployment = handle.kubectl_json("get", "deployment", revision["metadata"]["name"], "-n", "crossplane-system")
    assert deployment["spec"]["replicas"] == 0
    chain = json.loads(crdscope("probe", "inventory", "--json", "--kubeconfig", handle.kubeconfig,
                                "--context", handle.admin_context).stdout)["crossplane"]
    runtimes = {p["name"]: p["runtime"] for p in chain["providers"]}
    assert runtimes[provider] == "awaiting-activation", runtimes
    text = crdscope("probe", "inventory", "--kubeconfig", handle.kubeconfig, "--context", handle.admin_context).stdout
    assert "scaled to zero awaiting activation" in text
    # The family package holds ProviderConfig kinds only (CRDs, no MRD): nothing keeps its runtime at zero,
    # so it is the one runtime that should run, and without a Node cannot: said once, the member not named.
    findings = _doctor(handle)
    assert not [k for k in findings if k.startswith("crossplane-runtime-not-running")]
    assert provider not in findings.get("crossplane-no-nodes", {}).get("title", "")
    return revision


def _compose_queues(handle: LabHandle) -> str:
    """A Composition composing the SQS Queue kind: what the planner plans for."""
    name = "xqueues.platform.example.org"
    handle.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition", "metadata": {"name": name},
        "spec": {"compositeTypeRef": {"apiVersion": "platform.example.org/v1", "kind": "XQueue"},
                 "pipeline": [{"step": "pt", "functionRef": {"name": "function-patch-and-transform"},
                               "input": {"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources",
                                         "resources": [{"name": "queue", "base": {
                                             "apiVersion": "sqs.aws.upbound.io/v1beta1", "kind": "Queue"}}]}}]}}))
    return name


def _planner_wakes_the_member(handle: LabHandle, provider: str) -> None:
    """`crdscope mrap` names the sleeping runtime its plan wakes (the member whose Queue kind it activates),
    and the family package's, which it leaves at zero."""
    done = crdscope("mrap", "--json", "--kubeconfig", handle.kubeconfig, "--context", handle.admin_context)
    assert done.returncode == 2, done.stderr  # the composed Queue kind is inactive: critical until activated
    plan = json.loads(done.stdout)
    assert plan["plan"]["activate"] == ["queues.sqs.aws.upbound.io"]
    woken = {w["provider"]: w for w in plan["runtimes_awaiting"]}
    assert woken[provider]["wakes"] is True and woken[provider]["activates"] == 1
    assert [name for name, w in woken.items() if w["wakes"]] == [provider]
    text = crdscope("mrap", "--kubeconfig", handle.kubeconfig, "--context", handle.admin_context).stdout
    assert f"wakes {provider} (" in text


def _woken(handle: LabHandle, asleep: dict, chain_row: dict) -> None:
    """After the MRAP: Crossplane scales the member's runtime up (one replica) and flips RuntimeActive to
    True at once (ActiveRuntime: the Deployment it applies still carries the Available condition of its
    zero-replica days); once the Deployment controller sees the replica that no Node runs, the Deployment
    is not Available and RuntimeHealthy turns False.  The chain says the runtime cannot run; the doctor
    says so once for the cluster, with no per-provider finding."""
    name = asleep["metadata"]["name"]
    wait_for(lambda: handle.kubectl_json("get", "deployment", name, "-n", "crossplane-system")["spec"]["replicas"] == 1,
             timeout=120, message="the member's Deployment scaled up")
    revision = _revision_when(handle, chain_row["name"],
                              lambda r: _condition(r, "RuntimeHealthy").get("status") == "False",
                              "RuntimeHealthy False once the Deployment wants a Pod")
    assert "deployment is unavailable" in _condition(revision, "RuntimeHealthy")["message"]
    active = _condition(revision, "RuntimeActive")
    assert (active["status"], active["reason"]) == ("True", "ActiveRuntime"), active  # flipped, and latched
    chain = json.loads(crdscope("probe", "inventory", "--json", "--kubeconfig", handle.kubeconfig,
                                "--context", handle.admin_context).stdout)["crossplane"]
    row = next(p for p in chain["providers"] if p["name"] == chain_row["name"])
    assert row["runtime"] == "no-kubelet" and "no Node" in row["runtime_note"]
    [current] = [r for r in row["revisions"] if r["desired_state"] == "Active"]
    assert (current["runtime_active"], current["runtime_active_reason"]) == ("True", "ActiveRuntime")
    assert chain["has_nodes"] is False
    findings = _doctor(handle)
    assert "crossplane-no-nodes" in findings and chain_row["name"] in findings["crossplane-no-nodes"]["title"]
    assert not [k for k in findings if k.startswith("crossplane-runtime-not-running")]


def _stored_objects(handle: LabHandle, group: str, resource: str) -> float:
    """The object count the API server reports for a resource (what the health probe reads), 0 if none."""
    from crdscope.probes.health import OBJECT_FAMILIES
    from crdscope.connection.metrics import parse_text

    scrape = parse_text(handle.kubectl("get", "--raw", "/metrics").stdout.encode(), OBJECT_FAMILIES)
    for family in OBJECT_FAMILIES:
        counts = scrape.by(family, "group", "resource")
        if counts:
            return counts.get((group, resource), 0.0)
    return 0.0


def test_estimate_activate_measure_checks_the_prediction_through_real_crossplane(crossplane_lab):
    """The module's lab is the cluster whose MRDs are read; --measure brings up (and takes down) its own."""
    patterns = ("*.sqs.aws.m.upbound.io", "providerconfigs.aws.m.upbound.io")
    mrds = {m["metadata"]["name"]: m for m in crossplane_lab.kubectl_json("get", MRD)["items"]}
    selected = sorted(n for n, m in mrds.items() if any(fnmatch.fnmatch(n, p) for p in patterns)
                      and m["spec"].get("state", "Inactive") == "Inactive")
    assert 3 <= len(selected) <= 8
    arguments = [a for p in patterns for a in ("--activate", p)]
    done = crdscope("estimate", *arguments, "--measure", "--json", "--kubeconfig", crossplane_lab.kubeconfig,
                    "--context", crossplane_lab.admin_context, timeout=600)
    assert done.returncode == 0, done.stderr
    measured = json.loads(done.stdout)
    print(json.dumps(measured["comparison"], indent=1))  # the figures, for the record (pytest -s)
    assert measured["activate"] == {"patterns": list(patterns), "mrds": selected}
    assert measured["crossplane"].startswith("v2.") and measured["package"].startswith("127.0.0.1:")
    rows = {row["figure"]: row for row in measured["comparison"]}
    groups = {n.split(".", 1)[1] for n in selected}
    assert rows["CRDs added"]["predicted"] == rows["CRDs added"]["measured"] == len(selected)
    assert rows["group-versions added"]["predicted"] == rows["group-versions added"]["measured"] == len(groups)
    assert rows["OpenAPI v3 paths added"]["met"] is True
    for figure in ("memory added (RSS)", "aggregated discovery added", "OpenAPI v2 bytes added"):
        assert rows[figure]["predicted"] > 0 and rows[figure]["measured"] is not None, rows[figure]
    assert measured["activation_seconds"] > 0
    # The measurement lab is gone, and the cluster read was left as it was.
    from crdscope.lab.controlplane import lab_home

    assert not list(lab_home("estimate").parent.glob("estimate-*"))
    after = {m["metadata"]["name"]: m["spec"].get("state") for m in crossplane_lab.kubectl_json("get", MRD)["items"]}
    assert all(after[n] in (None, "Inactive") for n in selected)
    # Usage errors stay one line.
    done = crdscope("estimate", "--activate", "*", "--kubernetes", "1.37", "--measure")
    assert done.returncode != 0 and len(done.stderr.strip().splitlines()) == 1


def _served_group_versions(handle: LabHandle) -> set[str]:
    groups = json.loads(handle.kubectl("get", "--raw", "/apis").stdout)["groups"]
    return {version["groupVersion"] for group in groups for version in group["versions"]}


def _registry() -> str:
    from crdscope.base.labrecord import lab_registry

    return lab_registry(LAB_NAME)



def _printer_columns(handle_or_kubeconfig, context: str) -> set[str]:
    done = subprocess.run(["kubectl", "--kubeconfig", handle_or_kubeconfig, "--context", context, "get", "crd",
                           "providerrevisions.pkg.crossplane.io", "-o", "json"], capture_output=True, text=True,
                          timeout=60, check=True)
    versions = json.loads(done.stdout)["spec"]["versions"]
    return {c["name"] for v in versions for c in v.get("additionalPrinterColumns") or []}


def test_crossplane_v2_0_stays_selectable_beside_the_default(crossplane_lab):
    """`--crossplane-version v2.0` runs v2.0.0's core (its CRDs: no RUNTIME-ACTIVE column); the default lab's
    v2.4.2 has RUNTIME-HEALTHY and RUNTIME-ACTIVE on its package revisions."""
    from crdscope.lab.controlplane import Lab

    assert {"RUNTIME-HEALTHY", "RUNTIME-ACTIVE"} <= _printer_columns(crossplane_lab.kubeconfig,
                                                                     crossplane_lab.admin_context)
    name = "xp20"
    done = crdscope("lab", "up", "--name", name, "--crossplane", "--crossplane-version", "v2.0", "--activation", "none")
    old = Lab(name=name)
    try:
        assert done.returncode == 0, done.stderr
        assert "crossplane v2.0.0" in done.stdout
        status = json.loads(crdscope("lab", "status", "--name", name, "--json").stdout)
        assert status["crossplane"]["version"] == "v2.0.0" and status["crossplane"]["healthy"] is True
        state = old.require()
        assert "RUNTIME-ACTIVE" not in _printer_columns(state.kubeconfig, state.admin_context)
    finally:
        old.down()
    bad = crdscope("lab", "up", "--name", "never", "--crossplane", "--crossplane-version", "v2.3")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "v2.4 (v2.4.2)" in bad.stderr
    assert Lab(name="never").state() is None
