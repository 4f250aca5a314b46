"""The demo's provider install (loader/crossplane_install.py): which objects, in which order, waiting on what.

The cluster side runs for real in tests/e2e/test_crossplane_demo.py; here the plan, the cache's
bookkeeping and the stage loop (against a scripted stand-in for the lab) are checked without one.
"""

from __future__ import annotations

import fnmatch
import os
import threading

from crdscope.loader.crossplane_install import (
    IMAGE_CONFIG, MRAP_NAME, PACKAGE_HOST, Stage, cache_key, package_name_of, plan_install, read_manifest,
    run_install, _write_manifest,
)
from crdscope.loader.package import BuiltPackage, PackagePlan, plan_packages
from crdscope.loader.sources import open_source
from crdscope.loader.synthetic import synthetic_documents

REGISTRY = "127.0.0.1:5123"
CRDS = {
    "providerconfigs.gcp.upbound.io": "gcp.upbound.io",
    "topics.pubsub.gcp.upbound.io": "pubsub.gcp.upbound.io",
    "subscriptions.pubsub.gcp.upbound.io": "pubsub.gcp.upbound.io",
    "topics.pubsub.gcp.m.upbound.io": "pubsub.gcp.m.upbound.io",
    "buckets.storage.gcp.upbound.io": "storage.gcp.upbound.io",
}


def family() -> list[PackagePlan]:
    return plan_packages(CRDS, "provider-gcp", family=True)


def test_the_family_package_goes_first_then_members_then_an_mrap_of_the_largest_member():
    stages = plan_install(family(), REGISTRY)
    kinds = [[o["kind"] for o in stage.objects] for stage in stages]
    assert kinds == [["ImageConfig"], ["Provider"], ["Provider", "Provider"], ["ManagedResourceActivationPolicy"]]
    assert [s.wait for s in stages] == ["", "installed", "mrds", "established"]
    assert stages[1].objects[0]["metadata"]["name"] == "provider-family-gcp"
    assert stages[1].names == ("provider-family-gcp",)
    assert [o["metadata"]["name"] for o in stages[2].objects] == ["provider-gcp-pubsub", "provider-gcp-storage"]
    # Every CRD of every package becomes an MRD (safe-start: none becomes a CRD by itself), except the
    # ProviderConfig kinds, which Crossplane v2.4 installs as CRDs at once: the stage does not wait for them.
    assert set(stages[2].names) == set(CRDS) - {"providerconfigs.gcp.upbound.io"}
    mrap = stages[3].objects[0]
    assert mrap["metadata"]["name"] == MRAP_NAME
    # pubsub is the largest member: its patterns match exactly its CRDs, no other package's.
    pubsub = {n for n, g in CRDS.items() if g.startswith("pubsub.")}
    matched = {n for n in CRDS if any(fnmatch.fnmatch(n, p) for p in mrap["spec"]["activate"])}
    assert matched == pubsub == set(stages[3].names)


def test_packages_name_a_host_the_image_config_rewrites_to_the_lab_registry():
    stages = plan_install(family(), REGISTRY)
    image_config = stages[0].objects[0]
    assert image_config["metadata"]["name"] == IMAGE_CONFIG
    assert image_config["spec"]["matchImages"] == [{"type": "Prefix", "prefix": f"{PACKAGE_HOST}/"}]
    assert image_config["spec"]["rewriteImage"] == {"prefix": f"{REGISTRY}/"}
    providers = [o for s in stages for o in s.objects if o["kind"] == "Provider"]
    assert all(p["spec"]["package"] == f"{PACKAGE_HOST}/crdscope/{p['metadata']['name']}:v0.1.0" for p in providers)
    # Pulled on every read: Crossplane v2.4 keeps a pull cut short as a complete cache entry, and a
    # cached prefix installs a revision short of its MRDs (loader.crossplane_install.provider).
    assert all(p["spec"]["packagePullPolicy"] == "Always" for p in providers)


def test_a_single_package_waits_for_its_mrds_itself():
    [only] = plan_packages(CRDS, "provider-gcp")
    stages = plan_install([only], REGISTRY)
    assert [s.wait for s in stages] == ["", "mrds", "established"]
    assert set(stages[1].names) == set(CRDS) - {"providerconfigs.gcp.upbound.io"}
    # Its MRAP activates every group of it: the CRDs it waits for are the MRDs' (the ProviderConfig is
    # a CRD from the start on Crossplane v2.4).
    assert set(stages[2].names) == set(stages[1].names)


def test_package_names_come_from_the_source_file():
    assert package_name_of("/x/provider-gcp.tar.xz") == "provider-gcp"
    assert package_name_of("subset.yaml") == "subset"
    assert package_name_of("/x/42_CRDs/") == "provider-42-crds"


