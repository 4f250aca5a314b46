"""Package references (loader/oci.py): what is one, how crane's answers are read, dependencies, the cache.

crane itself is replaced by a scripted registry here (its argv checked, its stderr the real crane's
words); tests/e2e/test_oci_sources.py pulls from a real registry with the real crane.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest
import yaml

from crdscope.base.errors import ConfigError
from crdscope.loader.crossplane_install import IMAGE_CONFIG, PACKAGE_HOST, plan_reference_install
from crdscope.loader.documents import CRDDocument
from crdscope.loader.oci import (
    Crane, OciSource, Puller, Reference, cached_file, crane_error, highest_satisfying, parse_reference,
)
from crdscope.loader.sources import DirectorySource, open_source

DIGESTS = {name: "sha256:" + format(number, "x") * 64 for number, name in enumerate("abcdef", start=10)}


# --------------------------------------------------------------------------- what is a reference


@pytest.mark.parametrize("spec, expected", [
    ("xpkg.upbound.io/upbound/provider-family-aws:v2.1.0",
     Reference("xpkg.upbound.io", "upbound/provider-family-aws", "v2.1.0")),
    ("127.0.0.1:5000/crdscope/provider-x@" + "sha256:" + "0" * 64,
     Reference("127.0.0.1:5000", "crdscope/provider-x", None, "sha256:" + "0" * 64)),
    ("localhost/p:v1", Reference("localhost", "p", "v1")),
    ("registry:5000/team/p:v1@sha256:" + "1" * 64, Reference("registry:5000", "team/p", "v1", "sha256:" + "1" * 64)),
])
def test_a_registry_host_a_repository_and_a_tag_or_digest_make_a_reference(spec, expected, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert parse_reference(spec) == expected
    assert str(expected) == spec


@pytest.mark.parametrize("spec", [
    "crds/provider.yaml",                      # no host: the first element has no dot or colon
    "../shared/crds/provider-gcp.tar.xz",      # ".." is a path
    "./a.b/c:v1",
    "xpkg.upbound.io/upbound/provider-aws",    # no tag, no digest: latest is never assumed
    "synthetic:40",
    "https://xpkg.upbound.io/upbound/p:v1",     # a URL, not a reference
    "xpkg.upbound.io/Upbound/p:v1",            # repositories are lowercase
])
def test_paths_and_incomplete_references_are_not_references(spec, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert parse_reference(spec) is None


def test_a_file_that_exists_is_read_as_a_file_even_when_it_looks_like_a_reference(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "crds.example.com").mkdir()
    (tmp_path / "crds.example.com" / "set:v1").mkdir()
    assert parse_reference("crds.example.com/set:v1") is None
    assert isinstance(open_source("crds.example.com/set:v1"), DirectorySource)
    assert isinstance(open_source("crds.example.com/other:v1"), OciSource)


@pytest.mark.parametrize("host, loopback", [("127.0.0.1:5000", True), ("localhost:5000", True), ("localhost", True),
                                            ("[::1]:5000", True), ("127.0.0.9", True), ("xpkg.upbound.io", False),
                                            ("127.example.com:5000", False), ("10.0.0.1:5000", False)])
def test_only_a_loopback_registry_is_insecure(host, loopback):
    assert Reference(host, "p", "v1").loopback is loopback


# --------------------------------------------------------------------------- crane's words

# What crane v0.20 said to each (captured from the lab's build against `crane registry serve`).
NO_TAG = ("2026/12/06 02:24:57 HEAD request failed, falling back on GET: HEAD http://127.0.0.1:45123/v2/x/p/manifests/v9: "
          "unexpected status code 404 Not Found\nError: GET http://127.0.0.1:45123/v2/x/p/manifests/v9: "
          "MANIFEST_UNKNOWN: Unknown manifest\n")
NO_REPOSITORY = "Error: GET http://127.0.0.1:45123/v2/crdscope/nope/manifests/v1: NAME_UNKNOWN: Unknown name\n"
REFUSED = ('Error: Get "https://127.0.0.1:1/v2/": dial tcp 127.0.0.1:1: connect: connection refused; '
           'Get "http://127.0.0.1:1/v2/": dial tcp 127.0.0.1:1: connect: connection refused\n')
NO_HOST = 'Error: Get "https://nonexist.invalid/v2/": dial tcp: lookup nonexist.invalid on 10.0.0.53:53: no such host\n'


@pytest.mark.parametrize("stderr, line", [
    (NO_TAG, "R: no such tag"),
    (NO_REPOSITORY, "R: no such repository"),
    (REFUSED, "R: registry H is not reachable: connection refused"),
    (NO_HOST, "R: registry H is not reachable: no such host"),
])
def test_crane_failures_become_one_line(stderr, line):
    error = crane_error("R", "H", stderr)
    assert str(error) == line and error.exit_code == 2


def test_a_credential_in_cranes_words_is_never_repeated(monkeypatch, tmp_path):
    from crdscope.loader import registry_auth

    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))  # no config.json there: nothing offered
    asked = []
    monkeypatch.setattr(registry_auth, "ask_challenge", lambda host, loopback: asked.append((host, loopback)) or "")
    said = "Error: GET https://user:hunter2@r.example.com/v2/: weird: Authorization: Bearer eyJhbGciOi.secret.token"
    line = str(crane_error("R", "H", said))
    assert "hunter2" not in line and "eyJhbGciOi" not in line and "secret" not in line
    refused = crane_error("R", "r.example.com", "Error: GET https://r.example.com/v2/: UNAUTHORIZED: authentication required")
    assert "docker login r.example.com" in str(refused) and refused.exit_code == 3
    assert asked == [("r.example.com", False)]


# --------------------------------------------------------------------------- versions


TAGS = ["v0.9.0", "v1.0.0", "v1.2.0", "v1.10.1", "v2.0.0", "v2.1.0-rc.1", "latest", "main"]


@pytest.mark.parametrize("constraint, tag", [
    (">=v1.0.0", "v2.0.0"),            # a prerelease only when asked for
    (">=v1.0.0, <v2.0.0", "v1.10.1"),  # numeric, not lexical: 1.10 > 1.2
    (">= 1.0.0 < 1.5", "v1.2.0"),
    ("~v1.2.0", "v1.2.0"),
    ("^v1.0.0", "v1.10.1"),
    ("<v1.0.0 || >=v2.0.0", "v2.0.0"),
    (">=v2.1.0-rc.0", "v2.1.0-rc.1"),
    (">v3.0.0", None),
])
def test_a_version_constraint_picks_the_highest_tag_satisfying_it(constraint, tag):
    assert highest_satisfying(TAGS, constraint) == tag


# --------------------------------------------------------------------------- a scripted registry


def crd(name: str, group: str) -> dict:
    plural = name.split(".")[0]
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": name},
            "spec": {"group": group, "names": {"kind": plural.title(), "plural": plural}, "scope": "Cluster",
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {"type": "object"}}}]}}


def package_yaml(name: str, crds: list[dict], depends_on: list[dict] | None = None, family: str | None = None) -> bytes:
    meta: dict = {"apiVersion": "meta.pkg.crossplane.io/v1", "kind": "Provider", "metadata": {"name": name},
                  "spec": {"dependsOn": depends_on} if depends_on else {}}
    if family:
        meta["metadata"]["labels"] = {"pkg.crossplane.io/provider-family": family}
    # As crank writes it: a separator first, the metadata, then every CRD.
    return ("---\n" + yaml.safe_dump_all([meta, *crds], explicit_start=False).replace("\n...\n", "\n")).encode()


def layer(files: dict[str, bytes]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue())


def blob_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class Registry:
    """crane's answers for a few images: ``images[repository][tag] = (digest, layer bytes, annotated)``."""

    def __init__(self) -> None:
        self.images: dict[str, dict[str, tuple[str, bytes, bool]]] = {}
        self.calls: list[list[str]] = []

    def push(self, repository: str, tag: str, digest: str, data: bytes, *, annotated: bool = True) -> None:
        self.images.setdefault(repository, {})[tag] = (digest, data, annotated)

    def _find(self, reference: str) -> tuple[str, bytes, bool] | None:
        if "@" in reference:
            repository, digest = reference.split("@")
            return next((i for i in self.images.get(repository, {}).values() if i[0] == digest), None)
        repository, tag = reference.rsplit(":", 1)
        return self.images.get(repository, {}).get(tag)

    def __call__(self, argv: list[str], stdout) -> tuple[int, bytes, str]:
        self.calls.append(argv)
        command, target = argv[1], argv[2]
        if command == "ls":
            return 0, "\n".join(self.images.get(target, {})).encode(), ""
        image = self._find(target)
        if command == "blob":
            repository, digest = target.split("@")
            image = next((i for i in self.images.get(repository, {}).values() if blob_digest(i[1]) == digest), None)
        if image is None:
            return 1, b"", NO_TAG
        digest, data, annotated = image
        if command == "digest":
            return 0, digest.encode() + b"\n", ""
        if command == "manifest":
            annotations = {"io.crossplane.xpkg": "base"} if annotated else {}
            return 0, json.dumps({"mediaType": "application/vnd.oci.image.manifest.v1+json", "layers": [
                {"digest": blob_digest(data), "annotations": annotations}]}).encode(), ""
        if command in ("blob", "export"):
            stdout.write(data if command == "blob" else gzip.decompress(data))
            return 0, b"", ""
        raise AssertionError(argv)

    def commands(self) -> list[str]:
        return [argv[1] for argv in self.calls]


