"""The lab's load balancer: Debian's haproxy in front of several kube-apiservers.

TCP pass-through (TLS ends at each kube-apiserver, as behind a cloud load
balancer) and round robin per connection.  A replica is taken out of the
rotation when ``/readyz`` fails twice (checked every second over TLS, as
anonymous: ``system:public-info-viewer`` may read it), and a connection refused
by a replica that died since its last check is sent to another one
(``option redispatch``), so the cluster keeps answering while one replica is
down.  Connections to a replica marked down are closed (``on-marked-down
shutdown-sessions``, as load balancers that reset connections to unhealthy
targets do): a frozen replica does not keep its clients waiting on a connection
that no check will ever clear.  haproxy runs in the foreground (``-db``) as one of the lab's processes;
its admin socket in the run directory answers ``show stat`` for ``lab status``.
"""

from __future__ import annotations

import shutil
import socket
from dataclasses import dataclass
from pathlib import Path

from crdscope.base.errors import LabError

#: Where lab/system-deps.sh installs it (Debian's package).
HAPROXY_CANDIDATES = ("haproxy", "/usr/sbin/haproxy")
CONFIG_NAME = "haproxy.cfg"
SOCKET_NAME = "haproxy.sock"
BACKEND = "apiservers"
#: Long enough for watches (the API server ends them itself after 30-60 min).
IDLE_TIMEOUT = "2h"


class BalancerError(LabError):
    """haproxy is missing or cannot be asked."""


@dataclass(frozen=True)
class Backend:
    """One kube-apiserver behind the balancer."""

    name: str
    port: int
    host: str = "127.0.0.1"


def haproxy_binary() -> str:
    """The haproxy executable; a one-line error naming the installer when it is missing."""
    for candidate in HAPROXY_CANDIDATES:
        found = shutil.which(candidate)
        if found:
            return found
    raise BalancerError("haproxy is not installed (lab/system-deps.sh installs Debian's haproxy)")


def haproxy_config(port: int, backends: list[Backend], admin_socket: Path) -> str:
    """haproxy.cfg: listen on 127.0.0.1:``port``, round robin over ``backends`` (TCP)."""
    servers = "\n".join(
        f"    server {b.name} {b.host}:{b.port} check check-ssl verify none inter 1s fall 2 rise 2"
        " on-marked-down shutdown-sessions"
        for b in backends)
    return f"""\
global
    log stdout format raw local0 notice
    stats socket {admin_socket} mode 600 level admin
    maxconn 4000

defaults
    mode tcp
    log global
    option tcplog
    option dontlognull
    timeout connect 2s
    timeout check 1s
    timeout client {IDLE_TIMEOUT}
    timeout server {IDLE_TIMEOUT}
    # A connection refused by a replica that died since its last check goes to another one.
    retries 2
    option redispatch 1

frontend kube-apiserver
    bind 127.0.0.1:{port}
    default_backend {BACKEND}

backend {BACKEND}
    balance roundrobin
    option httpchk
    http-check send meth GET uri /readyz
    http-check expect status 200
{servers}
"""


def write_config(run_dir: Path, port: int, backends: list[Backend]) -> Path:
    """Write haproxy.cfg into ``run_dir``; returns its path."""
    path = run_dir / CONFIG_NAME
    path.write_text(haproxy_config(port, backends, run_dir / SOCKET_NAME))
    return path


def haproxy_argv(config: Path) -> list[str]:
    """The command line of a foreground haproxy reading ``config``."""
    return [haproxy_binary(), "-db", "-f", str(config)]


def backend_states(run_dir: Path, timeout: float = 2.0) -> dict[str, str]:
    """server name -> haproxy's status ("UP", "DOWN", "MAINT", ...), from the admin socket."""
    path = run_dir / SOCKET_NAME
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(timeout)
            conn.connect(str(path))
            conn.sendall(b"show stat\n")
            chunks = []
            while chunk := conn.recv(65536):
                chunks.append(chunk)
    except OSError as exc:
        raise BalancerError(f"cannot ask haproxy ({path}): {exc.strerror or exc}") from None
    return parse_stat("".join(c.decode(errors="replace") for c in chunks))


def wait_all_up(run_dir: Path, names: list[str], timeout: float = 30.0) -> None:
    """Return once haproxy's checks passed for every server in ``names`` (BalancerError after ``timeout``)."""
    import time

    deadline = time.monotonic() + timeout
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        try:
            states = backend_states(run_dir)
        except BalancerError:
            states = {}
        if all(states.get(name) == "UP" for name in names):
            return
        time.sleep(0.2)
    raise BalancerError(f"haproxy's checks did not pass for every kube-apiserver: {states or 'no answer'}")


def parse_stat(text: str) -> dict[str, str]:
    """The servers of :data:`BACKEND` and their status from ``show stat`` CSV."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith("# "):
        return {}
    header = lines[0][2:].split(",")
    try:
        proxy, server, status = header.index("pxname"), header.index("svname"), header.index("status")
    except ValueError:
        return {}
    states = {}
    for line in lines[1:]:
        cells = line.split(",")
        if len(cells) > status and cells[proxy] == BACKEND and cells[server] not in ("BACKEND", "FRONTEND"):
            states[cells[server]] = cells[status]
    return states
