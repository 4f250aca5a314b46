"""Shared fixtures: one real lab (etcd + kube-apiserver) per test session."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from collections.abc import Iterator
from pathlib import Path

import pytest

# Two workers under `make test` (pytest-xdist): modules kept whole, the longest first, `alone` tests alone.
from tests.scheduling import (  # noqa: F401 - hooks, registered by being in this conftest
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_runtest_protocol,
)

ROOT = Path(__file__).resolve().parent.parent
SHARED_CRDS = ROOT.parent / "shared" / "crds"


@pytest.fixture(scope="session", autouse=True)
def _isolated_environment(tmp_path_factory: pytest.TempPathFactory):
    """Keep tests away from the user's kubeconfig, kubectl cache and XDG dirs."""
    base = tmp_path_factory.mktemp("home")
    saved = {k: os.environ.get(k) for k in ("KUBECONFIG", "KUBECACHEDIR", "XDG_CONFIG_HOME",
                                             "XDG_DATA_HOME", "XDG_STATE_HOME", "CRDSCOPE_LAB_HOME")}
    # Built binaries are shared with the developer's cache (XDG_CACHE_HOME is kept).
    os.environ["KUBECONFIG"] = str(base / "no-kubeconfig")
    os.environ["KUBECACHEDIR"] = str(base / "kube-cache")
    os.environ["XDG_CONFIG_HOME"] = str(base / "config")
    os.environ["XDG_DATA_HOME"] = str(base / "data")
    os.environ["XDG_STATE_HOME"] = str(base / "state")
    os.environ["CRDSCOPE_LAB_HOME"] = str(base / "lab-home")
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(autouse=True)
def _no_config_left_for_the_next_test():
    """A test that writes the session's config.toml changes the thresholds of every test after it on its
    worker (the order is random): write a config of the test's own (monkeypatch XDG_CONFIG_HOME)."""
    yield
    leaked = Path(os.environ["XDG_CONFIG_HOME"]) / "crdscope" / "config.toml"
    if leaked.exists():
        leaked.unlink()
        pytest.fail(f"the test left {leaked}: give it a config folder of its own", pytrace=False)


@dataclass
class LabHandle:
    """A running lab and conveniences to talk to it."""

    lab: object
    state: object
    kubeconfig: str
    admin_context: str = "crdscope-lab"
    restricted_context: str = "crdscope-lab-restricted"
    _clusters: list = field(default_factory=list)

    @property
    def server(self) -> str:
        return self.state.server

    def kubectl(self, *args: str, context: str | None = None, check: bool = True,
                input: str | None = None, env: dict | None = None, timeout: float = 300):
        """Run the real kubectl against the lab; returns the CompletedProcess."""
        argv = ["kubectl", f"--kubeconfig={self.kubeconfig}", f"--context={context or self.admin_context}", *args]
        done = subprocess.run(argv, capture_output=True, text=True, input=input, timeout=timeout,
                              env={**os.environ, **(env or {})})
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} failed: {done.stderr.strip()}")
        return done

    def kubectl_json(self, *args: str, context: str | None = None):
        return json.loads(self.kubectl(*args, "-o", "json", context=context).stdout)

    def cluster(self, context: str | None = None):
        """A connection.cluster.Cluster for the lab (close it, or use ``async with``)."""
        from crdscope.connection.cluster import Cluster

        return Cluster.connect(self.kubeconfig, context or self.admin_context)


def _binaries():
    from crdscope.lab.binaries import ensure_binaries

    return ensure_binaries(progress=lambda line: print(line, file=sys.stderr))


@pytest.fixture(scope="session")
def lab_binaries():
    """kube-apiserver and etcd (built from Go modules on first use; `make test` builds first)."""
    return _binaries()


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory, lab_binaries):
    """One real lab for the whole session (for each worker under xdist); torn down at the end."""
    yield from own_lab(tmp_path_factory.mktemp("session-lab"), lab_binaries)


def own_lab(home: Path, binaries) -> Iterator[LabHandle]:
    """A lab started in ``home`` for a fixture to yield, torn down after it."""
    from crdscope.lab.controlplane import Lab

    the_lab = Lab(home)
    state = the_lab.up(binaries)
    try:
        yield LabHandle(lab=the_lab, state=state, kubeconfig=state.kubeconfig)
    finally:
        the_lab.down()


@pytest.fixture
def fresh_lab(tmp_path_factory: pytest.TempPathFactory, lab_binaries):
    """A lab of the test's own, for tests that kill, stop or restart it or measure its memory."""
    yield from own_lab(tmp_path_factory.mktemp("own-lab"), lab_binaries)


@pytest.fixture(scope="module")
def module_lab(tmp_path_factory: pytest.TempPathFactory, lab_binaries):
    """A lab of the module's own: for modules whose figures depend on what the server has served.

    The session lab's /metrics grows with every resource the tests before touched (request and
    storage histograms are kept per resource for the life of the process, CRDs deleted or not).
    """
    yield from own_lab(tmp_path_factory.mktemp("module-lab"), lab_binaries)


@pytest.fixture
def shared_crds() -> Path:
    """The folder of real Crossplane CRD archives beside the checkout."""
    if not SHARED_CRDS.is_dir():
        pytest.skip(f"{SHARED_CRDS} is absent (real Crossplane CRD sets live beside the checkout)")
    return SHARED_CRDS


@pytest.fixture(scope="session")
def kubectl_bin() -> str:
    path = shutil.which("kubectl")
    if not path:
        pytest.fail("kubectl is required as the reference client")
    return path


@pytest.fixture
def webhook_server():
    """A real TLS webhook on loopback (``tests/webhook_server.py``): a CRD's conversion webhook and an
    admission webhook the lab reaches by URL, healthy at first; ``slow()`` and ``stop()`` fault it,
    ``start()`` brings it back on the same port.  Closed after the test."""
    from tests.webhook_server import WebhookServer

    server = WebhookServer().start()
    yield server
    server.close()
