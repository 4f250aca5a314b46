"""Private registries, proven (issue 47 items 5 and 6): the lab's registry asking for credentials.

One lab (`crdscope lab up --crossplane --registry-auth`): Debian's docker-registry (Docker
Distribution) with htpasswd, a random password the lab writes to a Docker config.json and to a pull
secret in crossplane-system; real Crossplane v2.4.2 beside it.  Every command that pulls or pushes
(`package --push`, `estimate`, `load`, `mrap --from`) is run for real (real crank, real crane) with the
credentials three ways: Docker's config.json (DOCKER_CONFIG), a credential helper (a
`docker-credential-NAME` script on PATH, which the test sees called) and `--registry-config FILE`;
and without them: one line naming the registry, the 401 and its realm, exit code 3.  A Configuration
(XRD and a pipeline Composition with patch-and-transform input, depending on two members of a
safe-start family) is built with the real `crossplane xpkg build` and pushed to the authenticated
registry; `mrap --from` plans exactly the kinds it composes and `estimate` prices its dependencies'
CRDs.  Crossplane itself pulls a Provider from the registry only once the Provider names the pull
secret.  The password and the base64 auth string are looked for in every output, the log and the
recordings, and the registry's own log.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import established, wait_for

pytestmark = pytest.mark.lab

LAB_NAME = "privreg"
VERSION = "v0.5.0"
COUNT = 40
FAMILY = "provider-synthetic"
DOMAIN = ".synthetic.crdscope.dev"
MRD = "managedresourcedefinitions.apiextensions.crossplane.io"
HELPER = "crdscopetest"
#: Every output of every crdscope run of this module (checked for secrets as it comes, and at the end).
OUTPUTS: list[str] = []


class Secrets:
    """The lab registry's credentials, as the test knows them (to look for them where they must not be)."""

    def __init__(self, config_file: str) -> None:
        self.config_file = Path(config_file)
        [(self.host, entry)] = json.loads(self.config_file.read_text())["auths"].items()
        self.auth = entry["auth"]
        self.user, _, self.password = base64.b64decode(self.auth).decode().partition(":")

    def assert_absent(self, text: str, where: str) -> None:
        assert self.password not in text, f"the registry password appears in {where}"
        assert self.auth not in text, f"the base64 auth string appears in {where}"


@pytest.fixture(scope="module")
def private_lab(lab_binaries):
    """A named lab with Crossplane (no default MRAP) whose registry asks for credentials."""
    from crdscope.lab.controlplane import Lab

    if not os.access("/usr/bin/docker-registry", os.X_OK):
        pytest.fail("Debian's docker-registry is not installed: `make system-deps` (lab/system-deps.sh)")
    done = run("lab", "up", "--name", LAB_NAME, "--crossplane", "--registry-auth", "--activation", "none")
    the_lab = Lab(name=LAB_NAME)
    if done.returncode != 0:
        the_lab.down()
        pytest.fail(done.stderr)
    state = the_lab.require()
    assert state.registry_config and "--registry-config " + state.registry_config in done.stdout
    yield state
    the_lab.down()


@pytest.fixture(scope="module")
def secrets(private_lab) -> Secrets:
    found = Secrets(private_lab.registry_config)
    assert found.host == f"127.0.0.1:{private_lab.components['registry'].port}" and found.user == "crdscope"
    return found


