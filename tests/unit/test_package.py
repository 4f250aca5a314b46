"""``crdscope package``: how sources split into packages, what each package root holds, error lines.

The real Crossplane CLI builds packages in tests/e2e/test_package.py; here a stand-in ``crank``
(``CRDSCOPE_CRANK``) copies each package root aside, so what crdscope hands crank is checked
without Go.  The family split is checked on the real AWS and GCP sets of ../shared/crds.
"""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import tarfile
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from crdscope.loader.package import (
    FAMILY_LABEL, SAFE_START, PackagePlan, family_package_name, package_metadata, plan_packages, provider_groups,
)
from crdscope.connection.crdwatch import MANAGED_BY_LABEL
from crdscope.base.errors import ConfigError
from crdscope.cli.main import cli
from tests.crdsets import tiny_crd

_GROUP_LINE = re.compile(rb"^  group: (\S+)\s*$", re.M)


def real_crds(shared: Path, name: str) -> dict[str, str]:
    """CRD name -> group of a shared set, from each file's ``spec.group`` line and its name (group_plural.yaml)."""
    crds = {}
    with tarfile.open(shared / f"{name}.tar.xz") as archive:
        for member in archive:
            if not member.isfile():
                continue
            handle = archive.extractfile(member)
            assert handle is not None
            found = _GROUP_LINE.search(handle.read())
            assert found, member.name
            group = found.group(1).decode()
            stem = Path(member.name).name.removesuffix(".yaml")
            assert stem.startswith(group + "_"), member.name  # upstream's file naming: <group>_<plural>
            crds[f"{stem.split('_', 1)[1]}.{group}"] = group
    return crds


# --------------------------------------------------------------------------- the family split


@pytest.mark.parametrize(("provider", "services", "largest"), [("aws", 176, ("ec2", 208)),
                                                                 ("gcp", 80, ("compute", 192))])
def test_real_provider_sets_split_like_upstream_families(shared_crds, provider, services, largest):
    crds = real_crds(shared_crds, f"provider-{provider}")
    plans = plan_packages(crds, f"provider-{provider}", family=True)
    family, members = plans[0], plans[1:]
    # The family package holds the provider's own groups, cluster-scoped and namespaced (.m.).
    assert family.name == f"provider-family-{provider}"
    assert family.groups == (f"{provider}.m.upbound.io", f"{provider}.upbound.io")
    assert sorted(c.split(".", 1)[0] for c in family.crds) == sorted(
        ["providerconfigs", "providerconfigusages", "clusterproviderconfigs", "providerconfigs", "providerconfigusages"])
    assert family.depends_on is None and family.family == family.name
    assert len(members) == services
    for member in members:
        service = member.name.removeprefix(f"provider-{provider}-")
        # Both twins of one service in one package, each member depending on the family package.
        assert set(member.groups) <= {f"{service}.{provider}.upbound.io", f"{service}.{provider}.m.upbound.io"}
        assert member.depends_on == family.name and member.family == family.name
    assert sorted(c for p in plans for c in p.crds) == sorted(crds)  # every CRD exactly once
    name, count = largest
    assert len(next(p for p in members if p.name == f"provider-{provider}-{name}").crds) == count


def test_groups_without_a_provider_group_split_by_first_label():
    crds = {"a.compute.example.dev": "compute.example.dev", "a.compute.m.example.dev": "compute.m.example.dev",
            "b.net.example.dev": "net.example.dev"}
    assert provider_groups(crds.values()) == set()
    plans = plan_packages(crds, "thing", family=True)
    assert [(p.name, len(p.crds)) for p in plans] == [("thing-family", 0), ("thing-compute", 2), ("thing-net", 1)]


def test_a_service_named_like_the_family_package_is_refused():
    with pytest.raises(ConfigError, match="like the family's"):
        plan_packages({"a.family.example.dev": "family.example.dev"}, "thing", family=True)


def test_monolith_holds_everything_and_depends_on_nothing():
    crds = {"b.s3.aws.upbound.io": "s3.aws.upbound.io", "a.aws.upbound.io": "aws.upbound.io"}
    [plan] = plan_packages(crds, "provider-aws")
    assert plan == PackagePlan("provider-aws", ("a.aws.upbound.io", "b.s3.aws.upbound.io"),
                               ("aws.upbound.io", "s3.aws.upbound.io"))


def test_family_package_names():
    assert family_package_name("provider-gcp") == "provider-family-gcp"
    assert family_package_name("lab-aws") == "lab-aws-family"


