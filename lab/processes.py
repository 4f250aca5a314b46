"""The lab's processes: spawn detached, signal, stop, and the free-port and /proc checks they need.

Split out of ``controlplane.py``: the control plane decides *what* runs (etcd, one or more
kube-apiservers); this module only knows how to run one process so that it outlives the
command that started it.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import time
from pathlib import Path
from collections.abc import Callable

from crdscope.base.labrecord import Component, pid_alive

STOP_GRACE_SECONDS = 10.0
SPAWN_MARKER = "--- crdscope lab: started "


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
        return int(sock.getsockname()[1])


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


def port_clash(component: Component) -> bool:
    """Whether the component's latest run failed to bind its port."""
    text = tail(component.log, 40)
    text = text.rsplit(SPAWN_MARKER, 1)[-1].lower()  # this run's lines only
    return "address already in use" in text or "bind:" in text


def spawn(component: Component, *, join: Callable[[int], None] | None = None) -> None:
    """Start ``component`` detached, appending to its log; ``join`` puts the new pid in a cgroup."""
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
            preexec_fn=_own_hostname(component.hostname) if component.hostname else None,
            env={**os.environ, **component.env} if component.env else None,
        )
    finally:
        log.close()
    if join is not None:
        # The child is still starting (Go runtime set-up): what it allocates from here on
        # is charged to the cgroup, which is what a memory limit needs.
        join(process.pid)
    component.pid = process.pid
    component.started_at = time.time()


CLONE_NEWUTS = 0x04000000
CLONE_NEWUSER = 0x10000000


def _own_hostname(hostname: str) -> Callable[[], None]:
    """A pre-exec step giving the child its own host name (as several machines would have).

    kube-apiservers name their identity Lease after the host name: replicas on one machine
    would share one Lease.  Root can unshare the UTS namespace alone; others need a user
    namespace too.  Where neither is allowed the child keeps the machine's name (the lab
    still runs, with one Lease for all replicas).
    """
    def preexec() -> None:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        flags = CLONE_NEWUTS if os.geteuid() == 0 else CLONE_NEWUTS | CLONE_NEWUSER
        if libc.unshare(flags) == 0:
            name = hostname.encode()
            libc.sethostname(name, len(name))
    return preexec


#: Health paths of the lab's processes (by role; kube-apiserver's has its own wait): 200 means serving.
HEALTH_PATHS = {"etcd": "/health", "crossplane": "/healthz", "registry": "/v2/", "controller-manager": "/healthz"}
#: Other answers that mean serving: a registry's ``/v2/`` answers 401 when it asks for credentials
#: (the lab's ``--registry-auth``).
HEALTHY_STATUSES = {"registry": (200, 401)}
#: Roles that serve their health over TLS with a certificate of their own (not checked: loopback, no secret).
TLS_HEALTH = frozenset({"controller-manager"})


def wait_http(component: Component, timeout: float) -> bool:
    """True once ``component`` answers its :data:`HEALTH_PATHS` path on loopback (False: it exited,
    or the deadline passed)."""
    import httpx

    scheme = "https" if component.role in TLS_HEALTH else "http"
    url = f"{scheme}://127.0.0.1:{component.port}{HEALTH_PATHS[component.role]}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(component.pid):
            return False
        try:
            if httpx.get(url, timeout=2, verify=False).status_code in HEALTHY_STATUSES.get(component.role, (200,)):
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    return False


def send_signal(component: Component, signum: int) -> bool:
    """Send ``signum`` to the component if it still runs its binary."""
    if not pid_is(component):
        return False
    try:
        os.kill(component.pid, signum)
    except ProcessLookupError:
        return False
    return True


def terminate(component: Component, grace: float = STOP_GRACE_SECONDS) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds; returns once the pid is gone."""
    if not send_signal(component, signal.SIGCONT):  # a stopped process cannot handle SIGTERM
        return
    send_signal(component, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while pid_alive(component.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if pid_alive(component.pid):
        send_signal(component, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while pid_alive(component.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
