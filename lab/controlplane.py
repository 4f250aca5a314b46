"""A real etcd + kube-apiserver on loopback that outlives the command that started it.

``Lab.up()`` starts both as detached processes in a fresh temporary run
directory (data, certificates, logs, kubeconfig) and records them in a state
file under ``$XDG_STATE_HOME/crdscope/lab/`` (or ``$CRDSCOPE_LAB_HOME``), so
``lab status``/``lab down`` from another terminal find them.  Faults for the
reliability tests (kill, stop, start) act on the recorded processes.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from collections.abc import Callable

import httpx

from crdscope.probes.paths import state_dir

from . import rbac
from .binaries import Binaries, LabError
from .kubeconfig import ADMIN_CONTEXT, RESTRICTED_CONTEXT, write_kubeconfig
from .pki import CertificateAuthority, signing_key_pem

COMPONENTS = ("etcd", "apiserver")
READY_TIMEOUT_SECONDS = 180.0
STOP_GRACE_SECONDS = 10.0
PORT_ATTEMPTS = 5
STATE_VERSION = 1


def lab_home() -> Path:
    """Where the lab's state file lives (``$CRDSCOPE_LAB_HOME`` overrides)."""
    override = os.environ.get("CRDSCOPE_LAB_HOME")
    return Path(override) if override else state_dir() / "lab"


@dataclass
class Component:
    """One running process of the lab."""

    name: str
    argv: list[str]
    log: str
    port: int
    pid: int = 0
    started_at: float = 0.0


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

    @property
    def pki_dir(self) -> Path:
        return Path(self.run_dir) / "pki"

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> LabState:
        components = {k: Component(**v) for k, v in data.pop("components", {}).items()}
        return cls(components=components, **data)


# --------------------------------------------------------------------------- processes


def admin_tls(pki: Path) -> ssl.SSLContext:
    """TLS context of the lab's admin user (its CA plus the admin client certificate)."""
    context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    context.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
    return context


def port_bindable(port: int, timeout: float = 0.0) -> bool:
    """Whether a listener could bind 127.0.0.1:``port``, waiting up to ``timeout`` seconds for it."""
    deadline = time.monotonic() + timeout
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Go's listeners do
            try:
                sock.bind(("127.0.0.1", port))
                return True
            except OSError:
                pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


