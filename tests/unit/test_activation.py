"""The activation planner's rules (base.activation) and `crdscope mrap --from` on files."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from crdscope.base.activation import (
    MRD, Catalogue, Policy, analyse, plural_forms, read_composition, template_kinds,
)
from crdscope.base.globs import go_match
from crdscope.costmodel.mrds import matches

SHARED = Path(__file__).resolve().parents[3] / "shared" / "crds"


def composition(*steps: dict, name: str = "xnets") -> dict:
    return {"apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition", "metadata": {"name": name},
            "spec": {"compositeTypeRef": {"apiVersion": "platform.example.org/v1", "kind": "XNet"},
                     "pipeline": list(steps)}}


def pt(*bases: tuple[str, str], step: str = "pt") -> dict:
    return {"step": step, "functionRef": {"name": "function-patch-and-transform"},
            "input": {"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources",
                      "resources": [{"name": f"r{i}", "base": {"apiVersion": a, "kind": k}}
                                    for i, (a, k) in enumerate(bases)]}}


def gotemplate(template: str, step: str = "tmpl", source: str = "Inline") -> dict:
    return {"step": step, "functionRef": {"name": "function-go-templating"},
            "input": {"apiVersion": "gotemplating.fn.crossplane.io/v1beta1", "kind": "GoTemplate",
                      "source": source, "inline": {"template": template}}}


MRDS = [MRD("vpcs.ec2.aws.upbound.io", "Active", True, objects=3),
        MRD("subnets.ec2.aws.upbound.io", "Inactive"),
        MRD("securitygroups.ec2.aws.upbound.io", "Inactive"),
        MRD("buckets.s3.aws.upbound.io", "Active", True, objects=0),
        MRD("bucketpolicies.s3.aws.upbound.io", "Active", False, objects=0),
        MRD("queues.sqs.aws.upbound.io", "Inactive")]


def test_plural_forms_cover_the_names_generators_give():
    for kind, plural in (("Bucket", "buckets"), ("Policy", "policies"), ("Address", "addresses"),
                         ("RegionSettings", "regionsettings"), ("Index", "indices"), ("Analysis", "analyses"),
                         ("SLO", "sloes"), ("Mesh", "meshes"), ("Gateway", "gateways")):
        assert plural in plural_forms(kind), kind


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/crds is absent (a plain clone)")
def test_every_real_provider_kind_resolves_to_its_own_mrd_by_name_alone():
    rows = []
    for archive in ("provider-aws.tar.xz", "provider-gcp.tar.xz"):
        with tarfile.open(SHARED / archive) as tar:
            for member in tar:
                handle = tar.extractfile(member) if member.isfile() else None
                if handle is None:
                    continue
                text = handle.read().decode()
                rows.append((re.search(r"^  group: (\S+)$", text, re.M).group(1),
                             re.search(r"^    kind: (\S+)$", text, re.M).group(1),
                             re.search(r"^    plural: (\S+)$", text, re.M).group(1)))
    catalogue = Catalogue(MRD(f"{plural}.{group}") for group, _, plural in rows)  # kinds unknown: names only
    wrong = [(g, k, p) for g, k, p in rows if (catalogue.resolve(f"{g}/v1beta1", k) or MRD("")).name != f"{p}.{g}"]
    assert len(rows) > 2800 and not wrong, wrong[:5]


def test_template_kinds_reads_literal_documents_and_says_what_it_cannot():
    pairs, gaps = template_kinds(
        "---\napiVersion: ec2.aws.upbound.io/v1beta1\nkind: Subnet\nmetadata:\n  name: a\n"
        "{{ range $i := .zones }}\n---\napiVersion: ec2.aws.upbound.io/v1beta1\nkind: SecurityGroup\n{{ end }}\n"
        "---\napiVersion: {{ $api }}\nkind: {{ $kind }}\n---\nnot: a resource\n")
    assert pairs == [("ec2.aws.upbound.io/v1beta1", "Subnet", True), ("ec2.aws.upbound.io/v1beta1", "SecurityGroup", True),
                     ("{{ $api }}", "{{ $kind }}", False)]
    assert gaps == []


def test_a_composition_is_read_step_by_step():
    template = ("---\napiVersion: sqs.aws.upbound.io/v1beta1\nkind: Queue\n---\n"
                "apiVersion: {{ .observed.composite.resource.apiVersion }}\nkind: XNet\nstatus: {}\n---\n"
                "apiVersion: meta.gotemplating.fn.crossplane.io/v1alpha1\nkind: CompositeConnectionDetails\n---\n"
                "apiVersion: {{ $g }}\nkind: Thing\n")
    kcl = {"step": "kcl", "functionRef": {"name": "function-kcl"},
           "input": {"apiVersion": "krm.kcl.dev/v1alpha1", "kind": "KCLInput",
                     "spec": {"resources": [{"apiVersion": "ec2.aws.upbound.io/v1beta1", "kind": "SecurityGroup"}]}}}
    read = read_composition(composition(pt(("ec2.aws.upbound.io/v1beta1", "VPC"), ("ec2.aws.upbound.io/v1beta1",
                                                                                    "Subnet")),
                                        gotemplate(template), kcl, gotemplate("", step="fs", source="FileSystem")))
    assert [(c.kind, c.step, c.certain) for c in read.composed] == [
        ("VPC", "pt", True), ("Subnet", "pt", True), ("Queue", "tmpl", True), ("SecurityGroup", "kcl", False)]
    assert read.composite == "XNet.platform.example.org"
    assert [(u.step, u.reason) for u in read.unreadable] == [
        ("tmpl", "apiVersion/kind computed by the template ({{ $g }} Thing)"),
        ("fs", "go-templating source FileSystem: the template is not in the Composition")]


def test_needed_kinds_verdicts_and_the_plan():
    read = read_composition(composition(pt(("ec2.aws.upbound.io/v1beta1", "VPC"),
                                           ("ec2.aws.upbound.io/v1beta1", "Subnet"),
                                           ("ec2.aws.upbound.io/v1beta1", "RouteTable"),
                                           ("kubernetes.crossplane.io/v1alpha1", "Object"),
                                           ("platform.example.org/v1", "XSubnet"))))
    policies = [Policy("mine", ("*.s3.aws.upbound.io", "subnet.ec2.aws.upbound.io", "Queue", "[bad",
                                "vpcs.ec2.aws.upbound.i", "*.sqs.aws.upbound"))]
    report = analyse([read], MRDS, policies)
    assert [(n.mrd, n.state) for n in report.needed] == [("subnets.ec2.aws.upbound.io", "Inactive"),
                                                         ("vpcs.ec2.aws.upbound.io", "Active")]
    assert report.needed[1].reasons == ("Composition xnets, step pt (XR XNet.platform.example.org)", "3 objects")
    codes = [(v.severity, v.code, v.subject) for v in report.verdicts]
    assert ("critical", "composed-inactive", "subnets.ec2.aws.upbound.io") in codes
    assert ("critical", "composed-no-mrd", "RouteTable.ec2.aws.upbound.io") in codes
    dead = {d.pattern: (d.why, d.nearest) for d in report.dead_entries}
    assert dead == {"subnet.ec2.aws.upbound.io": ("singular", "subnets.ec2.aws.upbound.io"),
                    "Queue": ("kind", "queues.sqs.aws.upbound.io"),
                    "[bad": ("malformed", dead["[bad"][1]),
                    "vpcs.ec2.aws.upbound.i": ("unknown-group", "vpcs.ec2.aws.upbound.io"),
                    "*.sqs.aws.upbound": ("nothing", "*.sqs.aws.upbound.io")}
    assert report.active_unused == ("bucketpolicies.s3.aws.upbound.io", "buckets.s3.aws.upbound.io")
    assert report.not_established == ("bucketpolicies.s3.aws.upbound.io",)
    assert report.other_kinds == ("Object.kubernetes.crossplane.io",)  # XSubnet: an XR group, not reported
    # The plan activates exactly the needed kinds (Go matching over every MRD), as YAML kubectl takes.
    document = yaml.safe_load(report.plan.yaml())
    assert document["kind"] == "ManagedResourceActivationPolicy"
    assert document["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "crdscope"}
    activated = {m.name for m in MRDS if any(go_match(p, m.name) for p in document["spec"]["activate"])}
    assert activated == {n.mrd for n in report.needed}


def test_a_group_needed_whole_is_one_pattern_and_nothing_needed_is_an_empty_plan():
    mrds = [MRD("queues.sqs.aws.upbound.io"), MRD("queuepolicies.sqs.aws.upbound.io"), MRD("topics.sns.aws.upbound.io")]
    read = read_composition(composition(pt(("sqs.aws.upbound.io/v1", "Queue"), ("sqs.aws.upbound.io/v1",
                                                                                 "QueuePolicy"))))
    assert analyse([read], mrds, []).plan.patterns == ("*.sqs.aws.upbound.io",)
    # `*` matches dots: the provider's own group as `*.aws.upbound.io` would activate every sqs kind too.
    family = [*mrds, MRD("providerconfigs.aws.upbound.io"), MRD("providerconfigusages.aws.upbound.io")]
    read = read_composition(composition(pt(("aws.upbound.io/v1", "ProviderConfig"),
                                           ("aws.upbound.io/v1", "ProviderConfigUsage"))))
    plan = analyse([read], family, []).plan
    assert plan.patterns == ("providerconfigs.aws.upbound.io", "providerconfigusages.aws.upbound.io")
    assert {m.name for m in family if any(go_match(p, m.name) for p in plan.patterns)} == set(plan.patterns)
    empty = analyse([], mrds, [])
    assert empty.plan.patterns == () and yaml.safe_load(empty.plan.yaml())["spec"]["activate"] == []


def test_estimate_activate_matches_as_crossplane_does():
    # Go's filepath.Match: [^...] negates, [!...] is a literal "!"; Python's fnmatch has it the other way.
    assert matches("buckets.s3.aws.upbound.io", ("[^a]uckets.s3.aws.upbound.io",))
    assert not matches("buckets.s3.aws.upbound.io", ("[!a]uckets.s3.aws.upbound.io",))
    assert not matches("buckets.s3.aws.upbound.io", ("[bad",))


def _write_platform(root: Path) -> set[str]:
    from crdscope.loader.synthetic import synthetic_documents

    documents = list(synthetic_documents(60))
    (root / "crds.yaml").write_text(yaml.safe_dump_all(documents))
    storage = next(d for d in documents if d["spec"]["group"] == "storage.m.synthetic.crdscope.dev")
    api = f"{storage['spec']['group']}/{storage['spec']['versions'][0]['name']}"
    (root / "platform.yaml").write_text(yaml.safe_dump_all([
        composition(pt((api, storage["spec"]["names"]["kind"]))),
        {"apiVersion": "apiextensions.crossplane.io/v1alpha1", "kind": "ManagedResourceActivationPolicy",
         "metadata": {"name": "identity"}, "spec": {"activate": ["*.identity.m.synthetic.crdscope.dev"]}}]))
    return {storage["metadata"]["name"]}


def crdscope(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "crdscope.cli.main", *args], capture_output=True, text=True,
                          timeout=120)


def test_mrap_from_files_prints_the_plan_and_exits_2_on_an_inactive_composed_kind(tmp_path):
    needed = _write_platform(tmp_path)
    done = crdscope("mrap", "--from", str(tmp_path), "--json")
    assert done.returncode == 2, done.stderr
    report = json.loads(done.stdout)
    assert {n["mrd"] for n in report["needed"]} == needed and report["plan"]["activate"] == sorted(needed)
    assert report["active_unused"] and all(".identity.m." in n for n in report["active_unused"])
    assert report["cost"]["priced_by"] == "schemas" and report["cost"]["saving_vs_all_bytes"]["value"] > 0
    assert report["requests"] == 0
    # The price is the model's for the path the plan takes (Crossplane activating the MRDs), or the direct
    # model's saying the activation path is not calibrated yet: either way no ratio of its own in the report.
    assert "Crossplane activation" in report["cost"]["path_note"]
    assert "crossplane_measured_ratio" not in report
    done = crdscope("mrap", "--from", str(tmp_path), "--yaml")
    assert done.returncode == 0 and yaml.safe_load(done.stdout)["spec"]["activate"] == sorted(needed)
    done = crdscope("mrap", "--from", str(tmp_path), "--format", "md")
    assert done.returncode == 2 and "| needed kind | state | why |" in done.stdout
    text = crdscope("mrap", "--from", str(tmp_path)).stdout
    assert "Crossplane activation" in text
    assert "x the model" not in text and "floor" not in text  # the retired ratio line and its "floor"


@pytest.mark.parametrize("args, says", [
    (("--from", "/nonexistent/platform"), "no such file or directory"),
    (("--from", ".", "--apply"), "does not go with --from"),
    (("--json", "--yaml", "--from", "."), "choose one of"),
])
def test_bad_input_is_one_line_and_exit_2(args, says):
    done = crdscope("mrap", *args)
    assert done.returncode == 2 and says in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/crds is absent (a plain clone)")
def test_on_the_real_aws_names_every_plan_activates_exactly_what_is_needed():
    import random

    with tarfile.open(SHARED / "provider-aws.tar.xz") as tar:
        names = sorted(f"{m.name.rsplit('/', 1)[-1][:-5].split('_', 1)[1]}.{m.name.rsplit('/', 1)[-1].split('_', 1)[0]}"
                       for m in tar if m.isfile() and m.name.endswith(".yaml"))
    catalogue = Catalogue(MRD(n) for n in names)
    groups = sorted(catalogue.by_group)
    chooser = random.Random(39)
    for _ in range(20):  # whole groups (the provider's own among them) and single kinds mixed
        whole = chooser.sample(groups, 8) + ["aws.upbound.io", "aws.m.upbound.io"]
        needed = {m.name for g in whole for m in catalogue.by_group[g].values()} | set(chooser.sample(names, 30))
        plan = analyse([], [MRD(n, objects=int(n in needed)) for n in names], []).plan
        assert {n for n in names if any(go_match(p, n) for p in plan.patterns)} == needed
