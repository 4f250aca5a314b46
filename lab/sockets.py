"""Count the lab API server's TCP connections to etcd, from /proc.

The published CRD-scale reports found one etcd client (one TCP connection)
per CRD version; ``process_open_fds`` shows it indirectly, this shows it
directly.  Only possible on a lab: it needs the API server's pid (to read its
``/proc/<pid>/fd`` socket inodes) and etcd's client port, which the lab state
file records.

The health probe never imports this module (probes stay independent of the
lab): whoever opens a core on a lab puts :func:`etcd_connection_counter`'s
callable into the core's facts (``base.facts.LabHooks.etcd_connections``).
"""

from __future__ import annotations

import os
from pathlib import Path
from collections.abc import Callable

#: /proc/net/tcp state code of an established connection.
TCP_ESTABLISHED = "01"


def socket_inodes(pid: int) -> set[str]:
    """Inodes of the sockets process ``pid`` holds open (raises OSError if unreadable)."""
    inodes = set()
    fd_dir = f"/proc/{pid}/fd"
    for name in os.listdir(fd_dir):
        try:
            target = os.readlink(f"{fd_dir}/{name}")
        except OSError:
            continue  # closed between listdir and readlink
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def _remote_port(address: str) -> int:
    # "0100007F:950D" (IPv4) or "0000...:950D" (IPv6): the port is the hex after the colon.
    return int(address.rsplit(":", 1)[1], 16)


def established_to_port(pid: int, port: int) -> int:
    """Established TCP connections of process ``pid`` whose remote port is ``port``."""
    inodes = socket_inodes(pid)
    count = 0
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except FileNotFoundError:
            continue  # no IPv6 in this kernel
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != TCP_ESTABLISHED:
                continue
            if _remote_port(fields[2]) == port and fields[9] in inodes:
                count += 1
    return count


def etcd_connection_counter(server: str, home: Path | None = None) -> Callable[[], int | None] | None:
    """A callable counting the lab API server's connections to etcd, when ``server`` is the lab's.

    Returns None when no lab is up or ``server`` is another cluster.  The
    callable re-reads the lab state on each call, so it follows the API server
    across ``crdscope lab kill/start`` (new pid, same ports); it returns None
    while the API server is not running.
    """
    from .controlplane import pid_is
    from .lookup import lab_for_server

    found = lab_for_server(server, home)
    if found is None:
        return None
    lab = found[0]

    def count() -> int | None:
        current = lab.state()
        if current is None:
            return None
        apiserver, etcd = current.components.get("apiserver"), current.components.get("etcd")
        if apiserver is None or etcd is None or not pid_is(apiserver):
            return None
        try:
            return established_to_port(apiserver.pid, etcd.port)
        except OSError:
            return None  # the process exited while we read its fds

    return count