# --------------------------------------------------------------------------- crossplane.yaml


def test_member_metadata_declares_safe_start_its_family_and_its_dependency():
    plan = PackagePlan("provider-aws-s3", ("buckets.s3.aws.upbound.io",), ("s3.aws.upbound.io",),
                       family="provider-family-aws", depends_on="provider-family-aws")
    meta = package_metadata(plan, safe_start=True, version="v1.2.3", registry="127.0.0.1:5000")
    assert meta == {
        "apiVersion": "meta.pkg.crossplane.io/v1", "kind": "Provider",
        "metadata": {"name": "provider-aws-s3", "labels": {FAMILY_LABEL: "provider-family-aws"}},
        "spec": {"capabilities": ["safe-start"],
                 "dependsOn": [{"apiVersion": "pkg.crossplane.io/v1", "kind": "Provider",
                                "package": "127.0.0.1:5000/crdscope/provider-family-aws", "version": "v1.2.3"}]}}
    assert SAFE_START == "safe-start"  # pkgmetav1.ProviderCapabilitySafeStart in Crossplane v2.0.0


def test_monolith_metadata_without_safe_start_is_a_bare_provider():
    meta = package_metadata(PackagePlan("p", ("a.x.io",), ("x.io",)), safe_start=False, version="v0.1.0",
                            registry=None)
    assert meta == {"apiVersion": "meta.pkg.crossplane.io/v1", "kind": "Provider", "metadata": {"name": "p"},
                    "spec": {}}


# --------------------------------------------------------------------------- the command, with a stand-in crank