@pytest.fixture
def registry(tmp_path, monkeypatch) -> Registry:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return Registry()


def source(spec: str, registry: Registry) -> OciSource:
    reference = parse_reference(spec)
    assert reference is not None
    return OciSource(reference, spec, Puller(Crane(Path("/lab/crane"), registry)))


def crds_of(oci: OciSource) -> list[str]:
    oci.prepare()
    return [item.name for item in oci.items() if isinstance(item, CRDDocument)]


HOST = "127.0.0.1:5000"
FAMILY = package_yaml("provider-family-x", [crd("providerconfigs.x.example.org", "x.example.org")],
                      family="provider-family-x")


def member(version: str, host: str = HOST) -> bytes:
    return package_yaml("provider-x-s3", [crd("buckets.s3.x.example.org", "s3.x.example.org"),
                                          crd("objects.s3.x.example.org", "s3.x.example.org")],
                        [{"apiVersion": "pkg.crossplane.io/v1", "kind": "Provider",
                          "package": f"{host}/x/provider-family-x", "version": version}], family="provider-family-x")


def test_a_member_reads_its_own_crds_then_its_familys(registry):
    registry.push(f"{HOST}/x/provider-x-s3", "v1.0.0", DIGESTS["a"], layer({"package.yaml": member("v1.0.0")}))
    registry.push(f"{HOST}/x/provider-family-x", "v1.0.0", DIGESTS["b"], layer({"package.yaml": FAMILY}))
    oci = source(f"{HOST}/x/provider-x-s3:v1.0.0", registry)
    assert crds_of(oci) == ["buckets.s3.x.example.org", "objects.s3.x.example.org", "providerconfigs.x.example.org"]
    assert oci.estimate == 3
    assert all("--insecure" in argv for argv in registry.calls)  # a loopback registry
    # Only the annotated layer is fetched, never the whole image.
    assert "export" not in registry.commands()
    assert oci.key.startswith("xpkg:oci:")