def run(*args: str, env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "crdscope.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})
    OUTPUTS.extend((done.stdout, done.stderr))
    return done


def crdscope(secrets: Secrets, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """A crdscope run whose outputs never hold the registry's secrets."""
    done = run(*args, env=env)
    assert "Traceback" not in done.stderr, done.stderr
    secrets.assert_absent(done.stdout + done.stderr, f"the output of crdscope {' '.join(args)}")
    return done


@pytest.fixture(scope="module")
def docker_homes(secrets, tmp_path_factory) -> dict[str, dict]:
    """Environments for crdscope: Docker's config.json with the credentials, a credential helper that
    gives them, a config.json without them, and none at all (DOCKER_CONFIG each; HOME's is never read)."""
    base = tmp_path_factory.mktemp("docker")
    logged_in, helper, empty, bin_dir = base / "logged-in", base / "helper", base / "empty", base / "bin"
    for folder in (logged_in, helper, empty, bin_dir):
        folder.mkdir()
    (logged_in / "config.json").write_text(secrets.config_file.read_text())
    (helper / "config.json").write_text(json.dumps({"credHelpers": {secrets.host: HELPER}}))
    (empty / "config.json").write_text(json.dumps({"auths": {}}))
    answer = base / "helper-answer.json"
    answer.write_text(json.dumps({"ServerURL": secrets.host, "Username": secrets.user, "Secret": secrets.password}))
    script = bin_dir / f"docker-credential-{HELPER}"
    # Docker's credential-helper protocol: `get`, the server on stdin, the credentials as JSON on stdout.
    script.write_text(f"#!/bin/sh\nread server\necho \"$1 $server\" >> {base / 'helper-calls'}\n"
                      f"[ \"$1\" = get ] && [ \"$server\" = {secrets.host} ] && exec cat {answer}\n"
                      "echo 'credentials not found in native keychain'; exit 1\n")
    script.chmod(0o700)
    path = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    return {"config": {"DOCKER_CONFIG": str(logged_in)},
            "helper": {"DOCKER_CONFIG": str(helper), "PATH": path, "CALLS": str(base / "helper-calls")},
            "empty": {"DOCKER_CONFIG": str(empty)}, "none": {"DOCKER_CONFIG": str(base / "nowhere")}}


@pytest.fixture(scope="module")
def family(secrets, docker_homes, tmp_path_factory) -> dict[str, dict]:
    """A safe-start synthetic family pushed with `crdscope package --push` and the config.json's credentials."""
    out = tmp_path_factory.mktemp("family")
    done = crdscope(secrets, "package", f"synthetic:{COUNT}", "--name", FAMILY, "--family", "--safe-start", "--push",
                    "--registry", secrets.host, "--version", VERSION, "--output", str(out), "--json",
                    env=docker_homes["config"])
    assert done.returncode == 0, done.stderr
    built = json.loads(done.stdout)
    assert built["pushed"] and built["crds"] == COUNT
    return {p["name"]: p for p in built["packages"]}


def synthetic_by_service() -> dict[str, list[dict]]:
    """The CRD documents of synthetic:COUNT by service (the first label of the group), as generated."""
    from crdscope.loader.synthetic import synthetic_documents

    found: dict[str, list[dict]] = {}
    for document in synthetic_documents(COUNT):
        found.setdefault(document["spec"]["group"].split(".")[0], []).append(document)
    return found


def refusal_line(secrets: Secrets, subject: str, offered: str) -> str:
    return (f'crdscope: {subject}: registry {secrets.host} refused access (401 Unauthorized, Basic realm '
            f'"crdscope-lab"): {offered}')


def one_line(done: subprocess.CompletedProcess, *, narrated: bool = False) -> str:
    """The error: stderr's one line (``narrated``: the last, after what the command said it was doing)."""
    lines = done.stderr.strip().splitlines()
    assert [line for line in lines if line.startswith("crdscope:")] == lines[-1:], done.stderr
    assert narrated or len(lines) == 1, done.stderr
    return lines[-1]


def member_reference(secrets: Secrets, family: dict, service: str) -> str:
    entry = family[f"{FAMILY}-{service}"]
    assert entry["reference"] == f"{secrets.host}/crdscope/{FAMILY}-{service}:{VERSION}"
    return entry["reference"]


# --------------------------------------------------------------------------- pushing


def test_push_without_credentials_is_one_line_naming_the_registry_its_realm_and_exit_3(secrets, docker_homes,
                                                                                         tmp_path):
    done = crdscope(secrets, "package", "synthetic:3", "--name", "provider-refused", "--push", "--registry",
                    secrets.host, "--version", VERSION, "--output", str(tmp_path), env=docker_homes["none"])
    assert done.returncode == 3
    reference = f"{secrets.host}/crdscope/provider-refused:{VERSION}"
    where = Path(docker_homes["none"]["DOCKER_CONFIG"]) / "config.json"
    # `package` narrates on stderr (reading, building, pushing); the error is its one last line.
    assert one_line(done, narrated=True) == refusal_line(
        secrets, f"crank xpkg push {reference}", f"no credentials for {secrets.host} in {where} (absent): log in "
        f"with `docker login {secrets.host}` or give --registry-config FILE")


def test_push_with_config_json_lands_every_package_in_the_registry(secrets, docker_homes, family, binaries):
    # What the registry holds, asked with crane and the same credentials (the registry refuses anyone else).
    listed = subprocess.run([str(binaries.crane), "catalog", secrets.host, "--insecure"], capture_output=True,
                            text=True, timeout=120, env={**os.environ, **docker_homes["config"]})
    assert listed.returncode == 0, listed.stderr
    assert {f"crdscope/{name}" for name in family} <= set(listed.stdout.split())
    refused = subprocess.run([str(binaries.crane), "catalog", secrets.host, "--insecure"], capture_output=True,
                             text=True, timeout=120, env={**os.environ, **docker_homes["none"]})
    assert refused.returncode != 0 and "UNAUTHORIZED" in refused.stderr


# --------------------------------------------------------------------------- pulling


def test_estimate_pulls_with_config_json_a_credential_helper_and_registry_config(secrets, docker_homes, family):
    reference = member_reference(secrets, family, "storage")
    expected = sorted(d["metadata"]["name"] for d in synthetic_by_service()["storage"])
    by_way = {}
    for way, env, extra in (("config.json", docker_homes["config"], ()),
                            ("helper", docker_homes["helper"], ()),
                            ("--registry-config", docker_homes["empty"], ("--registry-config",
                                                                          str(secrets.config_file)))):
        done = crdscope(secrets, "estimate", reference, "--kubernetes", "1.37", "--json", *extra, env=env)
        assert done.returncode == 0, f"{way}: {done.stderr}"
        by_way[way] = json.loads(done.stdout)
    for data in by_way.values():
        assert data["crds"] == len(expected) and data["priced_path"] == "direct"
        assert [p["name"] for p in data["packages"]] == [f"{FAMILY}-storage", f"{FAMILY.replace('provider-', 'provider-family-')}"]
    assert by_way["helper"]["memory"] == by_way["config.json"]["memory"] == by_way["--registry-config"]["memory"]
    # The helper was asked, for this registry only (crane asks once per reference it resolves).
    calls = Path(docker_homes["helper"]["CALLS"]).read_text().splitlines()
    assert calls and set(calls) == {f"get {secrets.host}"}


def test_without_credentials_every_pull_is_one_line_and_exit_3(secrets, docker_homes, family, private_lab):
    reference = member_reference(secrets, family, "network")
    for home in ("none", "empty"):
        where = Path(docker_homes[home]["DOCKER_CONFIG"]) / "config.json"
        offered = f"no credentials for {secrets.host} in {where}{' (absent)' if home == 'none' else ''}: log in " \
                  f"with `docker login {secrets.host}` or give --registry-config FILE"
        for args in (("estimate", reference, "--kubernetes", "1.37"),
                     ("mrap", "--from", reference),
                     ("load", reference, "--kubeconfig", private_lab.kubeconfig, "--context",
                      private_lab.admin_context)):
            done = crdscope(secrets, *args, env=docker_homes[home])
            assert done.returncode == 3, (args, done.stderr)
            # `load` first says where it loads (the server address first, as against any cluster).
            assert one_line(done, narrated=args[0] == "load") == refusal_line(secrets, reference, offered), args
    # Wrong credentials: said as such, with the file they came from.
    wrong = Path(docker_homes["empty"]["DOCKER_CONFIG"]).parent / "wrong.json"
    wrong.write_text(json.dumps({"auths": {secrets.host: {"auth": base64.b64encode(b"crdscope:nope").decode()}}}))
    done = crdscope(secrets, "estimate", reference, "--kubernetes", "1.37", "--registry-config", str(wrong),
                    env=docker_homes["none"])
    assert done.returncode == 3
    assert one_line(done) == refusal_line(secrets, reference, f"the credentials for {secrets.host} in {wrong} were "
                                                              "not accepted")
    missing = crdscope(secrets, "estimate", reference, "--registry-config", str(wrong.with_name("absent.json")))
    assert missing.returncode == 2 and one_line(missing) == f"crdscope: --registry-config {wrong.with_name('absent.json')}: no such file"


def test_load_pulls_with_registry_config_and_installs_exactly_the_members_crds(secrets, docker_homes, family,
                                                                               private_lab):
    from tests.conftest import LabHandle

    handle = LabHandle(lab=None, state=private_lab, kubeconfig=private_lab.kubeconfig,
                       admin_context=private_lab.admin_context)
    reference = member_reference(secrets, family, "network")
    expected = sorted(d["metadata"]["name"] for d in synthetic_by_service()["network"])
    done = crdscope(secrets, "load", reference, "--kubeconfig", private_lab.kubeconfig, "--context",
                    private_lab.admin_context, "--registry-config", str(secrets.config_file), "--json",
                    env=docker_homes["none"])
    try:
        assert done.returncode == 0, done.stderr
        installed = {c["metadata"]["name"]: c for c in handle.kubectl_json("get", "crds")["items"]}
        assert sorted(n for n in installed if n.endswith(DOMAIN)) == expected
        assert all(established(installed[name]) for name in expected)
    finally:
        crdscope(secrets, "clean", "--yes", "--kubeconfig", private_lab.kubeconfig, "--context",
                 private_lab.admin_context)


# --------------------------------------------------------------------------- a Configuration (item 6)


def _configuration_root(root: Path, host: str, composed: dict[str, dict]) -> None:
    """crossplane.yaml (kind Configuration, depending on the composed kinds' packages), an XRD and a
    pipeline Composition whose patch-and-transform step composes one kind of each."""
    depends = [{"apiVersion": "pkg.crossplane.io/v1", "kind": "Provider",
                "package": f"{host}/crdscope/{FAMILY}-storage", "version": ">=v0.5.0"},  # a constraint: crane ls
               {"apiVersion": "pkg.crossplane.io/v1", "kind": "Provider",
                "package": f"{host}/crdscope/{FAMILY}-compute", "version": VERSION}]
    meta = {"apiVersion": "meta.pkg.crossplane.io/v1", "kind": "Configuration", "metadata": {"name": "platform-apps"},
            "spec": {"crossplane": {"version": ">=v2.0.0"}, "dependsOn": depends}}
    xrd = {"apiVersion": "apiextensions.crossplane.io/v2", "kind": "CompositeResourceDefinition",
           "metadata": {"name": "xapps.platform.example.org"},
           "spec": {"group": "platform.example.org", "names": {"kind": "XApp", "plural": "xapps"},
                    "scope": "Namespaced",
                    "versions": [{"name": "v1alpha1", "served": True, "referenceable": True,
                                  "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                      "spec": {"type": "object", "properties": {"region": {"type": "string"}}}}}}}]}}
    resources = [{"name": name, "base": {"apiVersion": f"{crd['spec']['group']}/{crd['spec']['versions'][0]['name']}",
                                         "kind": crd["spec"]["names"]["kind"], "spec": {"forProvider": {}}},
                  "patches": [{"type": "FromCompositeFieldPath", "fromFieldPath": "spec.region",
                               "toFieldPath": "spec.forProvider.region"}]}
                 for name, crd in composed.items()]
    composition = {"apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
                   "metadata": {"name": "xapps"},
                   "spec": {"compositeTypeRef": {"apiVersion": "platform.example.org/v1alpha1", "kind": "XApp"},
                            "mode": "Pipeline",
                            "pipeline": [{"step": "resources", "functionRef": {"name": "function-patch-and-transform"},
                                          "input": {"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources",
                                                    "resources": resources}}]}}
    root.mkdir()
    (root / "crossplane.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    (root / "apis").mkdir()
    (root / "apis" / "xrd.yaml").write_text(yaml.safe_dump(xrd, sort_keys=False))
    (root / "apis" / "composition.yaml").write_text(yaml.safe_dump(composition, sort_keys=False))


@pytest.fixture(scope="module")
def configuration(secrets, docker_homes, family, binaries, tmp_path_factory) -> tuple[str, dict[str, dict]]:
    """A Configuration built with the real `crossplane xpkg build` and pushed (with the config.json's
    credentials) to the authenticated registry: its reference and the CRDs its Composition composes."""
    from crdscope.loader.package import run_crank
    from crdscope.loader.registry_auth import named_config

    by_service = synthetic_by_service()
    composed = {"store": by_service["storage"][0], "worker": by_service["compute"][0]}
    work = tmp_path_factory.mktemp("configuration")
    root = work / "root"
    _configuration_root(root, secrets.host, composed)
    package = work / "platform-apps.xpkg"
    run_crank(binaries.crank, ["xpkg", "build", f"--package-root={root}", f"--package-file={package}",
                               f"--examples-root={root / 'examples'}"], "crank xpkg build platform-apps", cwd=root)
    reference = f"{secrets.host}/crdscope/platform-apps:v1.0.0"
    run_crank(binaries.crank, ["xpkg", "push", f"--package-files={package}", reference],
              f"crank xpkg push {reference}", registry=secrets.host,
              config=named_config(Path(docker_homes["config"]["DOCKER_CONFIG"]) / "config.json"))
    return reference, {crd["metadata"]["name"]: crd for crd in composed.values()}


def test_mrap_from_a_configuration_plans_exactly_the_kinds_its_composition_composes(secrets, docker_homes,
                                                                                    configuration):
    reference, composed = configuration
    done = crdscope(secrets, "mrap", "--from", reference, "--json", env=docker_homes["config"])
    # Safe-start members and no MRAP: the composed kinds are inactive, which is critical (exit 2).
    assert done.returncode == 2, done.stderr
    data = json.loads(done.stdout)
    assert sorted(n["mrd"] for n in data["needed"]) == sorted(composed)
    assert data["compositions"] == 1
    # The MRDs are those of the two members the Configuration depends on (and their family's: none).
    services = synthetic_by_service()
    assert data["mrds"] == len(services["storage"]) + len(services["compute"]) and data["mrds_active"] == 0
    plan = yaml.safe_load(data["plan"]["yaml"])
    from crdscope.base.globs import go_match

    every = [d["metadata"]["name"] for s in ("storage", "compute") for d in services[s]]
    assert sorted(n for n in every if any(go_match(p, n) for p in plan["spec"]["activate"])) == sorted(composed)
    assert data["cost"]["plan_crds"] == 2 and data["cost"]["priced_by"] == "schemas"
    assert {w["provider"] for w in data["runtimes_awaiting"] if w["wakes"]} == {f"{FAMILY}-storage",
                                                                                 f"{FAMILY}-compute"}
    # Without credentials the Configuration is refused like any package.
    refused = crdscope(secrets, "mrap", "--from", reference, env=docker_homes["none"])
    assert refused.returncode == 3 and f"registry {secrets.host} refused access (401 Unauthorized" in refused.stderr


def test_estimate_of_a_configuration_prices_its_dependency_providers_crds(secrets, docker_homes, configuration):
    reference, _composed = configuration
    done = crdscope(secrets, "estimate", reference, "--kubernetes", "1.37", "--json", env=docker_homes["config"])
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    services = synthetic_by_service()
    assert data["crds"] == len(services["storage"]) + len(services["compute"])
    kinds = {p["name"]: (p["kind"], p["crds"], p["xrds"], p["compositions"], p["safe_start"]) for p in data["packages"]}
    assert kinds == {"platform-apps": ("Configuration", 0, 1, 1, False),
                     f"{FAMILY}-storage": ("Provider", len(services["storage"]), 0, 0, True),
                     f"{FAMILY}-compute": ("Provider", len(services["compute"]), 0, 0, True),
                     "provider-family-synthetic": ("Provider", 0, 0, 0, True)}
    assert data["priced_path"] == "direct"
    top = {c["name"] for c in data["top_crds"]}
    assert top <= {d["metadata"]["name"] for s in ("storage", "compute") for d in services[s]}
    table = crdscope(secrets, "estimate", reference, "--kubernetes", "1.37", env=docker_homes["config"])
    assert table.returncode == 0, table.stderr
    rows = dict(line.split(None, 1) for line in table.stdout.splitlines() if line.startswith(("packages", "priced")))
    assert rows["packages"].startswith("platform-apps (Configuration: 1 XRD, 1 Composition); depends on ")
    assert f"crdscope mrap --from {reference}" in table.stdout and "1 XRD of a Configuration adds a CRD" in table.stdout


# --------------------------------------------------------------------------- Crossplane pulls with a pull secret


def test_crossplane_installs_a_provider_from_the_registry_once_it_names_the_pull_secret(secrets, docker_homes,
                                                                                        private_lab, tmp_path):
    from crdscope.lab.registry import PULL_SECRET
    from crdscope.loader.crossplane_install import provider
    from tests.conftest import LabHandle
    from tests.crdsets import write_tiny_crds

    handle = LabHandle(lab=None, state=private_lab, kubeconfig=private_lab.kubeconfig,
                       admin_context=private_lab.admin_context)
    secret = handle.kubectl_json("get", "secret", PULL_SECRET, "-n", "crossplane-system")
    assert secret["type"] == "kubernetes.io/dockerconfigjson"
    crds = write_tiny_crds(tmp_path / "crds", 2, prefix="private", per_group=2)
    done = crdscope(secrets, "package", str(crds), "--name", "provider-private", "--push", "--registry", secrets.host,
                    "--version", VERSION, "--output", str(tmp_path / "out"), "--json", env=docker_homes["config"])
    assert done.returncode == 0, done.stderr
    [entry] = json.loads(done.stdout)["packages"]
    body = provider("provider-private", reference=entry["reference"])
    handle.kubectl("apply", "-f", "-", input=json.dumps(body))

    def said(name: str) -> str:
        found = handle.kubectl_json("get", "providers.pkg.crossplane.io", name)
        return " ".join(c.get("message", "") for c in found.get("status", {}).get("conditions", []))

    # Without the secret Crossplane is refused (its own words: go-containerregistry's), and installs nothing.
    words = wait_for(lambda: (text := said("provider-private")) and ("401" in text or "UNAUTHORIZED" in text)
                     and text, timeout=120, message="Crossplane's pull refused")
    secrets.assert_absent(words, "the Provider's conditions")
    body = provider("provider-private", PULL_SECRET, reference=entry["reference"])
    handle.kubectl("apply", "-f", "-", input=json.dumps(body))
    names = sorted(yaml.safe_load_all(crds.read_text()), key=lambda d: d["metadata"]["name"])
    expected = [d["metadata"]["name"] for d in names]

    def mrds_there() -> bool:
        present = {m["metadata"]["name"] for m in handle.kubectl_json("get", MRD)["items"]}
        return set(expected) <= present

    wait_for(mrds_there, timeout=180, interval=2, message="the Provider's MRDs (pulled with the pull secret)")
    revisions = handle.kubectl_json("get", "providerrevisions.pkg.crossplane.io")["items"]
    [revision] = [r for r in revisions if r["spec"]["image"].startswith(entry["reference"].rsplit(":", 1)[0])]
    assert revision["spec"]["packagePullSecrets"] == [{"name": PULL_SECRET}]


def test_the_demo_pulls_a_member_with_its_secret_and_its_family_through_the_image_config(secrets, family,
                                                                                        private_lab, binaries):
    """`lab --crossplane --registry-auth --provider REF`: the Provider names the pull secret, and the
    family package Crossplane's resolver installs for it (a Provider with no pull secret of its own) is
    pulled with the secret the ImageConfig gives every package of the lab's registry."""
    import threading

    from crdscope.lab.controlplane import Lab
    from crdscope.lab.registry import PULL_SECRET
    from crdscope.loader.crossplane_install import AUTH_IMAGE_CONFIG, LabClient, run_install
    from crdscope.loader.registry_auth import use_registry_config
    from crdscope.loader.sources import open_source
    from crdscope.tui.launch import crossplane_install_stages
    from tests.conftest import LabHandle

    handle = LabHandle(lab=None, state=private_lab, kubeconfig=private_lab.kubeconfig,
                       admin_context=private_lab.admin_context)
    reference = member_reference(secrets, family, "storage")
    said: list[str] = []
    use_registry_config(str(secrets.config_file))  # the stages name the reference's MRDs: read here first
    try:
        stages = crossplane_install_stages(Lab(name=LAB_NAME), private_lab, open_source(reference), binaries,
                                           say=said.append)
    finally:
        use_registry_config(None)
    objects = [o for stage in stages for o in stage.objects]
    assert [o["metadata"]["name"] for o in objects if o["kind"] == "ImageConfig"] == [AUTH_IMAGE_CONFIG]
    [member] = [o for o in objects if o["kind"] == "Provider"]
    assert member["spec"] == {"package": reference, "packagePullPolicy": "Always",
                              "packagePullSecrets": [{"name": PULL_SECRET}]}
    client = LabClient(private_lab.server, private_lab.pki_dir)
    stop = threading.Event()
    timer = threading.Timer(420, stop.set)  # a pull refused for good would otherwise wait out every stage
    timer.start()
    try:
        assert run_install(stages, client, say=said.append, stop=stop), said[-1]
        providers = handle.kubectl_json("get", "providers.pkg.crossplane.io")["items"]
        [resolved] = [p for p in providers if "/crdscope/provider-family-synthetic" in p["spec"]["package"]]
        assert "packagePullSecrets" not in resolved["spec"]  # created by the resolver: the ImageConfig's secret
        conditions = {c["type"]: c["status"] for c in resolved.get("status", {}).get("conditions", [])}
        assert conditions.get("Installed") == "True", resolved.get("status")
        ready = {c["metadata"]["name"] for c in handle.kubectl_json("get", "crds")["items"] if established(c)}
        assert {d["metadata"]["name"] for d in synthetic_by_service()["storage"]} <= ready
    finally:
        timer.cancel()
        client.close()
        # Later tests see the registry refuse Crossplane without a Provider's own pull secret.
        handle.kubectl("delete", "imageconfigs.pkg.crossplane.io", AUTH_IMAGE_CONFIG, "--ignore-not-found")
    for line in said:
        secrets.assert_absent(line, "the demo's lines")


# --------------------------------------------------------------------------- no secret anywhere


def test_no_secret_in_any_output_the_log_the_recordings_or_the_registrys_log(secrets, docker_homes, family,
                                                                               private_lab):
    from crdscope.base.logs import log_path
    from crdscope.base.paths import data_dir

    reference = member_reference(secrets, family, "storage")
    # Refused and accepted runs of their own (tests run in any order), a recorded watch given the file,
    # then every file crdscope wrote.
    crdscope(secrets, "estimate", reference, "--kubernetes", "1.37", env=docker_homes["none"])
    crdscope(secrets, "estimate", reference, "--kubernetes", "1.37", "--registry-config", str(secrets.config_file))
    recording = data_dir() / "recordings" / "private-registry.jsonl"
    watched = crdscope(secrets, "watch", "--headless", "--duration", "5s", "--record", str(recording),
                       "--registry-config", str(secrets.config_file), "--kubeconfig", private_lab.kubeconfig,
                       "--context", private_lab.admin_context)
    assert watched.returncode == 0, watched.stderr
    assert recording.is_file() and recording.stat().st_size > 0
    for number, text in enumerate(OUTPUTS):
        secrets.assert_absent(text, f"output {number}")
    files = [log_path(), *sorted(data_dir().rglob("*")),
             *sorted((Path(private_lab.run_dir) / "logs").glob("*.log"))]
    read = [f for f in files if f.is_file()]
    assert log_path() in read  # the log exists: there is something to look at
    for file in read:
        secrets.assert_absent(file.read_text(errors="replace"), str(file))
    lab_said = run("lab", "status", "--name", LAB_NAME)
    assert lab_said.returncode == 0 and f"registry credentials: {private_lab.registry_config}" in lab_said.stdout
    secrets.assert_absent(lab_said.stdout, "lab status")


@pytest.fixture(scope="module")
def binaries():
    from crdscope.toolchain.crossplane import cached_binaries

    found = cached_binaries()
    if found is None:
        pytest.fail("Crossplane is not built: `crdscope lab build --crossplane` (make lab-binaries)")
    return found
