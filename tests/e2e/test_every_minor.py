"""Every Kubernetes minor the lab supports: each built one serves its own version, what
``lab versions`` says it serves, and crdscope's probes and loader work on it.

CI builds and runs the oldest (1.26), one in between (1.33), the newest released (1.37) and the
newest pre-release (1.38, built with the Go it needs) (``make lab-binaries``);
``CRDSCOPE_TEST_MINORS=all`` (or ``1.27,1.28``) runs the same checks on others, after
``crdscope lab build --all``: one not built is skipped with the command that builds it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest

from crdscope.lab.binaries import cached_binaries, is_prerelease, released_minors, served_defaults, \
    supported_minors, versions_for
from crdscope.lab.controlplane import Lab, LabOptions, admin_tls

pytestmark = pytest.mark.lab

CRDSCOPE = [sys.executable, "-m", "crdscope.cli.main"]
#: The minors `make lab-binaries` builds: the oldest, one in between, the newest released and the newest
#: pre-release (when one is supported).
CI_MINORS = tuple(dict.fromkeys((supported_minors()[0], "1.33", released_minors()[-1], supported_minors()[-1])))


def chosen_minors() -> list[str]:
    wanted = os.environ.get("CRDSCOPE_TEST_MINORS", "")
    if wanted == "all":
        return supported_minors()
    return [m.strip() for m in wanted.split(",") if m.strip()] or list(CI_MINORS)


def crdscope(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([*CRDSCOPE, *args], capture_output=True, text=True, timeout=timeout, env=dict(os.environ))


def _aggregated_formats(server: str, pki_dir: str) -> set[str]:
    """The aggregated discovery versions ``/apis`` answers when asked for each one alone."""
    served = set()
    with httpx.Client(base_url=server, verify=admin_tls(pki_dir), timeout=30) as client:
        for version in ("v2", "v2beta1"):
            accept = f"application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList"
            response = client.get("/apis", headers={"Accept": accept})
            if response.status_code == 200 and f"v={version}" in response.headers.get("content-type", ""):
                served.add(version)
    return served


@pytest.fixture(scope="module", params=chosen_minors(), ids=lambda minor: f"k8s-{minor}")
def minor_lab(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    minor = request.param
    binaries = cached_binaries(versions_for(minor))
    if binaries is None:
        if minor in CI_MINORS:
            pytest.fail(f"Kubernetes {minor} is not built, and `make lab-binaries` builds it")
        pytest.skip(f"Kubernetes {minor} is not built (crdscope lab build --kubernetes {minor})")
    name = "m" + minor.replace(".", "")
    if is_prerelease(binaries.kubernetes_version):
        # A pre-release through the command a user types: `lab up --kubernetes 1.38`.
        lab = Lab(name=name)
        done = crdscope("lab", "up", "--kubernetes", minor, "--name", name)
        if done.returncode != 0:
            lab.down()
            pytest.fail(done.stderr)
        assert f"Kubernetes {binaries.kubernetes_version}" in done.stdout
        state = lab.require()
    else:
        lab = Lab(tmp_path_factory.mktemp(f"lab-{name}"), name=name)
        state = lab.up(binaries, options=LabOptions(name=name))
    yield minor, lab, state
    lab.down()


def test_each_minor_serves_itself_as_lab_versions_says(minor_lab):
    minor, lab, state = minor_lab
    pinned = versions_for(minor).kubernetes
    assert state.kubernetes_version == pinned
    context = ["--kubeconfig", state.kubeconfig, "--context", state.admin_context]
    version = subprocess.run(["kubectl", "version", "-o", "json", *context], capture_output=True,
                             text=True, timeout=60)
    assert version.returncode == 0, version.stderr
    assert json.loads(version.stdout)["serverVersion"]["gitVersion"] == pinned

    expected = served_defaults(minor)
    assert _aggregated_formats(state.server, state.pki_dir) == set(expected.aggregated_discovery)
    discovery = json.loads(crdscope("probe", "discovery", "--json", *context).stdout)
    assert discovery["error"] is None
    assert discovery["mode"] == ("aggregated" if expected.aggregated_discovery else "legacy")
    throttling = json.loads(crdscope("probe", "throttling", "--json", *context).stdout)
    assert throttling["error"] is None and throttling["flowcontrol_api"] == expected.flowcontrol

    listed = crdscope("lab", "versions", "--json")
    row = next(json.loads(line) for line in listed.stdout.splitlines() if json.loads(line).get("minor") == minor)
    assert row["kubernetes"] == pinned and row["built"] and row["serves"] == expected.notes()
    assert row["prerelease"] is is_prerelease(pinned)


def test_each_minor_takes_a_load_and_reports_its_health(minor_lab):
    minor, lab, state = minor_lab
    context = ["--kubeconfig", state.kubeconfig, "--context", state.admin_context]
    done = crdscope("load", "synthetic:60", "--seed", minor.replace(".", ""), "--json", *context, timeout=600)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["established"] == 60 and summary["failed"] == 0
    health = json.loads(crdscope("probe", "health", "--json", *context).stdout)
    assert health["error"] is None and health["ready"] is True and health["rss_bytes"] > 50 * 2**20
    openapi = json.loads(crdscope("probe", "openapi", "--json", *context).stdout)
    assert openapi["error"] is None and openapi["v3_status"] == 200
