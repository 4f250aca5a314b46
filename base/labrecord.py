"""What a running lab records about itself, for every room that needs to find or reach it.

The lab (:mod:`lab.controlplane`) writes ``state.json`` when it starts a control plane; the loader
(is this context a lab? where is its registry?), the front ends and the benchmarks read it.  Reading
needs nothing of the lab's machinery, so it lives here, below both.
"""

from __future__ import annotations

import json
import os
import ssl
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from crdscope.base.errors import LabError
from crdscope.base.paths import state_dir

STATE_VERSION = 1


def lab_home(name: str = "") -> Path:
    """Where a lab's state file lives (``$CRDSCOPE_LAB_HOME`` overrides; named labs below it)."""
    override = os.environ.get("CRDSCOPE_LAB_HOME")
    base = Path(override) if override else state_dir() / "lab"
    return base / "named" / name if name else base


@dataclass
class Component:
    """One running process of the lab (etcd, or one kube-apiserver).

    ``role`` is ``etcd`` or ``apiserver``: a lab may later hold several apiservers
    (``apiserver``, ``apiserver-2``, ...) that share the role but not the name.
    """

    name: str
    argv: list[str]
    log: str
    port: int
    pid: int = 0
    started_at: float = 0.0
    role: str = ""
    #: cgroup directory holding this process (empty: none), for a memory limit.
    cgroup: str = ""
    #: Restarts by the lab's supervisor since ``lab up``.
    restarts: int = 0
    #: Host name seen by this process alone (its own UTS namespace; empty: the machine's).
    hostname: str = ""
    #: Variables added to the environment it starts with (Crossplane reads its settings there).
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.role:
            self.role = "etcd" if self.name == "etcd" else "apiserver"


@dataclass
class LabState:
    """What ``lab up`` started: enough for ``status``, ``down`` and faults."""

    run_dir: str
    kubeconfig: str
    server: str
    kubernetes_version: str
    binaries_origin: str
    components: dict[str, Component] = field(default_factory=dict)
    started_at: float = 0.0
    version: int = STATE_VERSION
    name: str = ""
    admin_context: str = "crdscope-lab"
    restricted_context: str = "crdscope-lab-restricted"
    memory_limit: int = 0
    supervisor_pid: int = 0
    #: The supervisor's log of kills and restarts (JSON lines), empty when unsupervised.
    events_log: str = ""
    #: Restart dead kube-apiservers (a memory limit's kubelet); Crossplane's processes always are.
    supervise_apiservers: bool = False
    #: Crossplane's version when ``lab up --crossplane`` (or ``lab crossplane``) started it.
    crossplane_version: str = ""
    crossplane_metrics_port: int = 0
    #: Docker's ``config.json`` with the credentials of the lab's registry when it asks for them
    #: (``--registry-auth``); empty: the registry is open.
    registry_config: str = ""

    @property
    def pki_dir(self) -> Path:
        return Path(self.run_dir) / "pki"

    def apiservers(self) -> list[Component]:
        """Every kube-apiserver of the lab (one today; several behind a balancer later)."""
        return [c for c in self.components.values() if c.role == "apiserver"]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LabState:
        components = {k: Component(**v) for k, v in data.pop("components", {}).items()}
        return cls(components=components, **data)


def admin_tls(pki: Path) -> ssl.SSLContext:
    """TLS context of the lab's admin user (its CA plus the admin client certificate)."""
    context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    context.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
    return context


def proc_state(pid: int) -> str:
    """The one-letter state of ``pid`` from /proc (empty when unreadable)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def pid_alive(pid: int) -> bool:
    """True while ``pid`` runs (zombies count as gone, and are reaped if ours)."""
    if pid <= 0:
        return False
    try:
        reaped, _ = os.waitpid(pid, os.WNOHANG)
        if reaped == pid:
            return False
    except ChildProcessError:
        pass  # not our child: started by another crdscope command
    state = proc_state(pid)
    if state:
        return state not in ("Z", "X")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_state(state_file: Path) -> LabState | None:
    """The lab recorded in ``state_file``, or None when none is up."""
    try:
        data = json.loads(state_file.read_text())
    except FileNotFoundError:
        return None
    except ValueError:
        raise LabError(f"lab state file {state_file} is corrupt; "
                       "remove it and run `crdscope lab up`") from None
    if data.get("version") != STATE_VERSION:
        raise LabError(f"lab state file {state_file} is from another crdscope version")
    return LabState.from_json(data)


def require_state(name: str = "", home: Path | None = None) -> LabState:
    """The running lab's state (``name``: a named lab), or a clear error (exit 3: nothing to reach)."""
    state = read_state((Path(home) if home else lab_home(name)) / "state.json")
    if state is None:
        which = f" named {name}" if name else ""
        up = f"crdscope lab up --name {name}" if name else "crdscope lab up"
        raise LabError(f"no lab{which} is up; run `{up}`", exit_code=3)
    return state


def lab_registry(lab_name: str = "") -> str:
    """``127.0.0.1:PORT`` of the registry of the lab ``lab_name``: where packages are pushed."""
    state = require_state(lab_name)
    registry = state.components.get("registry")
    if registry is None:
        which = f" --name {lab_name}" if lab_name else ""
        raise LabError(f"the lab has no registry; start Crossplane with `crdscope lab crossplane{which}`",
                       exit_code=3)
    if not pid_alive(registry.pid):
        raise LabError(f"the lab's registry (pid {registry.pid}) is not running; see `crdscope lab status`",
                       exit_code=3)
    return f"127.0.0.1:{registry.port}"