@pytest.fixture
def fake_crank(tmp_path, monkeypatch) -> Path:
    """A crank that copies each package root to ``roots/`` and writes an empty package file."""
    roots = tmp_path / "roots"
    roots.mkdir()
    script = tmp_path / "crank"
    script.write_text(f"""#!/bin/sh
set -e
root=""; file=""
for arg in "$@"; do
  case "$arg" in
    --package-root=*) root="${{arg#--package-root=}}";;
    --package-file=*) file="${{arg#--package-file=}}";;
  esac
done
cp -r "$root" "{roots}/"
: > "$file"
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("CRDSCOPE_CRANK", str(script))
    return roots


def write_source(path: Path) -> Path:
    documents = [tiny_crd("aws.example.dev", "ProviderConfig"), tiny_crd("s3.aws.example.dev", "Bucket"),
                 tiny_crd("s3.aws.m.example.dev", "Bucket", scope="Namespaced", labels={MANAGED_BY_LABEL: "crdscope"}),
                 tiny_crd("ec2.aws.example.dev", "Instance"),
                 {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "not-a-crd"}}]
    path.write_text(yaml.safe_dump_all(documents))
    return path


def run(*args: str):
    return CliRunner().invoke(cli, ["package", *args])


def test_family_roots_hold_their_crds_and_metadata(fake_crank, tmp_path):
    source = write_source(tmp_path / "source.yaml")
    result = run(str(source), "--name", "provider-aws", "--family", "--safe-start", "--registry", "127.0.0.1:5999",
                 "--version", "v0.2.0", "--output", str(tmp_path / "out"), "--json")
    assert result.exit_code == 0, result.output
    built = json.loads(result.stdout)
    assert built["crds"] == 4 and built["not_crds"] == 1 and built["registry"] == "127.0.0.1:5999"
    assert built["pushed"] is False
    assert [(p["name"], p["crds"], p["groups"]) for p in built["packages"]] == [
        ("provider-family-aws", 1, ["aws.example.dev"]),
        ("provider-aws-ec2", 1, ["ec2.aws.example.dev"]),
        ("provider-aws-s3", 2, ["s3.aws.example.dev", "s3.aws.m.example.dev"])]
    for entry in built["packages"]:
        assert entry["safe_start"] is True and entry["reference"] is None
        assert entry["file"] == str(tmp_path / "out" / f"{entry['name']}-v0.2.0.xpkg") and Path(entry["file"]).exists()
        root = fake_crank / entry["name"]
        meta = yaml.safe_load((root / "crossplane.yaml").read_text())
        assert meta["spec"]["capabilities"] == ["safe-start"]
        assert meta["metadata"]["labels"] == {FAMILY_LABEL: "provider-family-aws"}
        crds = [yaml.safe_load(p.read_text()) for p in sorted((root / "crds").iterdir())]
        assert sorted(c["spec"]["group"] for c in crds) == entry["groups"]
        for crd in crds:  # what the source said, less crdscope's own label (Crossplane owns these CRDs)
            assert crd["apiVersion"] == "apiextensions.k8s.io/v1" and crd["kind"] == "CustomResourceDefinition"
            assert MANAGED_BY_LABEL not in crd["metadata"].get("labels", {})
            assert crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["type"] == "object"
    member = built["packages"][2]
    assert member["depends_on"] == "127.0.0.1:5999/crdscope/provider-family-aws:v0.2.0"
    assert "dependsOn" not in yaml.safe_load((fake_crank / "provider-family-aws" / "crossplane.yaml").read_text())["spec"]
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")]  # staging is gone


def test_human_summary_lists_each_package(fake_crank, tmp_path):
    source = write_source(tmp_path / "source.yaml")
    result = run(str(source), "--name", "provider-aws", "--output", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == "built 1 package of 4 CRDs from " + str(source) + ", version v0.1.0"
    assert "provider-aws" in result.stdout and "1 documents that are not CRDs ignored" in result.stdout


# --------------------------------------------------------------------------- error lines


def one_error_line(result, code: int) -> str:
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("crdscope:")]
    assert len(errors) == 1 and result.stderr.splitlines()[-1] == errors[0], result.stderr
    return errors[0]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_missing_source(tmp_path):
    line = one_error_line(run(str(tmp_path / "nothing"), "--name", "p"), 2)
    assert "no such file or directory" in line


def test_source_without_crds(fake_crank, tmp_path):
    source = tmp_path / "cm.yaml"
    source.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    line = one_error_line(run(str(source), "--name", "p", "--output", str(tmp_path / "out")), 2)
    assert line == f"crdscope: {source}: no CustomResourceDefinitions in it"


def test_broken_yaml_names_file_and_line(fake_crank, tmp_path):
    directory = tmp_path / "crds"
    directory.mkdir()
    (directory / "good.yaml").write_text(yaml.safe_dump(tiny_crd("x.example.dev", "Thing")))
    (directory / "bad.yaml").write_text("apiVersion: [unclosed\n")
    line = one_error_line(run(str(directory), "--name", "p", "--output", str(tmp_path / "out")), 2)
    assert "bad.yaml:" in line and "YAML error" in line


@pytest.mark.parametrize(("flags", "words"), [
    (["--name", "Provider_AWS"], "a package name is lowercase"),
    (["--name", "p", "--version", "latest"], "semantic version"),
    (["--name", "p", "--registry", "http://127.0.0.1:5000"], "HOST:PORT"),
])
def test_bad_flags(tmp_path, flags, words):
    source = write_source(tmp_path / "source.yaml")
    assert words in one_error_line(run(str(source), *flags), 2)


def test_unreachable_registry_fails_before_reading(tmp_path):
    port = free_port()
    source = write_source(tmp_path / "source.yaml")
    line = one_error_line(run(str(source), "--name", "p", "--push", "--registry", f"127.0.0.1:{port}"), 3)
    assert line == f"crdscope: registry 127.0.0.1:{port} is not reachable: connection refused"


def test_push_without_a_lab_registry_says_how(tmp_path):
    source = write_source(tmp_path / "source.yaml")
    result = run(str(source), "--name", "p", "--push")
    assert "--registry HOST:PORT" in one_error_line(result, 3)  # README: no lab registry to push to


def test_crank_failing_is_its_last_words(tmp_path, monkeypatch):
    script = tmp_path / "crank"
    script.write_text("#!/bin/sh\necho 'some progress' >&2\n"
                      "echo 'crossplane: error: failed to build package: bad things' >&2\nexit 1\n")
    script.chmod(0o755)
    monkeypatch.setenv("CRDSCOPE_CRANK", str(script))
    source = write_source(tmp_path / "source.yaml")
    line = one_error_line(run(str(source), "--name", "p", "--output", str(tmp_path / "out")), 1)
    assert line == "crdscope: crank xpkg build p: failed to build package: bad things"


def test_crank_override_must_be_executable(tmp_path, monkeypatch):
    monkeypatch.setenv("CRDSCOPE_CRANK", str(tmp_path / "absent"))
    source = write_source(tmp_path / "source.yaml")
    assert "not an executable file" in one_error_line(run(str(source), "--name", "p", "--output",
                                                          str(tmp_path / "out")), 2)
    assert os.environ["CRDSCOPE_CRANK"].endswith("absent")