def test_a_constraint_is_resolved_to_the_highest_tag_and_the_demos_host_to_the_members_registry(registry):
    registry.push(f"{HOST}/x/provider-x-s3", "v1.0.0", DIGESTS["a"],
                  layer({"package.yaml": member(">=v1.0.0", host=PACKAGE_HOST)}))
    registry.push(f"{HOST}/x/provider-family-x", "v1.0.0", DIGESTS["b"], layer({"package.yaml": b"---\n"}))
    registry.push(f"{HOST}/x/provider-family-x", "v1.1.0", DIGESTS["c"], layer({"package.yaml": FAMILY}))
    assert crds_of(source(f"{HOST}/x/provider-x-s3:v1.0.0", registry))[-1] == "providerconfigs.x.example.org"
    assert ["ls", f"{HOST}/x/provider-family-x"] == registry.calls[registry.commands().index("ls")][1:3]


def test_a_second_read_pulls_nothing_and_a_digest_reference_runs_no_crane(registry):
    registry.push(f"{HOST}/x/provider-family-x", "v1.0.0", DIGESTS["b"], layer({"package.yaml": FAMILY}))
    first = crds_of(source(f"{HOST}/x/provider-family-x:v1.0.0", registry))
    assert cached_file(DIGESTS["b"]).read_bytes() == FAMILY
    registry.calls.clear()
    assert crds_of(source(f"{HOST}/x/provider-family-x:v1.0.0", registry)) == first
    assert registry.commands() == ["digest"]  # the tag is resolved again (tags move), nothing pulled
    registry.calls.clear()
    assert crds_of(source(f"{HOST}/x/provider-family-x@{DIGESTS['b']}", registry)) == first
    assert registry.calls == []


