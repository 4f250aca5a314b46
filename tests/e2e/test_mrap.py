"""The activation planner on real Crossplane (issue 39): `crdscope mrap` reads what a platform composes.

One lab with real Crossplane (no default MRAP), a safe-start provider family crdscope generates and
packages with the real `crossplane xpkg` (three members: storage, queue, identity), an XRD and a
pipeline Composition whose patch-and-transform step composes a kind of storage and whose
go-templating step composes a kind of queue, and an MRAP that activates the identity group and
holds an entry in the singular.  kubectl is the reference for every MRD and CRD.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import LabHandle
from tests.helpers import established, wait_for

pytestmark = pytest.mark.lab

LAB_NAME = "mrap"
COUNT = 70
MRD = "managedresourcedefinitions.apiextensions.crossplane.io"
DOMAIN = ".m.synthetic.crdscope.dev"


def crdscope(*args: str, timeout: float = 900, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "crdscope.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


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


def _documents() -> dict[str, list[dict]]:
    from crdscope.loader.synthetic import synthetic_documents

    by_group: dict[str, list[dict]] = {}
    for document in synthetic_documents(COUNT):
        by_group.setdefault(document["spec"]["group"], []).append(document)
    return by_group


def _platform(by_group: dict[str, list[dict]]) -> tuple[list[dict], dict[str, str]]:
    """The XRD, the Composition and the MRAP; and the MRD names the Composition composes -> group."""
    storage, queue = by_group["storage" + DOMAIN][0], by_group["queue" + DOMAIN][0]
    identity = by_group["identity" + DOMAIN]

    def api_version(crd: dict) -> str:
        return f"{crd['spec']['group']}/{crd['spec']['versions'][0]['name']}"

    template = (f"---\napiVersion: {api_version(queue)}\nkind: {queue['spec']['names']['kind']}\nmetadata:\n"
                "  annotations:\n    gotemplating.fn.crossplane.io/composition-resource-name: queue\nspec:\n"
                "  forProvider:\n    region: {{ .observed.composite.resource.spec.region }}\n---\n"
                "apiVersion: {{ .observed.composite.resource.apiVersion }}\nkind: XApp\nstatus:\n  ready: true\n")
    objects = [
        {"apiVersion": "apiextensions.crossplane.io/v2", "kind": "CompositeResourceDefinition",
         "metadata": {"name": "xapps.platform.example.org"},
         "spec": {"group": "platform.example.org", "names": {"kind": "XApp", "plural": "xapps"},
                  "scope": "Namespaced",
                  "versions": [{"name": "v1alpha1", "served": True, "referenceable": True,
                                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                    "spec": {"type": "object", "properties": {"region": {"type": "string"}}}}}}}]}},
        {"apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition", "metadata": {"name": "xapps"},
         "spec": {"compositeTypeRef": {"apiVersion": "platform.example.org/v1alpha1", "kind": "XApp"},
                  "pipeline": [
                      {"step": "storage", "functionRef": {"name": "function-patch-and-transform"},
                       "input": {"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources",
                                 "resources": [{"name": "store", "base": {
                                     "apiVersion": api_version(storage), "kind": storage["spec"]["names"]["kind"],
                                     "spec": {"forProvider": {}}}}]}},
                      {"step": "queue", "functionRef": {"name": "function-go-templating"},
                       "input": {"apiVersion": "gotemplating.fn.crossplane.io/v1beta1", "kind": "GoTemplate",
                                 "source": "Inline", "inline": {"template": template}}}]}},
        {"apiVersion": "apiextensions.crossplane.io/v1alpha1", "kind": "ManagedResourceActivationPolicy",
         "metadata": {"name": "identity"},
         "spec": {"activate": ["*.identity" + DOMAIN,
                               f"{identity[0]['spec']['names']['singular']}.identity{DOMAIN}"]}},
    ]
    composed = {storage["metadata"]["name"]: storage["spec"]["group"],
                queue["metadata"]["name"]: queue["spec"]["group"]}
    return objects, composed


def _established_crds(handle: LabHandle) -> set[str]:
    return {c["metadata"]["name"] for c in handle.kubectl_json("get", "crds")["items"]
            if c["metadata"]["name"].endswith(".synthetic.crdscope.dev") and established(c)}


def _mrds(handle: LabHandle) -> dict[str, dict]:
    return {m["metadata"]["name"]: m for m in handle.kubectl_json("get", MRD)["items"]}


def _doctor(handle: LabHandle) -> tuple[int, dict[str, dict]]:
    done = crdscope("doctor", "--json", "--duration", "30s", "--kubeconfig", handle.kubeconfig,
                    "--context", handle.admin_context, timeout=300)
    assert done.returncode in (0, 1, 2), done.stderr
    return done.returncode, {f["id"]: f for f in json.loads(done.stdout)["findings"]}


def test_the_planner_names_what_the_composition_needs_and_its_plan_activates_exactly_that(lab, tmp_path):
    from crdscope.base.labrecord import lab_registry

    by_group = _documents()
    packages_dir = tmp_path / "packages"
    done = crdscope("package", f"synthetic:{COUNT}", "--name", "provider-synthetic", "--family", "--safe-start",
                    "--push", "--registry",
                    lab_registry(LAB_NAME), "--output", str(packages_dir), "--json")
    assert done.returncode == 0, done.stderr
    packages = json.loads(done.stdout)["packages"]
    members = [p for p in packages if any(g.split(".", 1)[0] in ("storage", "queue", "identity") for g in p["groups"])]
    assert len(members) == 3, [p["name"] for p in packages]
    for member in members:
        lab.kubectl("apply", "-f", "-", input=json.dumps({
            "apiVersion": "pkg.crossplane.io/v1", "kind": "Provider", "metadata": {"name": member["name"]},
            "spec": {"package": member["reference"]}}))
    member_groups = {g for p in members for g in p["groups"]}
    expected_mrds = {d["metadata"]["name"] for g in member_groups for d in by_group.get(g, [])}
    wait_for(lambda: expected_mrds <= set(_mrds(lab)), timeout=300, message="the members' MRDs")
    objects, composed = _platform(by_group)
    lab.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(objects))
    identity = {d["metadata"]["name"] for d in by_group["identity" + DOMAIN]}
    wait_for(lambda: identity <= _established_crds(lab), timeout=300, message="the identity CRDs")

    # The planner, from the cluster: exactly the composed kinds are needed, both Inactive; the dead entry
    # with its nearest MRD; the identity group active and unused.
    done = crdscope("mrap", "--json", "--kubeconfig", lab.kubeconfig, "--context", lab.admin_context)
    assert done.returncode == 2, done.stderr  # a composed kind is inactive
    report = json.loads(done.stdout)
    assert {n["mrd"] for n in report["needed"]} == set(composed)
    assert all(n["state"] == "Inactive" for n in report["needed"])
    mrds = _mrds(lab)
    assert all(mrds[name]["spec"].get("state", "Inactive") == "Inactive" for name in composed)  # kubectl agrees
    critical = [v for v in report["verdicts"] if v["code"] == "composed-inactive"]
    assert {v["subject"] for v in critical} == set(composed)
    assert any("XRs of kind XApp.platform.example.org will fail" in v["message"] for v in critical)
    [dead] = report["dead_entries"]
    singular = next(d for d in by_group["identity" + DOMAIN])
    assert dead["pattern"].startswith(singular["spec"]["names"]["singular"] + ".")
    assert dead["why"] == "singular" and dead["nearest"] == singular["metadata"]["name"]
    assert set(report["active_unused"]) == identity
    assert report["requests"] <= 6, "a fixed number of requests, none per kind"
    # The health probe counts the MRDs (their memory is theirs, not the CRDs'), as kubectl lists them
    # (the server refreshes its object counts about once a minute).
    def health_mrds() -> int:
        done = crdscope("probe", "health", "--json", "--kubeconfig", lab.kubeconfig, "--context", lab.admin_context)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)["mrds"]

    wait_for(lambda: health_mrds() == len(_mrds(lab)), timeout=180, interval=2, message="the MRDs counted")
    # The same verdicts from files, with no cluster: the platform's objects beside the provider's packages.
    platform_dir = tmp_path / "platform"
    platform_dir.mkdir()
    (platform_dir / "platform.yaml").write_text(yaml.safe_dump_all(objects))
    for member in members:
        source = packages_dir / Path(member["file"]).name
        (platform_dir / source.name).write_bytes(source.read_bytes())
    done = crdscope("mrap", "--from", str(platform_dir), "--json")
    assert done.returncode == 2, done.stderr
    from_files = json.loads(done.stdout)
    assert {n["mrd"] for n in from_files["needed"]} == set(composed)
    assert [(d["pattern"], d["nearest"]) for d in from_files["dead_entries"]] == [(dead["pattern"], dead["nearest"])]
    assert set(from_files["active_unused"]) == identity
    assert from_files["plan"]["activate"] == report["plan"]["activate"]

    code, findings = _doctor(lab)
    assert code == 2 and "crossplane-composed-kind-inactive" in findings, sorted(findings)
    assert "crossplane-mrap-entry-matches-nothing" in findings

    # Applying the --yaml plan makes exactly the composed kinds' CRDs Established, and no other.
    plan = crdscope("mrap", "--yaml", "--kubeconfig", lab.kubeconfig, "--context", lab.admin_context)
    assert plan.returncode == 0, plan.stderr
    assert yaml.safe_load(plan.stdout)["spec"]["activate"] == report["plan"]["activate"]
    before = _established_crds(lab)
    lab.kubectl("apply", "-f", "-", input=plan.stdout)
    wait_for(lambda: set(composed) <= _established_crds(lab), timeout=300, message="the planned CRDs")
    assert _established_crds(lab) - before == set(composed)
    code, findings = _doctor(lab)
    assert "crossplane-composed-kind-inactive" not in findings and code != 2, sorted(findings)
    done = crdscope("mrap", "--json", "--kubeconfig", lab.kubeconfig, "--context", lab.admin_context)
    assert done.returncode == 0, done.stderr
    assert all(n["state"] == "Active" for n in json.loads(done.stdout)["needed"])

    # --apply writes only with --context spelled out, and reports each CRD as Established.
    refused = crdscope("mrap", "--apply", "--kubeconfig", lab.kubeconfig)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "--context" in refused.stderr
    applied = crdscope("mrap", "--apply", "--kubeconfig", lab.kubeconfig, "--context", lab.admin_context,
                       "--name", "crdscope-activation-plan")
    assert applied.returncode == 0, applied.stderr
    assert f"all {len(composed)} CRDs of the plan are Established" in applied.stderr
    # An MRAP crdscope did not create is never written over.
    refused = crdscope("mrap", "--apply", "--kubeconfig", lab.kubeconfig, "--context", lab.admin_context,
                       "--name", "identity")
    assert refused.returncode == 2 and "crdscope did not create it" in refused.stderr, refused.stderr
    assert lab.kubectl_json("get", "managedresourceactivationpolicies", "identity")["spec"]["activate"] == \
        objects[2]["spec"]["activate"]
