"""A new user's first contact with a named lab (issue 37, item 6), for real.

One named lab for the module, started as the README says (``crdscope lab up --name fc --crossplane``)
in a lab home of its own, with ``KUBECONFIG`` set to its kubeconfig (current context
``crdscope-lab-fc``) and no default lab: every lab command given no ``--name`` must find it from that
context and say so, ``package --push`` must push to its registry, and ``doctor`` on it with its
kube-apiserver stopped (SIGSTOP) must say that the server did not answer, exit 3, and count no load.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.lab

LAB_NAME = "fc"
CONTEXT = f"crdscope-lab-{LAB_NAME}"


def crdscope(env: dict[str, str], *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "crdscope.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **env})


@pytest.fixture(scope="module")
def named_lab(lab_binaries, tmp_path_factory: pytest.TempPathFactory):
    """``lab up --name fc --crossplane`` in a lab home of its own; the env a user has after it."""
    from crdscope.lab.controlplane import Lab

    home = tmp_path_factory.mktemp("first-contact-labs")
    env = {"CRDSCOPE_LAB_HOME": str(home), "KUBECONFIG": str(home / "none")}
    done = crdscope(env, "lab", "up", "--name", LAB_NAME, "--crossplane", "--activation", "none")
    the_lab = Lab(home / "named" / LAB_NAME, name=LAB_NAME)
    try:
        assert done.returncode == 0, done.stderr
        state = the_lab.require()
        assert state.admin_context == CONTEXT
        env["KUBECONFIG"] = state.kubeconfig  # as `lab up` tells the user: export KUBECONFIG=...
        yield env, state
    finally:
        the_lab.down()


def test_lab_commands_find_the_named_lab_from_the_current_context(named_lab):
    env, state = named_lab
    found = f"lab {LAB_NAME}: the one serving the current context {CONTEXT} ({state.server})"
    status = crdscope(env, "lab", "status")
    assert status.returncode == 0, status.stderr
    assert found in status.stderr and f"server: {state.server}" in status.stdout
    as_json = crdscope(env, "lab", "status", "--json")
    assert as_json.returncode == 0, as_json.stderr
    report = json.loads(as_json.stdout)
    assert report["up"] is True and report["name"] == LAB_NAME and report["server"] == state.server
    kubeconfig = crdscope(env, "lab", "kubeconfig")
    assert kubeconfig.returncode == 0 and kubeconfig.stdout.strip() == state.kubeconfig
    assert found in kubeconfig.stderr
    # An explicit --name wins, and says nothing about contexts.
    other = crdscope(env, "lab", "status", "--name", "nope")
    assert other.returncode == 0 and "no lab named nope is up" in other.stdout and "current context" not in other.stderr


def test_package_push_goes_to_the_named_labs_registry(named_lab, tmp_path):
    env, state = named_lab
    registry = f"127.0.0.1:{state.components['registry'].port}"
    done = crdscope(env, "package", "synthetic:3", "--name", "first-contact", "--push", "--json",
                    "--output", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert f"lab {LAB_NAME}: the one serving the current context {CONTEXT}" in done.stderr
    run = json.loads(done.stdout)
    assert run["registry"] == registry
    # Read back from the registry itself with the real crane: the tag is there.
    from crdscope.toolchain.crossplane import cached_binaries

    binaries = cached_binaries()
    assert binaries is not None
    tags = subprocess.run([str(binaries.crane), "ls", f"{registry}/crdscope/first-contact"],
                          capture_output=True, text=True, timeout=60)
    assert tags.returncode == 0, tags.stderr
    assert "v0.1.0" in tags.stdout.split()


def test_doctor_on_a_stopped_apiserver_says_it_did_not_answer(named_lab):
    env, state = named_lab
    stopped = crdscope(env, "lab", "stop", "apiserver")  # no --name: the context's lab
    assert stopped.returncode == 0, stopped.stderr
    try:
        done = crdscope(env, "doctor", "--duration", "3s", "--json", timeout=120)
        assert done.returncode == 3, done.stdout + done.stderr
        report = json.loads(done.stdout)
        assert report["answered"] is False and report["exit_code"] == 3
        assert report["cluster"]["server"] == state.server
        assert report["own_load"]["requests"] == 0 and report["own_load"]["bytes"] == 0
        assert not any("longer --duration" in line for line in report["not_checked"])
        text = crdscope(env, "doctor", "--duration", "3s", timeout=120)
        assert text.returncode == 3
        assert f"The API server at {state.server} did not answer" in text.stdout
        assert "Nothing found" not in text.stdout
    finally:
        started = crdscope(env, "lab", "start", "apiserver")
        assert started.returncode == 0, started.stderr