def free_port() -> int:
    """A port that was free on 127.0.0.1 a moment ago (taken ports are retried).

    Chosen below the kernel's ephemeral range: a restarted component must get its port back,
    and an outgoing connection elsewhere on the machine may be holding any ephemeral port.
    """
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 0
    if low > 12000:
        for _ in range(50):
            port = random.randrange(10000, low)
            if port_bindable(port):
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except (FileNotFoundError, IndexError):
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def pid_is(component: Component) -> bool:
    """True when ``component.pid`` still runs the recorded binary (no pid reuse)."""
    if not pid_alive(component.pid):
        return False
    try:
        cmdline = Path(f"/proc/{component.pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return True  # no /proc: trust the pid
    return bool(cmdline) and cmdline[0].decode(errors="replace") == component.argv[0]


def tail(path: str | Path, lines: int = 15) -> str:
    """The last lines of a log file, for a lab that died."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 16384))
            text = handle.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


SPAWN_MARKER = "--- crdscope lab: started "


def _spawn(component: Component) -> None:
    log = open(component.log, "ab")  # noqa: SIM115 - handed to the child
    try:
        # Logs are appended across restarts; the marker lets checks read only this run's lines.
        log.write(f"{SPAWN_MARKER}{Path(component.argv[0]).name} at {time.strftime('%H:%M:%S')} ---\n".encode())
        log.flush()
        process = subprocess.Popen(
            component.argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # outlives `crdscope lab up`, not killed by its ^C
            close_fds=True,
        )
    finally:
        log.close()
    component.pid = process.pid
    component.started_at = time.time()


def _signal(component: Component, signum: int) -> bool:
    if not pid_is(component):
        return False
    try:
        os.kill(component.pid, signum)
    except ProcessLookupError:
        return False
    return True


def _terminate(component: Component, grace: float = STOP_GRACE_SECONDS) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds; returns once the pid is gone."""
    if not _signal(component, signal.SIGCONT):  # a stopped process cannot handle SIGTERM
        return
    _signal(component, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while pid_alive(component.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if pid_alive(component.pid):
        _signal(component, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while pid_alive(component.pid) and time.monotonic() < deadline:
            time.sleep(0.05)


# --------------------------------------------------------------------------- the lab


class Lab:
    """A local control plane recorded in ``home/state.json``."""

    def __init__(self, home: Path | None = None) -> None:
        self.home = Path(home) if home else lab_home()
        self.state_file = self.home / "state.json"

    # -- state -----------------------------------------------------------------
    def state(self) -> LabState | None:
        """The recorded lab, or None when none is up."""
        try:
            data = json.loads(self.state_file.read_text())
        except FileNotFoundError:
            return None
        except ValueError:
            raise LabError(f"lab state file {self.state_file} is corrupt; remove it and run `crdscope lab up`") from None
        if data.get("version") != STATE_VERSION:
            raise LabError(f"lab state file {self.state_file} is from another crdscope version")
        return LabState.from_json(data)

    def _save(self, state: LabState) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        temporary = self.state_file.with_suffix(".tmp")
        temporary.write_text(json.dumps(state.to_json(), indent=2))
        os.replace(temporary, self.state_file)

    def require(self) -> LabState:
        """The running lab's state, or a clear error."""
        state = self.state()
        if state is None:
            raise LabError("no lab is up; run `crdscope lab up`")
        return state

    # -- up --------------------------------------------------------------------
    def up(self, binaries: Binaries, *, say: Callable[[str], None] = lambda _: None) -> LabState:
        """Start etcd and kube-apiserver, wait for ``/readyz``, write the kubeconfig."""
        existing = self.state()
        if existing is not None:
            if all(pid_is(c) for c in existing.components.values()):
                raise LabError(f"a lab is already up at {existing.server}; `crdscope lab down` first")
            self.down()  # leftovers of a dead lab
        run_dir = Path(tempfile.mkdtemp(prefix="crdscope-lab-"))
        try:
            state = self._start(binaries, run_dir, say)
        except BaseException:
            self._cleanup_failed(run_dir)
            raise
        return state

    def _cleanup_failed(self, run_dir: Path) -> None:
        state = self.state()
        if state is not None:
            for component in state.components.values():
                _terminate(component, grace=3)
            self.state_file.unlink(missing_ok=True)
        shutil.rmtree(run_dir, ignore_errors=True)

    def _start(self, binaries: Binaries, run_dir: Path, say: Callable[[str], None]) -> LabState:
        pki = run_dir / "pki"
        ca = CertificateAuthority()
        ca_cert, _ = ca.pair().write(pki, "ca")
        serving_cert, serving_key = ca.serving(["127.0.0.1", "localhost", "::1"]).write(pki, "apiserver")
        admin = ca.client("crdscope-lab-admin", ["system:masters"])
        restricted = ca.client(rbac.RESTRICTED_USER, [])
        sa_key, sa_pub = signing_key_pem()
        (pki / "sa.key").write_bytes(sa_key)
        (pki / "sa.pub").write_bytes(sa_pub)
        (run_dir / "logs").mkdir()

        state = LabState(
            run_dir=str(run_dir),
            kubeconfig=str(run_dir / "kubeconfig"),
            server="",
            kubernetes_version=binaries.kubernetes_version,
            binaries_origin=binaries.origin,
            started_at=time.time(),
        )
        admin.write(pki, "admin")

        for attempt in range(1, PORT_ATTEMPTS + 1):
            etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
            etcd = Component(
                name="etcd",
                argv=[
                    str(binaries.etcd),
                    "--name=lab",
                    f"--data-dir={run_dir / 'etcd-data'}",
                    f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
                    f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
                    f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                    f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                    f"--initial-cluster=lab=http://127.0.0.1:{peer_port}",
                    # A throwaway lab: fsync costs seconds per CRD batch on small disks and
                    # a killed process (not a crashed machine) loses nothing without it.
                    "--unsafe-no-fsync",
                    "--quota-backend-bytes=8589934592",
                    "--log-level=warn",
                ],
                log=str(run_dir / "logs" / "etcd.log"),
                port=etcd_port,
            )
            apiserver = Component(
                name="apiserver",
                argv=[
                    str(binaries.apiserver),
                    f"--etcd-servers=http://127.0.0.1:{etcd_port}",
                    "--bind-address=127.0.0.1",
                    "--advertise-address=127.0.0.1",
                    # The endpoint reconciler refuses loopback addresses; a lab has no Service to keep.
                    "--endpoint-reconciler-type=none",
                    f"--secure-port={api_port}",
                    f"--cert-dir={pki}",
                    f"--tls-cert-file={serving_cert}",
                    f"--tls-private-key-file={serving_key}",
                    f"--client-ca-file={ca_cert}",
                    "--authorization-mode=RBAC",
                    "--enable-priority-and-fairness=true",
                    "--service-cluster-ip-range=10.0.0.0/24",
                    "--allow-privileged=true",
                    "--disable-admission-plugins=ServiceAccount",
                    f"--service-account-issuer=https://127.0.0.1:{api_port}",
                    f"--service-account-key-file={pki / 'sa.pub'}",
                    f"--service-account-signing-key-file={pki / 'sa.key'}",
                    "--v=1",
                ],
                log=str(run_dir / "logs" / "kube-apiserver.log"),
                port=api_port,
            )
            state.server = f"https://127.0.0.1:{api_port}"
            state.components = {"etcd": etcd, "apiserver": apiserver}
            _spawn(etcd)
            self._save(state)
            if not self._wait_etcd(etcd):
                if self._port_clash(etcd) and attempt < PORT_ATTEMPTS:
                    say(f"port taken, retrying etcd on other ports (attempt {attempt + 1})")
                    _terminate(etcd, 2)
                    shutil.rmtree(run_dir / "etcd-data", ignore_errors=True)
                    continue
                raise LabError(f"etcd did not start; last lines of {etcd.log}:", detail=tail(etcd.log))
            say(f"etcd ready on 127.0.0.1:{etcd_port}")
            _spawn(apiserver)
            self._save(state)
            outcome = self._wait_ready(state)
            if outcome == "ready":
                break
            if outcome == "port" and attempt < PORT_ATTEMPTS:
                say(f"port taken, retrying on other ports (attempt {attempt + 1})")
                for component in (apiserver, etcd):
                    _terminate(component, 2)
                shutil.rmtree(run_dir / "etcd-data", ignore_errors=True)
                continue
            raise LabError(
                f"kube-apiserver did not become ready ({outcome}); last lines of {apiserver.log}:",
                detail=tail(apiserver.log),
            )
        say(f"kube-apiserver ready at {state.server}")

        write_kubeconfig(
            Path(state.kubeconfig),
            server=state.server,
            ca_pem=ca.pair().cert_pem,
            users={ADMIN_CONTEXT: admin, RESTRICTED_CONTEXT: restricted},
            current=ADMIN_CONTEXT,
        )
        try:
            rbac.apply_restricted_role(state.server, admin_tls(pki))
        except httpx.HTTPError as exc:
            raise LabError(f"cannot create the restricted user's role: {exc}") from None
        if not state.kubernetes_version:
            state.kubernetes_version = self._server_version(state)
        self._save(state)
        return state

    @staticmethod
    def _port_clash(component: Component) -> bool:
        text = tail(component.log, 40)
        text = text.rsplit(SPAWN_MARKER, 1)[-1].lower()  # this run's lines only
        return "address already in use" in text or "bind:" in text

    def _wait_etcd(self, etcd: Component) -> bool:
        deadline = time.monotonic() + 30
        url = f"http://127.0.0.1:{etcd.port}/health"
        while time.monotonic() < deadline:
            if not pid_alive(etcd.pid):
                return False
            try:
                if httpx.get(url, timeout=1).status_code == 200:
                    return True
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        return False

    def _wait_ready(self, state: LabState) -> str:
        apiserver = state.components["apiserver"]
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        with httpx.Client(base_url=state.server, verify=admin_tls(state.pki_dir), timeout=5) as client:
            while time.monotonic() < deadline:
                if not pid_alive(apiserver.pid):
                    return "port" if self._port_clash(apiserver) else "exited"
                try:
                    if client.get("/readyz").status_code == 200:
                        return "ready"
                except httpx.HTTPError:
                    pass
                time.sleep(0.2)
        return f"not ready after {READY_TIMEOUT_SECONDS:.0f}s"

    @staticmethod
    def _server_version(state: LabState) -> str:
        try:
            response = httpx.get(f"{state.server}/version", verify=admin_tls(state.pki_dir), timeout=5)
            return str(response.json().get("gitVersion", ""))
        except (httpx.HTTPError, ValueError):
            return ""

    # -- down / status -----------------------------------------------------------
    def down(self) -> list[int]:
        """Stop both processes (SIGTERM, then SIGKILL) and remove the run directory."""
        state = self.state()
        if state is None:
            return []
        stopped = []
        # The API server first: it holds connections to etcd.
        for name in ("apiserver", "etcd"):
            component = state.components.get(name)
            if component and component.pid:
                _terminate(component)
                stopped.append(component.pid)
        run_dir = Path(state.run_dir)
        if run_dir.name.startswith("crdscope-lab-"):  # never remove anything we did not create
            shutil.rmtree(run_dir, ignore_errors=True)
        self.state_file.unlink(missing_ok=True)
        return stopped

    def status(self) -> dict:
        """Which processes run, where, and whether the API server is ready."""
        state = self.require()
        components = {}
        for name, component in state.components.items():
            alive = pid_is(component)
            stopped = alive and _proc_state(component.pid) == "T"
            components[name] = {
                "pid": component.pid,
                "port": component.port,
                "state": "stopped" if stopped else ("running" if alive else "dead"),
                "log": component.log,
            }
        return {
            "server": state.server,
            "kubeconfig": state.kubeconfig,
            "kubernetes_version": state.kubernetes_version,
            "binaries": state.binaries_origin,
            "run_dir": state.run_dir,
            "components": components,
            "ready": self._ready(state),
        }

    def _ready(self, state: LabState) -> bool:
        try:
            response = httpx.get(f"{state.server}/readyz", verify=admin_tls(state.pki_dir), timeout=3)
            return response.status_code == 200
        except httpx.HTTPError:
            return False

    # -- faults ------------------------------------------------------------------
    def component(self, name: str) -> Component:
        """A recorded component by name (``apiserver`` or ``etcd``)."""
        state = self.require()
        if name not in state.components:
            raise LabError(f"unknown lab component '{name}' (one of: {', '.join(COMPONENTS)})")
        return state.components[name]

    def kill(self, name: str) -> int:
        """SIGKILL a component; returns its pid once it is gone."""
        component = self.component(name)
        if not _signal(component, signal.SIGKILL):
            raise LabError(f"{name} is not running")
        # A big process can take seconds to unmap its memory; its sockets close only after that.
        deadline = time.monotonic() + 30
        while pid_alive(component.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        return component.pid

    def stop(self, name: str) -> int:
        """SIGSTOP a component (it freezes, its sockets stay open)."""
        component = self.component(name)
        if not _signal(component, signal.SIGSTOP):
            raise LabError(f"{name} is not running")
        return component.pid

    def start(self, name: str, *, wait: bool = True) -> int:
        """SIGCONT a stopped component, or restart a dead one with the same certs, data and ports."""
        state = self.require()
        self.component(name)  # a clear error for an unknown name
        component = state.components[name]  # the object saved and waited on below
        if pid_is(component):
            os.kill(component.pid, signal.SIGCONT)
            return component.pid
        for attempt in range(1, PORT_ATTEMPTS + 1):
            # The same port must be reused (certificates and kubeconfigs name it); after a kill the
            # kernel can hold it for a moment, so wait for it rather than fail on the first bind.
            port_bindable(component.port, timeout=30)
            _spawn(component)
            self._save(state)
            if not wait:
                break
            if name == "etcd":
                if self._wait_etcd(component):
                    break
                if self._port_clash(component) and attempt < PORT_ATTEMPTS:
                    continue
                raise LabError(f"etcd did not restart; last lines of {component.log}:", detail=tail(component.log))
            outcome = self._wait_ready(state)
            if outcome == "ready":
                break
            if outcome == "port" and attempt < PORT_ATTEMPTS:
                continue
            raise LabError(
                f"kube-apiserver did not restart ({outcome}); last lines of {component.log}:",
                detail=tail(component.log),
            )
        return component.pid

    def mint_user(self, user: str, groups: list[str] | tuple[str, ...] = (), *, path: Path | None = None,
                  **validity) -> Path:
        """Write a kubeconfig for a new client-certificate user signed by the lab's CA."""
        state = self.require()
        pki = state.pki_dir
        ca = CertificateAuthority.load((pki / "ca.crt").read_bytes(), (pki / "ca.key").read_bytes())
        pair = ca.client(user, groups, **validity)
        target = path or Path(state.run_dir) / f"kubeconfig-{user}"
        write_kubeconfig(target, server=state.server, ca_pem=ca.pair().cert_pem, users={user: pair}, current=user)
        return target


def _proc_state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""
