"""``crdscope estimate`` and the cost model against the real lab and the real Crossplane CLI.

Discovery sizes and request counts are predicted from names alone: here they are compared with
what a fresh kube-apiserver serves after the same CRDs are installed.  Crossplane packages are
built by the real ``crossplane xpkg build`` (``crank``, built from the Go module proxy once and
cached under ``~/.cache/crdscope/crossplane/``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from crdscope.costmodel.measure import snapshot
from crdscope.costmodel.model import estimate
from crdscope.costmodel.source import read_source
from crdscope.lab.controlplane import admin_tls
from crdscope.loader.sources import CRDDocument, open_source
from crdscope.loader.synthetic import synthetic_documents
from tests.helpers import wait_for



def crdscope(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "crdscope.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_estimate_needs_no_cluster():
    # KUBECONFIG points nowhere in tests: an estimate for an empty cluster must not need one.
    done = crdscope("estimate", "synthetic:40", "--kubernetes", "1.37", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["crds"] == 40
    assert data["kubernetes_minor_model"] == "1.37"
    assert data["memory"]["rss_added_mib"]["low"] < data["memory"]["rss_added_mib"]["value"]
    assert data["discovery"]["legacy_requests_after"] > data["discovery"]["legacy_requests_added"] > 0


def test_bad_input_is_one_line():
    done = crdscope("estimate", "/nonexistent/crds.yaml", "--kubernetes", "1.37")
    assert done.returncode != 0
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    done = crdscope("estimate", "synthetic:5", "--kubernetes", "latest")
    assert done.returncode != 0 and "1.37" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.lab
def test_discovery_and_openapi_predictions_match_a_fresh_lab(fresh_lab):
    state = fresh_lab.state
    tls = admin_tls(state.pki_dir)
    before = snapshot(state.server, tls, lambda: None)
    spec = "synthetic:24"
    done = crdscope("load", spec, "--schema-props", "8", "--seed", "7", "--kubeconfig", fresh_lab.kubeconfig,
                    "--context", fresh_lab.admin_context, "--json")
    assert done.returncode == 0, done.stderr
    import asyncio

    read = asyncio.run(read_source(spec, schema_props=8, seed=7))
    predicted = estimate(read.crds, "1.37")
    # Discovery and the OpenAPI index follow Established asynchronously: wait for the last path.
    expected_paths = before["openapi_v3_paths"] + predicted.openapi_v3_paths_added
    after = wait_for(lambda: (s := snapshot(state.server, tls, lambda: None))["openapi_v3_paths"] >= expected_paths
                     and s["legacy_requests"] >= predicted.legacy_requests_after and s,
                     timeout=120, interval=1.0, message="discovery and OpenAPI to show the new CRDs")
    assert after["legacy_requests"] == before["legacy_requests"] + predicted.legacy_requests_added
    assert after["openapi_v3_paths"] == expected_paths
    measured = after["aggregated_bytes"] - before["aggregated_bytes"]
    assert abs(predicted.aggregated_bytes_added - measured) <= 0.01 * measured


@pytest.mark.lab
def test_estimate_against_a_context_counts_only_what_is_new(lab):
    spec = "synthetic:6"
    done = crdscope("load", spec, "--seed", "11", "--kubeconfig", lab.kubeconfig, "--context", lab.admin_context,
                    "--json")
    assert done.returncode == 0, done.stderr
    try:
        again = crdscope("estimate", spec, "--seed", "11", "--kubeconfig", lab.kubeconfig, "--context",
                         lab.admin_context, "--json")
        assert again.returncode == 0, again.stderr
        data = json.loads(again.stdout)
        assert data["discovery"]["group_versions_added"] == 0
        assert data["openapi"]["v3_paths_added"] == 0
        assert data["kubernetes_minor_requested"] == lab.state.kubernetes_version.lstrip("v").rsplit(".", 1)[0]
        assert data["memory"]["rss_before_mib"] > 0  # read from the lab's /metrics
    finally:
        crdscope("clean", "--yes", "--kubeconfig", lab.kubeconfig, "--context", lab.admin_context)


def test_measure_against_a_context_replays_its_crds_first(lab):
    """--measure --context: a fresh lab of the context's version gets the context's CRDs, then SOURCE."""
    installed, added = ("synthetic:8", "21"), ("synthetic:5", "22")
    names = {seed: {d["metadata"]["name"] for d in synthetic_documents(int(spec.split(":")[1]), seed=int(seed))}
             for spec, seed in (installed, added)}
    assert not names["21"] & names["22"]  # SOURCE adds CRDs the context does not have
    done = crdscope("load", installed[0], "--seed", installed[1], "--kubeconfig", lab.kubeconfig,
                    "--context", lab.admin_context, "--json")
    assert done.returncode == 0, done.stderr
    try:
        on_lab = len(lab.kubectl_json("get", "crd")["items"])
        measured = crdscope("estimate", added[0], "--seed", added[1], "--kubeconfig", lab.kubeconfig,
                            "--context", lab.admin_context, "--measure", "--json", timeout=900)
        assert measured.returncode == 0, measured.stderr
        data = json.loads(measured.stdout)
        assert data["replayed_crds"] == on_lab >= 8
        assert data["kubernetes"] == lab.state.kubernetes_version
        rows = {row["figure"]: row for row in data["comparison"]}
        # The walk after the install counts the replayed group-versions too, and the new v3 paths only
        # SOURCE's new ones: predicted from the context, measured on the lab holding its copies.
        for figure in ("legacy walk requests", "OpenAPI v3 paths added"):
            assert rows[figure]["measured"] == rows[figure]["predicted"], rows[figure]
        assert rows["memory added (RSS)"]["measured"] is not None
        # Memory held: the real server collected its garbage when asked (its profile endpoint, as admin).
        for point in (data["before"], data["after"]):
            assert 0 < point["live_heap_bytes"] < point["rss_bytes"], point
        assert rows["memory held (heap after GC)"]["measured"] is not None
    finally:
        crdscope("clean", "--yes", "--kubeconfig", lab.kubeconfig, "--context", lab.admin_context)


# --------------------------------------------------------------------------- Crossplane packages


@pytest.fixture(scope="session")
def crossplane_cli() -> Path:
    """The real Crossplane CLI (``crank``), built from Go modules with the lab's Crossplane and cached."""
    from crdscope.toolchain.crossplane import crossplane_binaries

    if not shutil.which("go") and not _cached_crank():
        pytest.skip("Go is needed to build the Crossplane CLI")
    return crossplane_binaries(progress=lambda line: print(line, file=sys.stderr)).crank


