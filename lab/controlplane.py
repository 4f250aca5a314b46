"""A real etcd + kube-apiserver on loopback that outlives the command that started it.

``Lab.up()`` starts both as detached processes in a fresh temporary run
directory (data, certificates, logs, kubeconfig) and records them in a state
file under ``$XDG_STATE_HOME/crdscope/lab/`` (or ``$CRDSCOPE_LAB_HOME``), so
``lab status``/``lab down`` from another terminal find them.  A named lab
(``Lab(name="old")``) has its own state directory, ports, run directory and
kubeconfig contexts, so several labs run side by side.  Faults for the
reliability tests (kill, stop, start) act on the recorded processes.

Starting is split in steps: the PKI (:func:`write_pki`), one etcd
(:func:`etcd_component`, :meth:`Lab._start_etcd`) and one kube-apiserver with its
own port, flags and log (:func:`apiserver_component`, :meth:`Lab._start_apiserver`);
the state holds any number of apiserver components (role ``apiserver``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from collections.abc import Callable

from crdscope.base.labrecord import (  # re-exported: the lab's callers know them from here
    Component,
    LabState,
    admin_tls,
    lab_home,
    pid_alive,
    proc_state,
    read_state,
    require_state,
)

from . import balancer, cgroups, rbac
from crdscope.base.errors import LabError

from .binaries import Binaries
from .components import LabOptions, Pki, apiserver_component, etcd_component, write_pki

# httpx, lab.kubeconfig (yaml) and lab.pki (cryptography) are imported where used: a
# quick `crdscope lab status` needs none of them (issue 18: start-up under 150 ms).
from .processes import (  # re-exported: tests and benchmarks import them from here
    free_port,
    pid_is,
    port_bindable,
    port_clash,
    send_signal,
    spawn,
    wait_http,
    tail,
    terminate,
)

__all__ = ["Component", "Lab", "LabOptions", "LabState", "admin_tls", "free_port", "lab_home", "pid_alive",
           "pid_is", "port_bindable", "tail"]

COMPONENTS = ("etcd", "apiserver")
READY_TIMEOUT_SECONDS = 180.0
#: Crossplane's core (or the registry) restarted by the supervisor answers its health path within this.
CROSSPLANE_RESTART_SECONDS = 90.0
PORT_ATTEMPTS = 5


# --------------------------------------------------------------------------- the lab


class Lab:
    """A local control plane recorded in ``home/state.json``."""

    def __init__(self, home: Path | None = None, *, name: str = "") -> None:
        self.name = name
        self.home = Path(home) if home else lab_home(name)
        self.state_file = self.home / "state.json"

    # -- state -----------------------------------------------------------------
    def state(self) -> LabState | None:
        """The recorded lab, or None when none is up."""
        return read_state(self.state_file)

    def save(self, state: LabState) -> None:
        """Write the state atomically (the supervisor and commands may both write it)."""
        self.home.mkdir(parents=True, exist_ok=True)
        temporary = self.state_file.with_suffix(f".tmp{os.getpid()}")
        temporary.write_text(json.dumps(state.to_json(), indent=2))
        os.replace(temporary, self.state_file)

    _save = save

    def require(self) -> LabState:
        """The running lab's state, or a clear error."""
        return require_state(self.name, self.home)

    def up(self, binaries: Binaries, *, say: Callable[[str], None] = lambda _: None,
           options: LabOptions | None = None) -> LabState:
        """Start etcd and kube-apiserver, wait for ``/readyz``, write the kubeconfig."""
        options = options or LabOptions(name=self.name)
        existing = self.state()
        if existing is not None:
            if all(pid_is(c) for c in existing.components.values()):
                raise LabError(f"a lab is already up at {existing.server}; `crdscope lab down` first")
            self.down()  # leftovers of a dead lab
        if options.memory_limit:
            cgroups.check_available()  # a one-line error before anything starts
        run_dir = Path(tempfile.mkdtemp(prefix="crdscope-lab-"))
        try:
            state = self._start(binaries, run_dir, say, options)
            if options.supervised:
                state.supervise_apiservers = True
                self.start_supervisor(state)
        except BaseException:
            self._cleanup_failed(run_dir)
            raise
        return state

    def _cleanup_failed(self, run_dir: Path) -> None:
        state = self.state()
        if state is not None:
            self._stop_all(state, grace=3)
            self.state_file.unlink(missing_ok=True)
        shutil.rmtree(run_dir, ignore_errors=True)

    def _start(self, binaries: Binaries, run_dir: Path, say: Callable[[str], None],
               options: LabOptions) -> LabState:
        from .kubeconfig import context_names

        pki = write_pki(run_dir)
        (run_dir / "logs").mkdir()
        admin_context, restricted_context = context_names(options.name)
        state = LabState(
            run_dir=str(run_dir), kubeconfig=str(run_dir / "kubeconfig"), server="",
            kubernetes_version=binaries.kubernetes_version, binaries_origin=binaries.origin,
            started_at=time.time(), name=options.name, admin_context=admin_context,
            restricted_context=restricted_context, memory_limit=options.memory_limit,
        )
        for attempt in range(1, PORT_ATTEMPTS + 1):
            last = attempt == PORT_ATTEMPTS
            etcd = etcd_component(binaries.etcd, run_dir, free_port(), free_port())
            state.components = {"etcd": etcd}
            if not self._start_etcd(state, etcd, retry=not last, say=say):
                continue
            apiserver = apiserver_component(binaries.apiserver, pki, etcd_port=etcd.port, port=free_port(),
                                            options=options, hostname=replica_hostname(1, options.apiservers))
            if self._start_apiserver(state, apiserver, retry=not last, say=say):
                break
            terminate(etcd, 2)
            shutil.rmtree(run_dir / "etcd-data", ignore_errors=True)
        if options.apiservers > 1:
            self._start_replicas(state, binaries, pki, options, say)
            self._start_balancer(state, say)
        self._finish(state, pki)
        return state

    def _start_replicas(self, state: LabState, binaries: Binaries, pki: Pki, options: LabOptions,
                        say: Callable[[str], None]) -> None:
        """kube-apiservers 2..N on the same etcd, each on its own port (issue 17)."""
        first, etcd = state.components["apiserver"], state.components["etcd"]
        for index in range(2, options.apiservers + 1):
            for attempt in range(1, PORT_ATTEMPTS + 1):
                replica = apiserver_component(
                    binaries.apiserver, pki, etcd_port=etcd.port, port=free_port(), name=replica_name(index),
                    options=options, issuer_port=first.port, hostname=replica_hostname(index, options.apiservers))
                if self._start_apiserver(state, replica, retry=attempt < PORT_ATTEMPTS, say=say):
                    break

    def _start_balancer(self, state: LabState, say: Callable[[str], None]) -> None:
        """haproxy in front of every kube-apiserver; the kubeconfig will name it (lab/balancer.py)."""
        run_dir = Path(state.run_dir)
        backends = [balancer.Backend(c.name, c.port) for c in state.apiservers()]
        for attempt in range(1, PORT_ATTEMPTS + 1):
            port = free_port()
            config = balancer.write_config(run_dir, port, backends)
            component = Component("balancer", balancer.haproxy_argv(config), str(run_dir / "logs" / "haproxy.log"),
                                  port, role="balancer")
            state.components["balancer"] = component
            state.server = f"https://127.0.0.1:{port}"
            spawn(component)
            self.save(state)
            outcome = self._wait_ready(state, component)
            if outcome == "ready":
                balancer.wait_all_up(run_dir, [b.name for b in backends])
                say(f"haproxy ready at {state.server} in front of {len(backends)} kube-apiservers")
                return
            terminate(component, 2)
            if outcome != "port" or attempt == PORT_ATTEMPTS:
                raise LabError(f"haproxy did not start ({outcome}); last lines of {component.log}:",
                               detail=tail(component.log))

    def _start_etcd(self, state: LabState, etcd: Component, *, retry: bool, say: Callable[[str], None]) -> bool:
        """Start etcd and wait for its health; False when its port was taken and ``retry`` allows."""
        spawn(etcd)
        self.save(state)
        if self._wait_etcd(etcd):
            say(f"etcd ready on 127.0.0.1:{etcd.port}")
            return True
        if retry and port_clash(etcd):
            say("port taken, retrying etcd on other ports")
            terminate(etcd, 2)
            shutil.rmtree(Path(state.run_dir) / "etcd-data", ignore_errors=True)
            return False
        raise LabError(f"etcd did not start; last lines of {etcd.log}:", detail=tail(etcd.log))

    def _start_apiserver(self, state: LabState, apiserver: Component, *, retry: bool,
                         say: Callable[[str], None]) -> bool:
        """Start one kube-apiserver (in its cgroup when limited) and wait for its ``/readyz``."""
        state.components[apiserver.name] = apiserver
        if state.memory_limit and not apiserver.cgroup:
            apiserver.cgroup = str(cgroups.create(f"{state.name or 'lab'}-{apiserver.name}-{os.getpid()}",
                                                  state.memory_limit))
        if not state.server:
            state.server = f"https://127.0.0.1:{apiserver.port}"
        spawn(apiserver, join=self._joiner(apiserver))
        self.save(state)
        outcome = self._wait_ready(state, apiserver)
        if outcome == "ready":
            say(f"kube-apiserver ready at https://127.0.0.1:{apiserver.port}")
            return True
        if retry and outcome == "port":
            say("port taken, retrying on other ports")
            terminate(apiserver, 2)
            del state.components[apiserver.name]
            state.server = ""
            return False
        raise LabError(f"kube-apiserver did not become ready ({outcome}); last lines of {apiserver.log}:",
                       detail=tail(apiserver.log))

    @staticmethod
    def _joiner(component: Component) -> Callable[[int], None] | None:
        if not component.cgroup:
            return None
        directory = Path(component.cgroup)
        return lambda pid: cgroups.join(directory, pid)

    def _finish(self, state: LabState, pki: Pki) -> None:
        """Kubeconfig, the restricted user's role and the version the server reports."""
        import httpx

        from .kubeconfig import write_kubeconfig

        write_kubeconfig(
            Path(state.kubeconfig), server=state.server, ca_pem=pki.ca.pair().cert_pem,
            users={state.admin_context: pki.admin, state.restricted_context: pki.restricted},
            current=state.admin_context, cluster=state.admin_context,
        )
        try:
            rbac.apply_restricted_role(state.server, admin_tls(pki.directory))
        except httpx.HTTPError as exc:
            raise LabError(f"cannot create the restricted user's role: {exc}") from None
        # What the binary reports is what runs (a user's binary may differ from its file name).
        state.kubernetes_version = self._server_version(state) or state.kubernetes_version
        self.save(state)

    def start_supervisor(self, state: LabState) -> None:
        """Start ``python -m crdscope.lab.supervisor HOME`` detached, unless it runs already.

        lab/supervisor.py restarts dead API servers (when ``supervise_apiservers``) and Crossplane's processes.
        """
        if state.supervisor_pid and pid_alive(state.supervisor_pid):
            return
        state.events_log = str(Path(state.run_dir) / "logs" / "restarts.jsonl")
        self.save(state)
        with open(Path(state.run_dir) / "logs" / "supervisor.log", "ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "crdscope.lab.supervisor", str(self.home)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, close_fds=True,
            )
        state.supervisor_pid = process.pid
        self.save(state)

    def _wait_etcd(self, etcd: Component) -> bool:
        return wait_http(etcd, 30)

    def _wait_ready(self, state: LabState, apiserver: Component | None = None) -> str:
        import httpx

        apiserver = apiserver or state.components["apiserver"]
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        with httpx.Client(base_url=f"https://127.0.0.1:{apiserver.port}", verify=admin_tls(state.pki_dir),
                          timeout=5) as client:
            while time.monotonic() < deadline:
                if not pid_alive(apiserver.pid):
                    return "port" if port_clash(apiserver) else "exited"
                try:
                    if client.get("/readyz").status_code == 200:
                        return "ready"
                except httpx.HTTPError:
                    pass
                time.sleep(0.2)
        return f"not ready after {READY_TIMEOUT_SECONDS:.0f}s"

    @staticmethod
    def _server_version(state: LabState) -> str:
        import httpx

        try:
            response = httpx.get(f"{state.server}/version", verify=admin_tls(state.pki_dir), timeout=5)
            return str(response.json().get("gitVersion", ""))
        except (httpx.HTTPError, ValueError):
            return ""

    # -- down / status -----------------------------------------------------------
    @staticmethod
    def _stop_all(state: LabState, grace: float = 10.0) -> list[int]:
        stopped = []
        if state.supervisor_pid and pid_alive(state.supervisor_pid):
            # First, so that it does not restart what is being stopped.
            terminate(Component("supervisor", [_cmdline0(state.supervisor_pid)], "", 0,
                                pid=state.supervisor_pid, role="supervisor"), grace=5)
        # Crossplane and the controllers first (clients of the API servers), then the API servers: they hold
        # connections to etcd.
        clients = ("crossplane", "controller-manager")
        first = [c for c in state.components.values() if c.role in clients]
        rest = [c for c in state.components.values() if c.role not in (*clients, "apiserver")]
        for component in [*first, *state.apiservers(), *rest]:
            if component.pid:
                terminate(component, grace)
                stopped.append(component.pid)
            if component.cgroup:
                cgroups.remove(Path(component.cgroup))
        return stopped

    def down(self) -> list[int]:
        """Stop every process (SIGTERM, then SIGKILL) and remove the run directory."""
        state = self.state()
        if state is None:
            return []
        stopped = self._stop_all(state)
        run_dir = Path(state.run_dir)
        if run_dir.name.startswith("crdscope-lab-"):  # never remove anything we did not create
            shutil.rmtree(run_dir, ignore_errors=True)
        self.state_file.unlink(missing_ok=True)
        return stopped

    def status(self) -> dict[str, Any]:
        """Which processes run, where, and whether the API server is ready."""
        state = self.require()
        components = {}
        for name, component in state.components.items():
            alive = pid_is(component)
            stopped = alive and proc_state(component.pid) == "T"
            components[name] = {
                "role": component.role,
                "pid": component.pid,
                "port": component.port,
                "state": "stopped" if stopped else ("running" if alive else "dead"),
                "log": component.log,
                "restarts": component.restarts,
            }
        return {
            "name": state.name,
            "server": state.server,
            "kubeconfig": state.kubeconfig,
            "context": state.admin_context,
            "kubernetes_version": state.kubernetes_version,
            "binaries": state.binaries_origin,
            "run_dir": state.run_dir,
            "memory_limit": state.memory_limit,
            "supervisor": bool(state.supervisor_pid and pid_alive(state.supervisor_pid)),
            "components": components,
            "ready": self._ready(state),
            **self._balancer_status(state),
        }

    @staticmethod
    def _balancer_status(state: LabState) -> dict[str, object]:
        """Replica index -> component name, and haproxy's view of each (labs of several API servers)."""
        if "balancer" not in state.components:
            return {}
        replicas = {str(index): replica_name(index) for index in range(1, len(state.apiservers()) + 1)}
        try:
            backends: dict[str, str] | str = balancer.backend_states(Path(state.run_dir))
        except balancer.BalancerError as exc:
            backends = str(exc)
        return {"replicas": replicas, "balancer": backends}

    def _ready(self, state: LabState) -> bool:
        # The standard library's client: importing httpx would cost `crdscope lab status` more
        # than the request itself.
        import http.client
        from urllib.parse import urlsplit

        url = urlsplit(state.server)
        try:
            connection = http.client.HTTPSConnection(url.hostname or "127.0.0.1", url.port or 443, timeout=3,
                                                     context=admin_tls(state.pki_dir))
            try:
                connection.request("GET", "/readyz")
                return connection.getresponse().status == 200
            finally:
                connection.close()
        except (OSError, http.client.HTTPException):
            return False

    # -- faults ------------------------------------------------------------------
    def component(self, name: str) -> Component:
        """A recorded component by name (``apiserver`` or ``etcd``)."""
        state = self.require()
        if name not in state.components:
            raise LabError(f"unknown lab component '{name}' (one of: {', '.join(state.components)})", exit_code=2)
        return state.components[name]

    def kill(self, name: str) -> int:
        """SIGKILL a component; returns its pid once it is gone."""
        component = self.component(name)
        if not send_signal(component, signal.SIGKILL):
            raise LabError(f"{name} is not running")
        # A big process can take seconds to unmap its memory; its sockets close only after that.
        deadline = time.monotonic() + 30
        while pid_alive(component.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        return component.pid

    def stop(self, name: str) -> int:
        """SIGSTOP a component (it freezes, its sockets stay open)."""
        component = self.component(name)
        if not send_signal(component, signal.SIGSTOP):
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
            if self.respawn(state, component, wait=wait, retry=attempt < PORT_ATTEMPTS):
                break
        return component.pid

    def respawn(self, state: LabState, component: Component, *, wait: bool = True, retry: bool = False) -> bool:
        """Run a dead component again on its port; False when the port clashed and ``retry`` allows."""
        # The same port must be reused (certificates and kubeconfigs name it); after a kill the
        # kernel can hold it for a moment, so wait for it rather than fail on the first bind.
        port_bindable(component.port, timeout=30)
        spawn(component, join=self._joiner(component))
        self.save(state)
        if not wait:
            return True
        if component.role in ("crossplane", "registry", "controller-manager"):
            if wait_http(component, CROSSPLANE_RESTART_SECONDS):
                return True
            raise LabError(f"{component.name} did not restart; last lines of {component.log}:",
                           detail=tail(component.log))
        if component.role == "etcd":
            if self._wait_etcd(component):
                return True
            if retry and port_clash(component):
                return False
            raise LabError(f"etcd did not restart; last lines of {component.log}:", detail=tail(component.log))
        outcome = self._wait_ready(state, component)
        if outcome == "ready":
            return True
        if retry and outcome == "port":
            return False
        raise LabError(f"kube-apiserver did not restart ({outcome}); last lines of {component.log}:",
                       detail=tail(component.log))

    def set_memory_limit(self, limit: int) -> LabState:
        """Change the API servers' memory limit in place, as a provider resizes a control plane.

        The running (or crash-looping) API server keeps its pid; the next restart gets the new room.
        """
        state = self.require()
        limited = [c for c in state.apiservers() if c.cgroup]
        if not limited:
            raise LabError("this lab has no memory limit; start it with `crdscope lab up --memory-limit SIZE`")
        for component in limited:
            cgroups.set_limit(Path(component.cgroup), limit)
        state.memory_limit = limit
        self.save(state)
        return state

    def mint_user(self, user: str, groups: list[str] | tuple[str, ...] = (), *, path: Path | None = None,
                  **validity: Any) -> Path:
        """Write a kubeconfig for a new client-certificate user signed by the lab's CA."""
        state = self.require()
        from .kubeconfig import write_kubeconfig
        from .pki import CertificateAuthority

        pki = state.pki_dir
        ca = CertificateAuthority.load((pki / "ca.crt").read_bytes(), (pki / "ca.key").read_bytes())
        pair = ca.client(user, groups, **validity)
        target = path or Path(state.run_dir) / f"kubeconfig-{user}"
        write_kubeconfig(target, server=state.server, ca_pem=ca.pair().cert_pem, users={user: pair}, current=user,
                         cluster=state.admin_context)
        return target


def replica_name(index: int) -> str:
    """The component name of kube-apiserver replica ``index`` (1-based: ``apiserver``, ``apiserver-2``...)."""
    return "apiserver" if index == 1 else f"apiserver-{index}"


def replica_hostname(index: int, replicas: int) -> str:
    """The host name replica ``index`` sees (its identity Lease's name); none for a single server."""
    return f"lab-apiserver-{index}" if replicas > 1 else ""


def _cmdline0(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
    except (OSError, IndexError):
        return ""
