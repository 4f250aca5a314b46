"""The one-shot commands import only what they need (issue 18: start-up is what a person waits for).

Each check runs a fresh interpreter and lists the heavy packages a command path loaded:
``crdscope --help`` loads no asyncio, httpx or rich; reading a plain kubeconfig and
building the cluster client loads neither the ``kubernetes`` package nor cryptography
(an exec plugin still uses the package: tests/unit/test_kubeconfig.py); the lab's
status loads neither httpx, yaml nor cryptography; ``probe discovery`` loads no settings
file reader, no date parser and no room above the probes; the commands that talk to no
cluster (rules, report, replay, estimate --kubernetes, mrap --from, package) load no HTTP client.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import yaml

import pytest

from crdscope.lab.pki import CertificateAuthority

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("kubernetes", "cryptography", "httpx", "rich", "asyncio", "yaml", "textual", "pygments", "msgspec")


def loaded_after(code: str) -> set[str]:
    """The HEAVY top-level packages present in sys.modules after running ``code``."""
    script = f"{code}\nimport sys, json\nprint(json.dumps(sorted({{m.split('.')[0] for m, v in sys.modules.items() if v is not None}})))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1])) & set(HEAVY)


def modules_after(code: str) -> set[str]:
    """Every module present in sys.modules after running ``code`` in a fresh interpreter."""
    script = f"{code}\nimport sys, json\nprint(json.dumps(sorted(m for m, v in sys.modules.items() if v is not None)))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def client_certificate_kubeconfig(path: Path) -> Path:
    """A plain kubeconfig whose user has a client certificate (its dates are read on load)."""
    ca = CertificateAuthority("imports")
    pair = ca.client("alice", ["devs"])
    path.write_text(yaml.safe_dump({
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443",
                                               "certificate-authority-data": base64.b64encode(
                                                   ca.pair().cert_pem).decode()}}],
        "users": [{"name": "alice", "user": {
            "client-certificate-data": base64.b64encode(pair.cert_pem).decode(),
            "client-key-data": base64.b64encode(pair.key_pem).decode()}}],
        "contexts": [{"name": "alice", "context": {"cluster": "c", "user": "alice"}}],
        "current-context": "alice"}))
    return path


def test_help_loads_no_network_or_ui_stack():
    code = ("import sys\nfrom crdscope.cli.main import cli\n"
            "try:\n    cli(['--help'], prog_name='crdscope')\nexcept SystemExit:\n    pass")
    assert loaded_after(code) == set()


def test_plain_kubeconfig_and_client_without_kubernetes_or_cryptography(tmp_path: Path):
    config = client_certificate_kubeconfig(tmp_path / "config")
    code = ("import crdscope.cli.main\nfrom crdscope.connection.cluster import Cluster\n"
            f"cluster = Cluster.connect({str(config)!r})\nassert cluster.config.cert_file")
    loaded = loaded_after(code)
    assert not loaded & {"kubernetes", "cryptography", "rich"}, loaded


def test_probe_discovery_loads_only_what_it_uses(tmp_path: Path):
    """What ``crdscope probe discovery`` imports before its first request (issue 45: 2.2x kubectl's cold
    ``api-resources`` at 300 CRDs).  Each module named here was on that path, unused, before."""
    config = client_certificate_kubeconfig(tmp_path / "config")
    code = ("import crdscope.cli.main\nfrom crdscope.connection.cluster import Cluster\n"
            "from crdscope.probes.registry import oneshot\n"
            f"cluster = Cluster.connect({str(config)!r})\noneshot('discovery')\n"
            "from crdscope.probes.discovery import DiscoveryProbe\nDiscoveryProbe(cluster)")
    loaded = modules_after(code)
    unused = {
        "tomllib",  # the settings file: the one-shot probe runs on the code's defaults
        "_strptime",  # a client certificate's dates are read by hand
        "crdscope.base.samples.footprint",  # the footprint's tallies, only when asked for
        "kubernetes", "cryptography", "rich", "textual",
    }
    assert not loaded & unused, sorted(loaded & unused)
    rooms_above = ("session", "findings", "costmodel", "loader", "tui", "lab")
    above = sorted(m for m in loaded if m.startswith("crdscope.") and m.split(".")[1] in rooms_above)
    assert above == [], above


RECORDING = ROOT / "tests" / "data" / "recording-0.1.0-handwritten-encoder.jsonl.xz"


@pytest.mark.parametrize("argv", [
    ["rules"],
    ["report", str(RECORDING)],
    ["replay", "--headless", str(RECORDING)],
    ["estimate", "synthetic:20", "--kubernetes", "1.37", "--json"],
    ["estimate", "synthetic:20", "--kubernetes", "1.37", "--fail-if", "crds_added>100"],
    ["mrap", "--from", str(ROOT / "tests" / "data"), "--json"],
], ids=lambda argv: argv[0] + (" --fail-if" if "--fail-if" in argv else ""))
def test_commands_that_talk_to_no_cluster_load_no_http_client(argv):
    """httpx, httpcore, h2 and anyio are a third of a one-shot command's imports: only for a cluster."""
    code = ("import sys\nfrom crdscope.cli.main import cli\n"
            f"try:\n    cli({argv!r}, prog_name='crdscope')\nexcept SystemExit:\n    pass")
    loaded = {m.split(".")[0] for m in modules_after(code)}
    assert not loaded & {"httpx", "httpcore", "h2", "anyio", "kubernetes", "cryptography"}, sorted(loaded)


def test_lab_status_path_loads_no_http_client_yaml_or_cryptography():
    code = "from crdscope.cli.lab import lab\nfrom crdscope.lab.controlplane import Lab, tail\nLab().state()"
    loaded = loaded_after(code)
    assert not loaded & {"httpx", "yaml", "cryptography", "kubernetes", "rich"}, loaded


def test_version_is_read_without_importlib_metadata():
    code = ("import sys\nimport crdscope.base.version as version\n"
            "assert version.USER_AGENT.startswith('crdscope/') and 'importlib.metadata' not in sys.modules")
    assert loaded_after(code) == set()
