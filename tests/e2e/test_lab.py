"""The lab is a real control plane: kubectl and crdscope agree about it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crdscope.lab.controlplane import pid_alive
from crdscope.connection.cluster import Cluster
from crdscope.base.errors import ClusterError, ConfigError

CRDSCOPE = [sys.executable, "-m", "crdscope.cli.main"]


def crdscope(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*CRDSCOPE, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def test_probe_version_matches_kubectl(lab):
    done = crdscope("probe", "version", "--json", "--kubeconfig", lab.kubeconfig)
    assert done.returncode == 0, done.stderr
    sample = json.loads(done.stdout)
    reference = lab.kubectl_json("version")["serverVersion"]
    assert sample["git_version"] == reference["gitVersion"]
    assert (sample["major"], sample["minor"]) == (reference["major"], reference["minor"])
    assert 0 < sample["seconds"] < 30
    assert sample["error"] is None


async def test_restricted_user_may_discover_but_not_create(lab):
    async with lab.cluster(lab.restricted_context) as cluster:
        apis = await cluster.client.get("/apis")
        assert apis.status_code == 200
        crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "widgets.example.test"}}
        created = await cluster.client.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=crd)
        assert created.status_code == 403
        listed = await cluster.client.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
        assert listed.status_code == 200
        with pytest.raises(ClusterError) as caught:
            from crdscope.connection.cluster import raise_for_status

            raise_for_status(created)
        # The one line names the missing permission, as the server states it.
        assert 'cannot create resource "customresourcedefinitions"' in str(caught.value)
    # kubectl sees the same permissions.
    assert lab.kubectl("auth", "can-i", "create", "crd", context=lab.restricted_context,
                       check=False).stdout.strip() == "no"
    assert lab.kubectl("auth", "can-i", "get", "/metrics", context=lab.restricted_context,
                       check=False).stdout.strip() == "yes"


async def test_unreachable_server_is_one_line(lab, tmp_path: Path):
    from crdscope.lab.controlplane import free_port

    config_text = Path(lab.kubeconfig).read_text().replace(lab.server, f"https://127.0.0.1:{free_port()}")
    path = tmp_path / "kubeconfig"
    path.write_text(config_text)
    done = crdscope("probe", "version", "--kubeconfig", str(path))
    assert done.returncode == 3  # README: the cluster could not be reached
    assert "connection refused" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_wrong_ca_is_a_tls_error(lab, tmp_path: Path):
    import base64

    from crdscope.lab.pki import CertificateAuthority

    import yaml

    document = yaml.safe_load(Path(lab.kubeconfig).read_text())
    document["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(
        CertificateAuthority("someone-else").pair().cert_pem).decode()
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(document))
    done = crdscope("probe", "version", "--kubeconfig", str(path))
    assert done.returncode == 2  # README: bad configuration (the kubeconfig's CA does not verify the server)
    assert "TLS verification failed" in done.stderr and "Traceback" not in done.stderr


async def test_unknown_client_certificate_is_401(lab, tmp_path: Path):
    import base64

    import yaml

    from crdscope.lab.pki import CertificateAuthority

    stranger = CertificateAuthority("stranger").client("mallory", ["system:masters"])
    document = yaml.safe_load(Path(lab.kubeconfig).read_text())
    for user in document["users"]:
        user["user"]["client-certificate-data"] = base64.b64encode(stranger.cert_pem).decode()
        user["user"]["client-key-data"] = base64.b64encode(stranger.key_pem).decode()
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(document))
    async with Cluster.connect(str(path)) as cluster:
        with pytest.raises(ClusterError, match="401"):
            await cluster.get_json("/apis")


def test_lab_up_and_down_leave_nothing_behind(lab_binaries, tmp_path: Path):
    env = {"CRDSCOPE_LAB_HOME": str(tmp_path / "home")}
    up = crdscope("lab", "up", "--apiserver-bin", str(lab_binaries.apiserver),
                  "--etcd-bin", str(lab_binaries.etcd), env=env)
    assert up.returncode == 0, up.stderr
    status = json.loads(crdscope("lab", "status", "--json", env=env).stdout)
    assert status["ready"] is True
    pids = [c["pid"] for c in status["components"].values()]
    assert len(pids) == 2 and all(pid_alive(pid) for pid in pids)
    run_dir = Path(status["run_dir"])
    kubeconfig = crdscope("lab", "kubeconfig", env=env).stdout.strip()
    assert kubeconfig == status["kubeconfig"] and Path(kubeconfig).exists()
    # A second `up` while one runs is refused clearly.
    again = crdscope("lab", "up", "--apiserver-bin", str(lab_binaries.apiserver),
                     "--etcd-bin", str(lab_binaries.etcd), env=env)
    assert again.returncode != 0 and "already up" in again.stderr

    down = crdscope("lab", "down", env=env)
    assert down.returncode == 0, down.stderr
    assert not any(pid_alive(pid) for pid in pids)
    assert not run_dir.exists()
    after = crdscope("lab", "status", env=env)  # no lab up is an answer, not a failure (issue 37)
    assert after.returncode == 0 and "no lab is up" in after.stdout


def test_missing_binaries_and_go_is_a_clear_error(tmp_path: Path):
    env = {"PATH": str(tmp_path), "KUBEBUILDER_ASSETS": "", "XDG_CACHE_HOME": str(tmp_path / "cache"),
           "CRDSCOPE_LAB_HOME": str(tmp_path / "home")}
    done = subprocess.run([sys.executable, "-m", "crdscope.cli.main", "lab", "up"], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=60)
    assert done.returncode == 1  # README: a lab that could not be built or started
    line = done.stderr.strip()
    assert len(line.splitlines()) == 1
    for way in ("install Go", "KUBEBUILDER_ASSETS", "--apiserver-bin", "PATH"):
        assert way in line


def test_unknown_context_on_the_lab(lab):
    with pytest.raises(ConfigError):
        Cluster.connect(lab.kubeconfig, "not-a-context")


@pytest.mark.parametrize(("args", "words", "code"), [
    (["--memory-limit", "10x"], ["cannot read memory size", "768Mi"], 2),  # a bad flag: configuration
    (["--memory-limit", "16Mi"], ["below 64 MiB"], 2),
    (["--kubernetes", "1.99"], ["not supported", "1.26", "1.37"], 2),
    (["--kubernetes", "1.26", "--apiserver-bin", "/bin/true", "--etcd-bin", "/bin/true"], ["pass one"], 2),
    (["--", "max-requests-inflight=5"], ["--flag=value"], 2),
    (["--name", "a/b"], ["letters, digits"], 2),
])
def test_bad_lab_up_options_are_one_line(args: list[str], words: list[str], code: int, tmp_path: Path):
    done = crdscope("lab", "up", *args, env={"CRDSCOPE_LAB_HOME": str(tmp_path / "home")}, timeout=60)
    assert done.returncode == code, done.stderr
    line = done.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line
    for word in words:
        assert word in line
    assert not (tmp_path / "home").exists() or not any((tmp_path / "home").rglob("state.json"))


def test_memory_limit_without_a_writable_cgroup_is_one_line(tmp_path: Path):
    # A cgroup root with neither a v1 memory hierarchy nor a v2 memory controller.
    (tmp_path / "cgroup").mkdir()
    done = crdscope("lab", "up", "--memory-limit", "1Gi",
                    env={"CRDSCOPE_CGROUP_ROOT": str(tmp_path / "cgroup"),
                         "CRDSCOPE_LAB_HOME": str(tmp_path / "home")}, timeout=60)
    assert done.returncode == 1  # something failed (4 is `load`'s skipped names alone)
    line = done.stderr.strip()
    assert len(line.splitlines()) == 1 and "needs a cgroup memory controller" in line


def test_lab_versions_lists_every_supported_minor():
    from crdscope.lab.binaries import supported_minors

    done = crdscope("lab", "versions", timeout=60)
    assert done.returncode == 0, done.stderr
    listed = [line.split()[0] for line in done.stdout.splitlines() if line[:1].isdigit()]
    assert listed == supported_minors() and {"1.26", "1.30", "1.33", "1.37", "1.38"} <= set(listed)
    # Every minor from the oldest to the newest, none skipped.
    numbers = [int(minor.split(".")[1]) for minor in listed]
    assert numbers == list(range(numbers[0], numbers[-1] + 1)) and numbers[0] == 26
