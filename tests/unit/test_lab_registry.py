"""The lab's registry asking for credentials (lab/registry.py): what it writes, checked with the real
htpasswd (Debian's apache2-utils, which `make system-deps` installs); the registry itself runs in
tests/e2e/test_private_registry.py.  And --registry-config on the command line."""

from __future__ import annotations

import base64
import json
import shutil
import stat
import subprocess

import pytest
import yaml
from click.testing import CliRunner

from crdscope.base.labrecord import LabState
from crdscope.lab import registry


@pytest.fixture
def htpasswd() -> str:
    found = shutil.which("htpasswd")
    if found is None:
        pytest.fail("htpasswd is not installed: `make system-deps` (apache2-utils)")
    return found


def test_the_lab_writes_a_bcrypt_htpasswd_a_registry_configuration_and_a_private_docker_config(tmp_path, htpasswd):
    configuration = registry._write_authenticated(tmp_path, 40123, htpasswd)
    folder = tmp_path / registry.AUTH_FOLDER
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "config.json").stat().st_mode) == 0o600
    [(host, entry)] = json.loads((folder / "config.json").read_text())["auths"].items()
    user, _, password = base64.b64decode(entry["auth"]).decode().partition(":")
    assert host == "127.0.0.1:40123" and user == registry.USER and len(password) >= 24
    line = (folder / "htpasswd").read_text().strip()
    assert line.startswith(f"{registry.USER}:$2y$") and password not in line  # bcrypt, the only hash it takes
    verified = subprocess.run([htpasswd, "-v", "-i", str(folder / "htpasswd"), registry.USER], input=password,
                              capture_output=True, text=True, check=False)
    assert verified.returncode == 0, verified.stderr
    wrong = subprocess.run([htpasswd, "-v", "-i", str(folder / "htpasswd"), registry.USER], input=password + "x",
                           capture_output=True, text=True, check=False)
    assert wrong.returncode != 0
    served = yaml.safe_load(configuration.read_text())
    assert served["http"]["addr"] == "127.0.0.1:40123"
    assert served["auth"] == {"htpasswd": {"realm": registry.REALM, "path": str(folder / "htpasswd")}}
    assert password not in configuration.read_text()
    # A second start (another port, after a failed attempt) makes new credentials.
    registry._write_authenticated(tmp_path, 40124, htpasswd)
    assert list(json.loads((folder / "config.json").read_text())["auths"]) == ["127.0.0.1:40124"]


def test_the_pull_secret_is_the_docker_config_as_kubernetes_reads_it(tmp_path):
    state = LabState(run_dir=str(tmp_path), kubeconfig="", server="", kubernetes_version="", binaries_origin="")
    assert registry.pull_secret(state, "crossplane-system") is None  # an open registry: no secret
    config = registry.docker_config("127.0.0.1:40123", "crdscope", "pw")
    (tmp_path / "config.json").write_text(json.dumps(config))
    state.registry_config = str(tmp_path / "config.json")
    secret = registry.pull_secret(state, "crossplane-system")
    assert secret is not None and secret["type"] == "kubernetes.io/dockerconfigjson"
    assert secret["metadata"]["name"] == registry.PULL_SECRET and secret["metadata"]["namespace"] == "crossplane-system"
    assert json.loads(base64.b64decode(secret["data"][".dockerconfigjson"])) == config


def test_registry_auth_without_its_debian_packages_is_one_line_and_exit_2(monkeypatch):
    from crdscope.base.errors import LabError

    monkeypatch.setattr(shutil, "which", lambda name: None if name == "docker-registry" else f"/usr/bin/{name}")
    with pytest.raises(LabError) as raised:
        registry.check_tools()
    assert raised.value.exit_code == 2
    assert str(raised.value) == ("--registry-auth runs Debian's docker-registry with htpasswd: install docker-registry "
                                 "(`make system-deps` does)")


@pytest.mark.parametrize("command", [["estimate", "synthetic:3"], ["mrap", "--from", "x"], ["load", "synthetic:3"],
                                     ["package", "synthetic:3", "--name", "p"]])
def test_registry_config_naming_no_file_is_one_line_and_exit_2_on_every_command_that_pulls(command, tmp_path):
    from crdscope.cli.main import cli
    from crdscope.loader.registry_auth import use_registry_config

    missing = tmp_path / "absent.json"
    try:
        result = CliRunner().invoke(cli, [*command, "--registry-config", str(missing)])
    finally:
        use_registry_config(None)
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [f"crdscope: --registry-config {missing}: no such file"]