def _cached_crank() -> bool:
    from crdscope.toolchain.crossplane import cached_binaries

    return cached_binaries() is not None


def build_package(crossplane: Path, root: Path, documents: list[dict]) -> Path:
    """A provider package of ``documents`` (CRDs), written by ``crossplane xpkg build``."""
    package = root / "package"
    (package / "crds").mkdir(parents=True)
    (package / "crossplane.yaml").write_text(yaml.safe_dump({
        "apiVersion": "meta.pkg.crossplane.io/v1", "kind": "Provider",
        "metadata": {"name": "provider-crdscope-test"},
        "spec": {"controller": {"image": "example.invalid/provider-crdscope-test:v0.0.1"}}}))
    for document in documents:
        (package / "crds" / f"{document['metadata']['name']}.yaml").write_text(yaml.safe_dump(document))
    output = root / "provider-crdscope-test.xpkg"
    done = subprocess.run([str(crossplane), "xpkg", "build", f"--package-root={package}",
                           f"--package-file={output}"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr or done.stdout
    return output


def test_a_package_built_by_crossplane_loads_and_estimates(crossplane_cli, tmp_path):
    documents = list(synthetic_documents(5, seed=3, schema_props=6))
    package = build_package(crossplane_cli, tmp_path, documents)
    source = open_source(str(package))
    source.prepare()
    names = sorted(item.name for item in source.items() if isinstance(item, CRDDocument))
    assert names == sorted(d["metadata"]["name"] for d in documents)
    done = crdscope("estimate", str(package), "--kubernetes", "1.37", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["crds"] == 5


@pytest.mark.lab
def test_a_package_loads_into_the_lab(crossplane_cli, tmp_path, fresh_lab):
    documents = list(synthetic_documents(3, seed=5, schema_props=4))
    package = build_package(crossplane_cli, tmp_path, documents)
    done = crdscope("load", str(package), "--kubeconfig", fresh_lab.kubeconfig, "--context", fresh_lab.admin_context,
                    "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["established"] == 3
    listed = fresh_lab.kubectl_json("get", "crd")
    assert sorted(i["metadata"]["name"] for i in listed["items"]) == sorted(d["metadata"]["name"] for d in documents)


def test_a_file_that_is_not_a_package_is_one_problem(tmp_path):
    bogus = tmp_path / "nothing.xpkg"
    bogus.write_bytes(b"not a tarball at all")
    source = open_source(str(bogus))
    source.prepare()
    items = list(source.items())
    assert len(items) == 1 and "Crossplane package" in items[0].reason
