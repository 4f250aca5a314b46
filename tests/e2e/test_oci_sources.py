"""Package references as sources (loader/oci.py), pulled by the real crane from a real registry.

Real packages are built by the real ``crank xpkg build`` (``crdscope package --push``) into
``crane registry serve`` on loopback (the lab's registry software), then named by reference:
``estimate`` and ``load`` must read exactly the CRDs of the files they were built from.
"""

from __future__ import annotations

import io
import json
import subprocess
import tarfile

import pytest

from crdscope.base.crossplane import becomes_mrd

from crdscope.base.paths import cache_dir
from crdscope.loader.sources import CRDDocument, open_source
from tests.conftest import SHARED_CRDS
from tests.e2e.test_crossplane_demo import LAB_NAME, MRD, demo_lab, kubectl_json  # noqa: F401 - a fixture
from tests.e2e.test_package import _port, binaries, crane, crdscope, serving_registry, subset  # noqa: F401 - a fixture
from tests.helpers import established

pytestmark = pytest.mark.shared_crds
VERSION = "v0.4.0"


@pytest.fixture(scope="module")
def pushed(binaries, tmp_path_factory):  # noqa: F811 - binaries is the fixture imported above
    """A registry holding a GCP subset as a family (``provider-gcp-*``) and as one package (``provider-mono``)."""
    if not SHARED_CRDS.is_dir():
        pytest.skip(f"{SHARED_CRDS} is absent (real Crossplane CRD sets live beside the checkout)")
    work = tmp_path_factory.mktemp("oci")
    with serving_registry(binaries, work) as address:
        crds = subset(SHARED_CRDS, work / "crds")
        for name, family in (("provider-gcp", ["--family"]), ("provider-mono", [])):
            done = crdscope("package", str(work / "crds"), "--name", name, *family, "--push", "--registry", address,
                            "--version", VERSION, "--output", str(work / name), "--json")
            assert done.returncode == 0, done.stderr
        yield address, work, crds


def names_of(spec: str) -> list[str]:
    source = open_source(spec)
    source.prepare()
    return sorted(item.name for item in source.items() if isinstance(item, CRDDocument))


def specs_of(spec: str) -> dict[str, dict]:
    source = open_source(spec)
    source.prepare()
    return {item.name: json.loads(item.spec_json) for item in source.items() if isinstance(item, CRDDocument)}


