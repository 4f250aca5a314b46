"""``crdscope package`` with the real Crossplane CLI (``crank``) and a real OCI registry (``crane``).

A family of a few dozen real GCP CRDs is built, pushed to ``crane registry serve`` and read back
from the registry (``crane catalog``, ``crane ls``, ``crane export`` of the pushed image's
``package.yaml``); a monolith of an archive is read back by crdscope's own loader and estimator.
The binaries are the lab's Crossplane build (``crdscope.toolchain.crossplane.crossplane_binaries``).
"""

from __future__ import annotations

import io
import json
import shutil
import socket
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from crdscope.loader.sources import CRDDocument, open_source
from tests.helpers import wait_for

#: The provider's own groups and two services of the GCP set: 33 CRDs, three packages.
GROUPS = ("gcp.upbound.io", "gcp.m.upbound.io", "pubsub.gcp.upbound.io", "pubsub.gcp.m.upbound.io",
          "dns.gcp.upbound.io", "dns.gcp.m.upbound.io")
VERSION = "v0.3.0"


def crdscope(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "crdscope.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def binaries():
    """crank, crane (and the core), built from Go modules once and cached."""
    from crdscope.toolchain.crossplane import cached_binaries, crossplane_binaries

    if cached_binaries() is None and not shutil.which("go"):
        pytest.skip("Go is needed to build the Crossplane CLI")
    return crossplane_binaries()


def _port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _answers(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return True
    except OSError:
        return False


@contextmanager
def serving_registry(binaries, directory: Path) -> Iterator[str]:
    """A real OCI registry on loopback (``crane registry serve``, blobs under ``directory``): its address."""
    address = f"127.0.0.1:{_port()}"
    (directory / "blobs").mkdir()  # crane writes uploads there and does not create it
    log = (directory / "registry.log").open("wb")
    process = subprocess.Popen([str(binaries.crane), "registry", "serve", "--address", address,
                                "--disk", str(directory / "blobs")], stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: process.poll() is not None or _answers(address), timeout=30, message="the registry")
        assert process.poll() is None, (directory / "registry.log").read_text()
        yield address
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


@pytest.fixture
def registry(binaries, tmp_path):
    """A registry for one test; stopped afterwards."""
    with serving_registry(binaries, tmp_path) as address:
        yield address


def crane(binaries, *args: str) -> str:
    done = subprocess.run([str(binaries.crane), *args], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode("utf-8", "replace") if args[0] != "export" else done.stdout  # type: ignore[return-value]


def subset(shared: Path, target: Path) -> dict[str, str]:
    """The CRD files of GROUPS (named ``<group>_<plural>.yaml`` upstream) unpacked; CRD name -> group."""
    target.mkdir()
    crds = {}
    with tarfile.open(shared / "provider-gcp.tar.xz") as archive:
        for member in archive:
            group, _, rest = Path(member.name).name.partition("_")
            if member.isfile() and group in GROUPS:
                handle = archive.extractfile(member)
                assert handle is not None
                (target / Path(member.name).name).write_bytes(handle.read())
                crds[f"{rest.removesuffix('.yaml')}.{group}"] = group
    assert 25 <= len(crds) <= 60, len(crds)
    return crds


def pushed_package_yaml(binaries, reference: str) -> list[dict]:
    """``package.yaml`` of a pushed image, read from the registry (``crane export``: its flattened files)."""
    flat = crane(binaries, "export", reference, "-")
    with tarfile.open(fileobj=io.BytesIO(flat)) as files:  # type: ignore[arg-type]
        member = next(m for m in files if m.name.lstrip("./") == "package.yaml")
        handle = files.extractfile(member)
        assert handle is not None
        return [d for d in yaml.safe_load_all(handle) if d]


def test_family_is_built_pushed_and_readable_from_the_registry(binaries, registry, shared_crds, tmp_path):
    crds = subset(shared_crds, tmp_path / "crds")
    done = crdscope("package", str(tmp_path / "crds"), "--name", "provider-gcp", "--family", "--safe-start",
                    "--push", "--registry", registry, "--version", VERSION, "--output", str(tmp_path / "out"), "--json")
    assert done.returncode == 0, done.stderr
    built = json.loads(done.stdout)
    names = [p["name"] for p in built["packages"]]
    assert names == ["provider-family-gcp", "provider-gcp-dns", "provider-gcp-pubsub"]
    assert built["crds"] == len(crds) and built["pushed"] is True and built["registry"] == registry
    for entry in built["packages"]:
        assert entry["reference"] == f"{registry}/crdscope/{entry['name']}:{VERSION}" and entry["safe_start"]

    # What the registry holds: one repository per package, tagged with the version.
    assert set(crane(binaries, "catalog", registry).split()) == {f"crdscope/{n}" for n in names}
    for name in names:
        assert crane(binaries, "ls", f"{registry}/crdscope/{name}").split() == [VERSION]

    # What each pushed image holds: its metadata and exactly its groups' CRDs.
    for entry in built["packages"]:
        documents = pushed_package_yaml(binaries, entry["reference"])
        [meta] = [d for d in documents if d["apiVersion"] == "meta.pkg.crossplane.io/v1"]
        assert meta["kind"] == "Provider" and meta["metadata"]["name"] == entry["name"]
        assert meta["spec"]["capabilities"] == ["safe-start"]
        assert meta["metadata"]["labels"]["pkg.crossplane.io/provider-family"] == "provider-family-gcp"
        pushed = sorted(d["metadata"]["name"] for d in documents if d["kind"] == "CustomResourceDefinition")
        assert pushed == sorted(n for n, g in crds.items() if g in entry["groups"])
        assert len(pushed) == entry["crds"]
        if entry["name"] == "provider-family-gcp":
            assert entry["groups"] == ["gcp.m.upbound.io", "gcp.upbound.io"] and "dependsOn" not in meta["spec"]
        else:
            service = entry["name"].removeprefix("provider-gcp-")
            assert entry["groups"] == [f"{service}.gcp.m.upbound.io", f"{service}.gcp.upbound.io"]
            assert meta["spec"]["dependsOn"] == [{"apiVersion": "pkg.crossplane.io/v1", "kind": "Provider",
                                                  "package": f"{registry}/crdscope/provider-family-gcp",
                                                  "version": VERSION}]

    # The local files are the same packages, readable as a crdscope source.
    source = open_source(built["packages"][2]["file"])
    source.prepare()
    local = sorted(i.name for i in source.items() if isinstance(i, CRDDocument))
    assert local == sorted(n for n, g in crds.items() if g.startswith("pubsub."))


def test_monolith_of_an_archive_loads_back(binaries, shared_crds, tmp_path):
    done = crdscope("package", str(shared_crds / "crossplane-core.tar.xz"), "--name", "crossplane-core",
                    "--output", str(tmp_path), "--json")
    assert done.returncode == 0, done.stderr
    [entry] = json.loads(done.stdout)["packages"]
    assert entry["crds"] == 21 and entry["reference"] is None and entry["depends_on"] is None
    assert not entry["safe_start"]
    estimated = crdscope("estimate", entry["file"], "--kubernetes", "1.37", "--json")
    assert estimated.returncode == 0, estimated.stderr
    assert json.loads(estimated.stdout)["crds"] == 21


def test_push_to_a_registry_that_went_away_is_one_line(binaries, shared_crds, tmp_path):
    address = f"127.0.0.1:{_port()}"
    done = crdscope("package", str(shared_crds / "crossplane-core.tar.xz"), "--name", "core", "--push",
                    "--registry", address, "--output", str(tmp_path))
    assert done.returncode == 3
    assert done.stderr.strip().splitlines() == [f"crdscope: registry {address} is not reachable: connection refused"]
