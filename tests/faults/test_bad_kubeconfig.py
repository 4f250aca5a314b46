"""Bad kubeconfigs: one clear line each, exit code 2, no traceback (the real CLI, as a subprocess).

Each broken kubeconfig is derived from the lab's working one, so that exactly
one thing is wrong.  The cases that fail before any connection are run through
every command that reads a kubeconfig; the ones only a connection reveals
(wrong CA) through ``crdscope probe version``.
"""

from __future__ import annotations

import base64
import datetime as dt
import os
from pathlib import Path

import pytest
import yaml

from crdscope.lab.pki import CertificateAuthority
from tests.faults.helpers import crdscope

pytestmark = pytest.mark.lab

#: Commands that read a kubeconfig before doing anything (none of them may write here).
COMMANDS = {
    "probe": ("probe", "version"),
    "watch": ("watch", "--headless", "--duration", "5s"),
    "load": ("load", "synthetic:2", "--seed", "9001"),
    "clean": ("clean", "--yes"),
}


def one_clear_line(done, *words: str) -> str:
    """The run failed with exit code 2 and exactly one stderr line naming ``words``."""
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, (done.returncode, done.stdout[-500:], done.stderr[-1500:])
    assert "Traceback" not in done.stdout + done.stderr
    assert len(lines) == 1 and lines[0].startswith("crdscope: "), done.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def lab_document(lab) -> dict:
    return yaml.safe_load(Path(lab.kubeconfig).read_text())


def write(path: Path, document: dict | str) -> str:
    path.write_text(document if isinstance(document, str) else yaml.safe_dump(document))
    os.chmod(path, 0o600)
    return str(path)


def with_exec_plugin(lab, tmp_path: Path, script: str) -> str:
    """The lab's kubeconfig whose admin user gets its credential from an exec plugin ``script``."""
    plugin = tmp_path / "plugin.sh"
    plugin.write_text("#!/bin/sh\n" + script)
    plugin.chmod(0o755)
    document = lab_document(lab)
    for user in document["users"]:
        user["user"] = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin),
                                 "interactiveMode": "Never"}}
    return write(tmp_path / "kubeconfig", document)


@pytest.fixture
def broken(lab, tmp_path: Path):
    """name -> (kubeconfig path, words the error line must contain)."""
    missing = tmp_path / "nowhere" / "kubeconfig"
    invalid = write(tmp_path / "invalid.yaml", "apiVersion: v1\nclusters: [\n  - name: x\n")
    expired_path = tmp_path / "expired.yaml"
    past = dt.datetime.now(dt.UTC) - dt.timedelta(days=2)
    lab.lab.mint_user("expired-user", path=expired_path, not_before=past - dt.timedelta(days=30), not_after=past)
    return {
        "missing file": (str(missing), ("does not exist", str(missing))),
        "invalid YAML": (invalid, ("line 3", "invalid.yaml")),
        "unknown context": (lab.kubeconfig, ("context 'no-such-context' not found", "crdscope-lab")),
        "expired client cert": (str(expired_path), ("client certificate of user 'expired-user' expired on",)),
    }


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_broken_kubeconfig_is_one_line_and_exit_2(lab, broken, command):
    before = lab.kubectl("get", "crd", "-o", "name").stdout
    for name, (kubeconfig, words) in broken.items():
        extra = ("--context", "no-such-context") if name == "unknown context" else ()
        done = crdscope(*COMMANDS[command], "--kubeconfig", kubeconfig, *extra, timeout=120)
        one_clear_line(done, *words)
    assert lab.kubectl("get", "crd", "-o", "name").stdout == before  # nothing was loaded or cleaned


def test_an_exec_plugin_that_fails_is_one_line(lab, tmp_path: Path):
    kubeconfig = with_exec_plugin(lab, tmp_path, "echo 'token service says no' >&2\nexit 7\n")
    done = crdscope("probe", "version", "--kubeconfig", kubeconfig)
    one_clear_line(done, "exec plugin 'plugin.sh'", "failed (exit 7)", "token service says no")


def test_an_exec_plugin_that_hangs_is_cut_off_by_its_deadline(lab, tmp_path: Path):
    from crdscope.connection.credentials import EXEC_TIMEOUT_SECONDS

    kubeconfig = with_exec_plugin(lab, tmp_path, "sleep 3600\n")
    done = crdscope("probe", "version", "--kubeconfig", kubeconfig, timeout=EXEC_TIMEOUT_SECONDS + 60)
    one_clear_line(done, "exec plugin 'plugin.sh'", f"did not answer within {EXEC_TIMEOUT_SECONDS:g}s")


def test_a_wrong_ca_is_one_line_and_exit_2(lab, tmp_path: Path):
    document = lab_document(lab)
    document["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(
        CertificateAuthority("someone-else").pair().cert_pem).decode()
    other_ca = write(tmp_path / "other-ca.yaml", document)
    done = crdscope("probe", "version", "--kubeconfig", other_ca)
    one_clear_line(done, "TLS verification failed for", lab.server)
    # The headless watcher fails fast too: no retry can make a wrong CA right.
    done = crdscope("watch", "--headless", "--duration", "60s", "--kubeconfig", other_ca)
    one_clear_line(done, "TLS verification failed for", lab.server)

    document["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(b"not a PEM").decode()
    done = crdscope("probe", "version", "--kubeconfig", write(tmp_path / "garbage-ca.yaml", document))
    one_clear_line(done, "cannot load CA of context 'crdscope-lab'")