def one_line(done: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_estimate_of_a_reference_is_the_estimate_of_the_files_it_was_built_from(pushed):
    address, work, crds = pushed
    reference = f"{address}/crdscope/provider-mono:{VERSION}"
    by_reference = crdscope("estimate", reference, "--kubernetes", "1.37", "--json")
    by_file = crdscope("estimate", str(work / "crds"), "--kubernetes", "1.37", "--json")
    assert by_reference.returncode == 0, by_reference.stderr
    assert by_file.returncode == 0, by_file.stderr
    from_registry, from_files = json.loads(by_reference.stdout), json.loads(by_file.stdout)
    assert from_registry["crds"] == from_files["crds"] == len(crds)
    from_registry.pop("source", None), from_files.pop("source", None)
    # A reference also lists the packages it pulled (files have none); every figure is the same.
    [package] = from_registry.pop("packages")
    assert (package["kind"], package["name"], package["crds"]) == ("Provider", "provider-mono", len(crds))
    assert from_files.pop("packages") == []
    assert from_registry == from_files
    # The CRDs themselves, spec for spec (crank wrote them into package.yaml; crane pulled it back).
    assert specs_of(reference) == specs_of(str(work / "crds"))


def test_a_family_member_brings_its_family_package(pushed):
    address, _work, crds = pushed
    reference = f"{address}/crdscope/provider-gcp-pubsub:{VERSION}"
    expected = sorted(name for name, group in crds.items()
                      if group.startswith("pubsub.") or group in ("gcp.upbound.io", "gcp.m.upbound.io"))
    assert any(crds[name] == "gcp.upbound.io" for name in expected)  # the family package's own CRDs are in it
    assert names_of(reference) == expected
    family = f"{address}/crdscope/provider-family-gcp:{VERSION}"
    assert names_of(family) == sorted(n for n, g in crds.items() if g in ("gcp.upbound.io", "gcp.m.upbound.io"))


def test_the_second_read_pulls_nothing(pushed, binaries):  # noqa: F811
    address, _work, _crds = pushed
    reference = f"{address}/crdscope/provider-gcp-dns:{VERSION}"
    digest = crane(binaries, "digest", reference, "--insecure").strip()
    cached = cache_dir() / "packages" / digest.replace(":", "-") / "package.yaml"
    if cached.exists():  # the developer's cache is shared with tests (the lab's binaries live there)
        cached.unlink()
    first = crdscope("estimate", reference, "--kubernetes", "1.37", "--json")
    assert first.returncode == 0, first.stderr
    assert cached.is_file()
    before = cached.stat()
    again = crdscope("estimate", reference, "--kubernetes", "1.37", "--json")
    assert again.returncode == 0, again.stderr
    after = cached.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert json.loads(again.stdout)["crds"] == json.loads(first.stdout)["crds"]
    # By digest, a cached package is read without asking its registry at all: here one that is not
    # there (a closed port; its dependency, named by tag in its metadata, still comes from the live one).
    by_digest = f"127.0.0.1:{_port()}/crdscope/provider-gcp-dns@{digest}"
    assert names_of(by_digest) == names_of(reference)


def test_a_missing_tag_is_one_line_and_exit_2(pushed):
    address = pushed[0]
    reference = f"{address}/crdscope/provider-mono:v9.9.9"
    done = crdscope("estimate", reference, "--kubernetes", "1.37")
    assert done.returncode == 2
    assert one_line(done) == f"crdscope: {reference}: no such tag"


def test_an_image_that_is_not_a_package_is_one_line_and_exit_2(pushed, binaries, tmp_path):  # noqa: F811
    address = pushed[0]
    layer = tmp_path / "layer.tar"
    with tarfile.open(layer, "w") as tar:
        data = b"#!/bin/sh\necho hello\n"
        info = tarfile.TarInfo("bin/hello")
        info.size, info.mode = len(data), 0o755
        tar.addfile(info, io.BytesIO(data))
    reference = f"{address}/crdscope/not-a-package:v1"
    crane(binaries, "append", "-f", str(layer), "-t", reference, "--insecure")
    done = crdscope("estimate", reference, "--kubernetes", "1.37")
    assert done.returncode == 2
    assert one_line(done) == f"crdscope: {reference}: not a Crossplane package (no package.yaml in the image)"


def test_an_unreachable_registry_is_one_line_and_exit_2():
    reference = f"127.0.0.1:{_port()}/crdscope/provider-mono:{VERSION}"  # a closed loopback port
    done = crdscope("estimate", reference, "--kubernetes", "1.37")
    assert done.returncode == 2
    assert one_line(done) == (f"crdscope: {reference}: registry {reference.split('/')[0]} is not reachable: "
                              "connection refused")


@pytest.mark.lab
def test_load_of_a_reference_installs_its_crds_and_its_familys(pushed, lab):
    address, _work, crds = pushed
    reference = f"{address}/crdscope/provider-gcp-dns:{VERSION}"
    expected = names_of(reference)
    before = {item["metadata"]["name"] for item in lab.kubectl_json("get", "crd")["items"]}
    assert not set(expected) & before
    done = crdscope("load", reference, "--kubeconfig", lab.kubeconfig, "--context", lab.admin_context, "--json")
    try:
        assert done.returncode == 0, done.stderr
        installed = {item["metadata"]["name"]: item for item in lab.kubectl_json("get", "crd")["items"]}
        assert sorted(set(installed) - before) == expected
        for name in expected:
            assert installed[name]["spec"]["group"] == crds[name]
    finally:
        crdscope("clean", "--yes", "--kubeconfig", lab.kubeconfig, "--context", lab.admin_context)



@pytest.mark.lab
def test_the_lab_demo_names_a_reference_and_crossplane_pulls_it_with_its_family(
        pushed, demo_lab, binaries, tmp_path):  # noqa: F811
    """`crdscope lab --crossplane --provider REF`: one Provider names REF, nothing is built; Crossplane
    pulls the member from the lab's registry, installs the family package it depends on, and the
    member's kinds become CRDs once the demo's MRAP names them."""
    from crdscope.base.labrecord import lab_registry
    from crdscope.lab.controlplane import Lab
    from crdscope.loader.crossplane_install import LabClient, run_install
    from crdscope.tui.launch import crossplane_install_stages

    _address, work, crds = pushed
    registry = lab_registry(LAB_NAME)
    done = crdscope("package", str(work / "crds"), "--name", "provider-gcp", "--family", "--safe-start", "--push",
                    "--registry", registry, "--version", VERSION, "--output", str(tmp_path), "--json")
    assert done.returncode == 0, done.stderr
    reference = f"{registry}/crdscope/provider-gcp-pubsub:{VERSION}"
    said: list[str] = []
    stages = crossplane_install_stages(Lab(name=LAB_NAME), demo_lab, open_source(reference), binaries,
                                       say=said.append)
    assert not any("build" in line or "push" in line for line in said)  # nothing built or pushed
    [provider] = [o for stage in stages for o in stage.objects if o["kind"] == "Provider"]
    assert provider["spec"]["package"] == reference
    client = LabClient(demo_lab.server, demo_lab.pki_dir)
    try:
        assert run_install(stages, client, say=said.append), said[-1]
    finally:
        client.close()

    # kubectl's view: Crossplane installed the member and, by itself, the family package it depends on.
    providers = {p["spec"]["package"]: p for p in kubectl_json(demo_lab, "get", "providers")["items"]}
    assert reference in providers
    assert any(package.startswith(f"{registry}/crdscope/provider-family-gcp") for package in providers)
    family_groups = ("gcp.upbound.io", "gcp.m.upbound.io")
    member = {n for n, g in crds.items() if g.startswith("pubsub.")}
    both = member | {n for n, g in crds.items() if g in family_groups}
    # ProviderConfig kinds stay CRDs on Crossplane v2.4 (Established at install); the rest become MRDs.
    configs = {n for n in both if not becomes_mrd(n)}
    assert {m["metadata"]["name"] for m in kubectl_json(demo_lab, "get", MRD)["items"]} >= both - configs
    ready = {c["metadata"]["name"] for c in kubectl_json(demo_lab, "get", "crds")["items"] if established(c)}
    assert ready & set(crds) == member | configs
