"""``crdscope doctor`` on the lab, as a person runs it: exit code by the worst finding."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from crdscope.findings.kubectl import SMALL_CLUSTER_GROUP_VERSIONS
from tests.crdsets import crd_names, delete_crds, extract
from tests.faults.helpers import crdscope

RANK = {"info": 0, "warning": 1, "critical": 2}

pytestmark = pytest.mark.lab


def test_doctor_on_an_idle_small_lab_finds_nothing_and_exits_0(lab):
    done = crdscope("doctor", "--duration", "20s", "--json", "--kubeconfig", lab.kubeconfig,
                    "--context", lab.admin_context, timeout=120)
    report = json.loads(done.stdout)
    serious = [f for f in report["findings"] if f["severity"] != "info"]
    assert done.returncode == 0 and not serious, (done.returncode, serious, done.stderr)
    assert report["exit_code"] == 0 and report["cluster"]["server"] == lab.server
    assert report["samples"] > 20  # the responsiveness probe alone reports every second
    assert "API server answering" in " ".join(report["checked"])


def test_doctor_markdown_says_what_it_checked(lab):
    done = crdscope("doctor", "--duration", "5s", "--format", "md", "--kubeconfig", lab.kubeconfig,
                    "--context", lab.admin_context, timeout=120)
    assert done.returncode in (0, 1), done.stderr  # a busy machine may see a slow canary in 5 s
    assert done.stdout.startswith("### crdscope doctor: ")
    assert "Nothing found. Checked:" in done.stdout or "**" in done.stdout


def test_doctor_rejects_a_bad_duration_in_one_line():
    done = crdscope("doctor", "--duration", "soon", timeout=60)
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0, done.stderr
    assert "not a duration" in done.stderr and "Traceback" not in done.stderr


#: Whole API groups of the AWS provider: about 190 CRDs, and with the built-in ones more group-versions
#: than a small cluster has (findings.kubectl.SMALL_CLUSTER_GROUP_VERSIONS).
AWS_GROUPS = 36


def test_doctor_on_an_aws_slice_names_kubectl_and_unused_crds(lab, shared_crds, tmp_path):
    """The kubectl and unused-CRD findings with their evidence, checked against kubectl itself."""
    paths = extract("provider-aws", tmp_path / "aws", groups=AWS_GROUPS)
    names = crd_names(paths)
    try:
        lab.kubectl("apply", "--server-side", "-f", str(tmp_path / "aws"), timeout=900)
        lab.kubectl("wait", "--for=condition=Established", "--timeout=300s", "crd", *names, timeout=400)
        done = crdscope("doctor", "--duration", "20s", "--json", "--kubeconfig", lab.kubeconfig,
                        "--context", lab.admin_context, timeout=240)
        api_versions = lab.kubectl("api-versions").stdout.split()
    finally:
        delete_crds(lab, *names)
    assert len(api_versions) >= SMALL_CLUSTER_GROUP_VERSIONS  # the slice is big enough for the finding
    report = json.loads(done.stdout)
    by_kind = {f["id"].split(":")[0]: f for f in report["findings"]}
    worst = max((RANK[f["severity"]] for f in report["findings"]), default=0)
    assert done.returncode == report["exit_code"] == worst, (done.returncode, report["exit_code"], worst)
    # Unused CRDs: none of the slice's kinds has an object, as kubectl counts the whole cluster's CRDs.
    unused = by_kind["unused-crds"]
    evidence = " ".join(unused["evidence"])
    counted = re.search(r"crds_without_objects = ([\d,]+) of health.crds = ([\d,]+)", evidence)
    assert counted, evidence
    without, total = (int(x.replace(",", "")) for x in counted.groups())
    assert total >= len(names) and without >= len(names), (without, total, len(names))
    assert f"{without:,} of {total:,} CRDs have no objects" in unused["title"]
    # kubectl: the local client's version as kubectl itself reports it, and the cluster's group-versions.
    client = json.loads(subprocess.run(["kubectl", "version", "--client", "-o", "json"], capture_output=True,
                                       text=True, check=True).stdout)["clientVersion"]["gitVersion"]
    kubectl_finding = by_kind["kubectl-discovery"]
    assert client in kubectl_finding["title"], (client, kubectl_finding["title"])
    group_versions = re.search(r"discovery.group_versions = (\d+)", " ".join(kubectl_finding["evidence"]))
    # kubectl lists the core "v1" too; crdscope counts the group-versions a discovery walk fetches.
    assert group_versions and abs(int(group_versions.group(1)) - len(api_versions)) <= 1, \
        (group_versions, len(api_versions))
    assert kubectl_finding["cause"] and kubectl_finding["remedy"] and unused["remedy"]