def test_an_image_without_the_annotation_is_read_from_its_files_and_one_without_package_yaml_is_refused(registry):
    registry.push(f"{HOST}/x/plain", "v1", DIGESTS["d"], layer({"package.yaml": FAMILY}), annotated=False)
    registry.push(f"{HOST}/x/app", "v1", DIGESTS["e"], layer({"bin/app": b"\x7fELF"}), annotated=False)
    assert crds_of(source(f"{HOST}/x/plain:v1", registry)) == ["providerconfigs.x.example.org"]
    assert "export" in registry.commands()
    with pytest.raises(ConfigError, match=r"^127.0.0.1:5000/x/app:v1: not a Crossplane package \(no package.yaml"):
        source(f"{HOST}/x/app:v1", registry).prepare()
    assert not cached_file(DIGESTS["e"]).exists()


def test_a_family_package_without_crds_says_to_name_a_member(registry):
    empty = package_yaml("provider-family-y", [], family="provider-family-y")
    registry.push(f"{HOST}/x/provider-family-y", "v1", DIGESTS["f"], layer({"package.yaml": empty}))
    with pytest.raises(ConfigError, match="holds no CRDs: it is the base package of the provider-family-y family.*"
                                          "name a member"):
        source(f"{HOST}/x/provider-family-y:v1", registry).prepare()


def test_a_missing_tag_is_one_line(registry):
    with pytest.raises(ConfigError, match=r"^127.0.0.1:5000/x/none:v1: no such tag$"):
        source(f"{HOST}/x/none:v1", registry).prepare()


def test_crane_not_built_says_how_to_build_it(tmp_path, monkeypatch):
    monkeypatch.setattr("crdscope.toolchain.crossplane.cached_binaries", lambda version=None: None)
    with pytest.raises(ConfigError, match="run `crdscope lab build --crossplane`"):
        open_source("xpkg.example.org/x/p:v1").prepare()


# --------------------------------------------------------------------------- the lab's install of a reference


def test_the_lab_names_the_reference_in_one_provider_and_activates_the_named_packages_groups(registry):
    registry.push(f"{HOST}/x/provider-x-s3", "v1.0.0", DIGESTS["a"],
                  layer({"package.yaml": member("v1.0.0", host=PACKAGE_HOST)}))
    registry.push(f"{HOST}/x/provider-family-x", "v1.0.0", DIGESTS["b"], layer({"package.yaml": FAMILY}))
    stages = plan_reference_install(source(f"{HOST}/x/provider-x-s3:v1.0.0", registry))
    kinds = [[o["kind"] for o in stage.objects] for stage in stages]
    assert kinds == [["ImageConfig"], ["Provider"], ["ManagedResourceActivationPolicy"]]
    assert stages[0].objects[0]["metadata"]["name"] == IMAGE_CONFIG  # the member names the demo's host
    assert stages[0].objects[0]["spec"]["rewriteImage"]["prefix"] == f"{HOST}/"
    provider = stages[1].objects[0]
    assert provider["spec"]["package"] == f"{HOST}/x/provider-x-s3:v1.0.0"
    assert provider["metadata"]["name"] == "provider-x-s3"
    # The family's ProviderConfig is a CRD on Crossplane v2.4 (Established at install): no MRD to wait for.
    assert set(stages[1].names) == {"buckets.s3.x.example.org", "objects.s3.x.example.org"}
    assert stages[2].objects[0]["spec"]["activate"] == ["*.s3.x.example.org"]
    assert stages[2].names == ("buckets.s3.x.example.org", "objects.s3.x.example.org")


def test_crds_written_in_another_style_are_still_crds(registry):
    """The CRD count is a line count (``kind:`` at the start of a line); a package whose CRDs are
    written otherwise (JSON, here) is read all the same, never refused as holding none."""
    meta = {"apiVersion": "meta.pkg.crossplane.io/v1", "kind": "Provider", "metadata": {"name": "provider-j"}}
    text = f"---\n{json.dumps(meta)}\n---\n{json.dumps(crd('things.j.example.org', 'j.example.org'))}\n".encode()
    registry.push(f"{HOST}/x/provider-j", "v1", DIGESTS["c"], layer({"package.yaml": text}))
    assert crds_of(source(f"{HOST}/x/provider-j:v1", registry)) == ["things.j.example.org"]