def test_a_synthetic_source_is_named_as_a_provider_and_its_family_as_upstream_names_one():
    assert package_name_of("synthetic:40") == package_name_of("synthetic") == "provider-synthetic"
    crds = {d["metadata"]["name"]: d["spec"]["group"] for d in synthetic_documents(60)}
    plans = plan_packages(crds, package_name_of("synthetic:60"), family=True)
    assert plans[0].name == "provider-family-synthetic"
    # One member per service: a cluster-scoped group and its .m. twin together.
    services = {group.split(".")[0] for group in crds.values()}
    assert {p.name for p in plans[1:]} == {f"provider-synthetic-{s}" for s in services}
    assert all(len({g.replace(".m.", ".") for g in p.groups}) == 1 for p in plans[1:])


def test_the_cache_key_follows_the_file_and_crossplane(tmp_path):
    path = tmp_path / "provider-gcp.yaml"
    path.write_bytes(b"one")
    source = open_source(str(path))
    first = cache_key(source, "v2.0.0", "provider-gcp")
    assert first is not None
    assert cache_key(open_source(str(path)), "v2.0.0", "provider-gcp") == first
    assert cache_key(source, "v2.0.1", "provider-gcp") != first
    os.utime(path, ns=(1, 1))
    assert cache_key(source, "v2.0.0", "provider-gcp") != first


def test_a_synthetic_source_has_a_cache_key_of_its_count_seed_and_schema_size(tmp_path):
    def key(spec: str, **options) -> str | None:
        return cache_key(open_source(spec, **options), "v2.0.0", "provider-synthetic")

    first = key("synthetic:800")
    assert first is not None and key("synthetic:800") == first  # a second demo finds the first's build
    others = {key("synthetic:801"), key("synthetic:800", seed=2), key("synthetic:800", schema_props=41)}
    assert first not in others and len(others) == 3
    assert cache_key(open_source(str(tmp_path)), "v2.0.0", "provider-x") is None  # a folder: built each time


def test_a_cached_build_reads_back_and_an_incomplete_one_does_not(tmp_path):
    packages = [BuiltPackage(plan, tmp_path / f"{plan.name}.xpkg", {"spec": {"capabilities": ["safe-start"]}})
                for plan in family()]
    for package in packages:
        package.file.write_bytes(b"xpkg")
    _write_manifest(tmp_path, packages)
    read = read_manifest(tmp_path)
    assert read is not None and [p.plan for p in read] == [p.plan for p in packages]
    assert all(p.safe_start for p in read)
    packages[-1].file.unlink()
    assert read_manifest(tmp_path) is None


class ScriptedLab:
    """Answers like a lab whose Crossplane installs whatever was applied, one poll later."""

    def __init__(self) -> None:
        self.applied: list[tuple[str, str]] = []
        self.polls = 0
        self.crds: set[str] = set()

    def apply(self, obj):
        self.applied.append((obj["kind"], obj["metadata"]["name"]))
        if obj["kind"] == "ManagedResourceActivationPolicy":
            self.crds = {n for n in CRDS if any(fnmatch.fnmatch(n, p) for p in obj["spec"]["activate"])}

    def installed(self):
        self.polls += 1
        return {name for kind, name in self.applied if kind == "Provider"} if self.polls > 1 else set()

    def mrds(self):
        self.polls += 1
        return {name: name in self.crds for name in CRDS}


def test_each_stage_is_applied_only_once_the_one_before_is_done():
    lab, said = ScriptedLab(), []
    assert run_install(plan_install(family(), REGISTRY), lab, say=said.append, poll=0) is True
    assert lab.applied == [("ImageConfig", IMAGE_CONFIG), ("Provider", "provider-family-gcp"),
                           ("Provider", "provider-gcp-pubsub"), ("Provider", "provider-gcp-storage"),
                           ("ManagedResourceActivationPolicy", MRAP_NAME)]
    assert said[0].startswith("1/4 ImageConfig") and any("3/3 CRDs Established" in line for line in said)


def test_a_stage_that_never_finishes_times_out_and_a_set_stop_applies_nothing():
    lab, said = ScriptedLab(), []
    never = Stage("waits for a Provider nobody applies", (), "installed", ("absent",), timeout=0.0)
    assert run_install([never], lab, say=said.append, poll=0) is False
    assert "not done" in said[-1] and "0/1 Installed" in said[-1]
    stop = threading.Event()
    stop.set()
    stopped = ScriptedLab()
    assert run_install(plan_install(family(), REGISTRY), stopped, say=said.append, stop=stop) is False
    assert stopped.applied == []
