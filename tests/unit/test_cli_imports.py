"""The one-shot commands import only what they need (issue 18: start-up is what a person waits for).

Each check runs a fresh interpreter and lists the heavy packages a command path loaded:
``crdscope --help`` loads no asyncio, httpx or rich; reading a plain kubeconfig and
building the cluster client loads neither the ``kubernetes`` package nor cryptography
(an exec plugin still uses the package: tests/unit/test_kubeconfig.py); the lab's
status loads neither httpx, yaml nor cryptography.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import yaml

from crdscope.lab.pki import CertificateAuthority

HEAVY = ("kubernetes", "cryptography", "httpx", "rich", "asyncio", "yaml", "textual", "pygments", "msgspec")


def loaded_after(code: str) -> set[str]:
    """The HEAVY top-level packages present in sys.modules after running ``code``."""
    script = f"{code}\nimport sys, json\nprint(json.dumps(sorted({{m.split('.')[0] for m, v in sys.modules.items() if v is not None}})))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1])) & set(HEAVY)


def test_help_loads_no_network_or_ui_stack():
    code = ("import sys\nfrom crdscope.cli.main import cli\n"
            "try:\n    cli(['--help'], prog_name='crdscope')\nexcept SystemExit:\n    pass")
    assert loaded_after(code) == set()


def test_plain_kubeconfig_and_client_without_kubernetes_or_cryptography(tmp_path: Path):
    ca = CertificateAuthority("imports")
    pair = ca.client("alice", ["devs"])
    config = tmp_path / "config"
    config.write_text(yaml.safe_dump({
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443",
                                               "certificate-authority-data": base64.b64encode(
                                                   ca.pair().cert_pem).decode()}}],
        "users": [{"name": "alice", "user": {
            "client-certificate-data": base64.b64encode(pair.cert_pem).decode(),
            "client-key-data": base64.b64encode(pair.key_pem).decode()}}],
        "contexts": [{"name": "alice", "context": {"cluster": "c", "user": "alice"}}],
        "current-context": "alice"}))
    code = ("import crdscope.cli.main\nfrom crdscope.connection.cluster import Cluster\n"
            f"cluster = Cluster.connect({str(config)!r})\nassert cluster.config.cert_file")
    loaded = loaded_after(code)
    assert not loaded & {"kubernetes", "cryptography", "rich"}, loaded


def test_lab_status_path_loads_no_http_client_yaml_or_cryptography():
    code = "from crdscope.cli.lab import lab\nfrom crdscope.lab.controlplane import Lab, tail\nLab().state()"
    loaded = loaded_after(code)
    assert not loaded & {"httpx", "yaml", "cryptography", "kubernetes", "rich"}, loaded


def test_version_is_read_without_importlib_metadata():
    code = ("import sys\nimport crdscope.base.version as version\n"
            "assert version.USER_AGENT.startswith('crdscope/') and 'importlib.metadata' not in sys.modules")
    assert loaded_after(code) == set()