def test_with_a_pull_secret_the_provider_names_it_and_an_image_config_gives_it_to_the_dependencies(registry):
    from crdscope.loader.crossplane_install import AUTH_IMAGE_CONFIG

    registry.push(f"{HOST}/x/provider-x-s3", "v1.0.0", DIGESTS["a"], layer({"package.yaml": member("v1.0.0")}))
    registry.push(f"{HOST}/x/provider-family-x", "v1.0.0", DIGESTS["b"], layer({"package.yaml": FAMILY}))
    stages = plan_reference_install(source(f"{HOST}/x/provider-x-s3:v1.0.0", registry), "lab-secret")
    assert [[o["kind"] for o in stage.objects] for stage in stages] == [
        ["ImageConfig"], ["Provider"], ["ManagedResourceActivationPolicy"]]
    config = stages[0].objects[0]
    assert config["metadata"]["name"] == AUTH_IMAGE_CONFIG
    assert config["spec"] == {"matchImages": [{"type": "Prefix", "prefix": f"{HOST}/"}],
                              "registry": {"authentication": {"pullSecretRef": {"name": "lab-secret"}}}}
    assert stages[1].objects[0]["spec"] == {"package": f"{HOST}/x/provider-x-s3:v1.0.0", "packagePullPolicy": "Always",
                                            "packagePullSecrets": [{"name": "lab-secret"}]}


def test_the_demos_packages_from_an_authenticated_registry_are_pulled_with_its_secret():
    from crdscope.loader.crossplane_install import AUTH_IMAGE_CONFIG, plan_install
    from crdscope.loader.package import PackagePlan

    plans = [PackagePlan("provider-family-x", (), (), family="provider-family-x"),
             PackagePlan("provider-x-s3", ("buckets.s3.x.example.org",), ("s3.x.example.org",),
                         family="provider-family-x", depends_on="provider-family-x")]
    open_stages = plan_install(plans, HOST)
    assert [o["metadata"]["name"] for o in open_stages[0].objects] == [IMAGE_CONFIG]
    assert all("packagePullSecrets" not in o["spec"] for s in open_stages for o in s.objects if o["kind"] == "Provider")
    stages = plan_install(plans, HOST, "lab-secret")
    assert [o["metadata"]["name"] for o in stages[0].objects] == [IMAGE_CONFIG, AUTH_IMAGE_CONFIG]
    providers = [o for s in stages for o in s.objects if o["kind"] == "Provider"]
    assert len(providers) == 2 and all(o["spec"]["packagePullSecrets"] == [{"name": "lab-secret"}] for o in providers)


def test_a_configuration_and_its_providers_are_summarised_from_their_package_yaml(registry):
    configuration = yaml.safe_dump_all([
        {"apiVersion": "meta.pkg.crossplane.io/v1", "kind": "Configuration", "metadata": {"name": "platform"},
         "spec": {"dependsOn": [{"provider": f"{HOST}/x/provider-x-s3", "version": ">=v1.0.0"}]}},
        {"apiVersion": "apiextensions.crossplane.io/v2", "kind": "CompositeResourceDefinition",
         "metadata": {"name": "xapps.example.org"}, "spec": {}},
        {"apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition", "metadata": {"name": "a"}, "spec": {}},
        {"apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition", "metadata": {"name": "b"}, "spec": {}},
    ], sort_keys=False).encode()
    registry.push(f"{HOST}/x/platform", "v1.0.0", DIGESTS["c"], layer({"package.yaml": configuration}))
    registry.push(f"{HOST}/x/provider-x-s3", "v1.0.0", DIGESTS["a"], layer({"package.yaml": member("v1.0.0")}))
    registry.push(f"{HOST}/x/provider-family-x", "v1.0.0", DIGESTS["b"], layer({"package.yaml": FAMILY}))
    oci = source(f"{HOST}/x/platform:v1.0.0", registry)
    assert crds_of(oci) == ["buckets.s3.x.example.org", "objects.s3.x.example.org", "providerconfigs.x.example.org"]
    summaries = [p.summary() for p in oci.packages]
    assert [(s.kind, s.name, s.crds, s.xrds, s.compositions) for s in summaries] == [
        ("Configuration", "platform", 0, 1, 2), ("Provider", "provider-x-s3", 2, 0, 0),
        ("Provider", "provider-family-x", 1, 0, 0)]
    assert summaries[0].describe() == "platform (Configuration: 1 XRD, 2 Compositions)"
    assert summaries[1].describe() == "provider-x-s3 (Provider: 2 CRDs)"
    from crdscope.costmodel.report import package_rows

    rows = dict(package_rows(summaries, "REF"))
    assert rows["packages"] == ("platform (Configuration: 1 XRD, 2 Compositions); depends on provider-x-s3 "
                                "(Provider: 2 CRDs); provider-family-x (Provider: 1 CRD)")
    assert rows["priced path"].startswith("direct: every CRD of the packages created at once")
    assert "1 XRD of a Configuration adds a CRD (the composite kind), not priced here" in rows["priced path"]
    assert "mrap --from" not in rows["priced path"]  # no safe-start Provider: nothing waits for an activation
    assert package_rows([], "REF") == []
