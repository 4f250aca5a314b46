"""A cgroup memory limit for a lab process, so the API server can be OOM-killed like a managed one.

cgroup v1 (a ``memory`` hierarchy, as on this machine at ``/sys/fs/cgroup/memory``) or v2 (a
unified hierarchy whose ``cgroup.controllers`` lists ``memory``).  A group is created below the
calling process's own group when that is writable (so it stays inside whatever contains the
caller), else at the hierarchy's root.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from crdscope.base.errors import ConfigError
from crdscope.base.quantity import parse_quantity

from crdscope.base.errors import LabError

CGROUP_ROOT = Path(os.environ.get("CRDSCOPE_CGROUP_ROOT", "/sys/fs/cgroup"))


@dataclass(frozen=True)
class Hierarchy:
    """Where memory groups can be made, and which cgroup version's files they have."""

    version: int
    mount: Path
    parent: Path


def parse_size(text: str) -> int:
    """A memory limit as a Kubernetes quantity (``768Mi``, ``2Gi``, ``1500M`` = 1.5 GB) -> bytes.

    ``M`` and ``G`` are powers of 1000 and ``Mi``, ``Gi`` powers of 1024, as in a Pod spec
    (:mod:`base.quantity`); anything else is a :class:`ConfigError` (a bad flag: exit 2, one line).
    """
    size = parse_quantity(text, what="memory size")
    if size < 64 << 20:
        raise ConfigError(f"memory limit {text} is below 64 MiB: a kube-apiserver cannot even start in it")
    return size


def _own_group(controller_line: str) -> str:
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if controller_line in controllers.split(","):
                return path
    except (OSError, ValueError):
        pass
    return "/"


def _writable_dir(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK)


def hierarchy() -> Hierarchy | None:
    """The memory hierarchy this process can create groups in, or None."""
    v1 = CGROUP_ROOT / "memory"
    if (v1 / "memory.limit_in_bytes").exists() or (v1 / "memory.stat").exists():
        own = v1 / _own_group("memory").lstrip("/")
        parent = own if _writable_dir(own) else v1
        if _writable_dir(parent):
            return Hierarchy(1, v1, parent)
    for mount in (CGROUP_ROOT, CGROUP_ROOT / "unified"):
        controllers = mount / "cgroup.controllers"
        try:
            if "memory" not in controllers.read_text().split():
                continue
        except OSError:
            continue
        # v2's "no internal processes" rule: a group with processes cannot enable controllers for
        # children, so groups go at the root (writable as root), where memory is enabled below.
        if _writable_dir(mount):
            return Hierarchy(2, mount, mount)
    return None


def check_available() -> Hierarchy:
    """The hierarchy, or a one-line error saying why a memory limit cannot work here."""
    found = hierarchy()
    if found is None:
        raise LabError(
            "--memory-limit needs a cgroup memory controller this user can write: neither a cgroup v1 "
            f"memory hierarchy ({CGROUP_ROOT}/memory) nor a v2 one with the memory controller "
            f"({CGROUP_ROOT} or {CGROUP_ROOT}/unified) is writable here (run as root on a machine with cgroups)"
        )
    return found


def create(name: str, limit: int) -> Path:
    """A new memory group ``crdscope-NAME`` limited to ``limit`` bytes (swap included where it can be)."""
    found = check_available()
    group = found.parent / f"crdscope-{name}"
    try:
        if found.version == 2:
            subtree = found.parent / "cgroup.subtree_control"
            if "memory" not in subtree.read_text().split():
                subtree.write_text("+memory")
        group.mkdir(exist_ok=True)
        if found.version == 1:
            (group / "memory.limit_in_bytes").write_text(str(limit))
            memsw = group / "memory.memsw.limit_in_bytes"
            if memsw.exists():
                memsw.write_text(str(limit))  # no escape into swap
        else:
            (group / "memory.max").write_text(str(limit))
            swap = group / "memory.swap.max"
            if swap.exists():
                swap.write_text("0")
    except OSError as exc:
        raise LabError(f"cannot create the memory cgroup {group}: {exc.strerror or exc}") from None
    return group


def set_limit(group: Path, limit: int) -> None:
    """Change a group's limit while its process runs (lowering it below the usage may be refused)."""
    names = ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes") if (group / "memory.limit_in_bytes").exists() \
        else ("memory.max",)
    try:
        if len(names) == 2 and limit > int((group / names[0]).read_text()):
            names = names[::-1]  # v1: memsw must stay >= the plain limit: raising, it goes first; lowering, last
        for name in names:
            if (group / name).exists():
                (group / name).write_text(str(limit))
    except OSError as exc:
        raise LabError(f"cannot set the memory limit of {group}: {exc.strerror or exc}") from None


def join(group: Path, pid: int) -> None:
    """Move ``pid`` into ``group``."""
    try:
        (group / "cgroup.procs").write_text(str(pid))
    except OSError as exc:
        raise LabError(f"cannot move pid {pid} into {group}: {exc.strerror or exc}") from None


def oom_kills(group: Path) -> int:
    """How many processes the kernel OOM-killed in ``group`` (v1 ``oom_kill`` in memory.oom_control)."""
    for file_name in ("memory.oom_control", "memory.events"):
        try:
            text = (group / file_name).read_text()
        except OSError:
            continue
        match = re.search(r"^oom_kill (\d+)", text, re.M)
        if match:
            return int(match.group(1))
    return 0


def usage(group: Path) -> int:
    """The group's charged memory in bytes (0 when unreadable)."""
    for file_name in ("memory.usage_in_bytes", "memory.current"):
        try:
            return int((group / file_name).read_text())
        except (OSError, ValueError):
            continue
    return 0


def remove(group: Path) -> None:
    """Remove an emptied group (its processes must be gone; retried briefly while the kernel lets go)."""
    if not group.name.startswith("crdscope-"):
        return  # never remove a group this module did not make
    deadline = time.monotonic() + 5
    while group.exists():
        try:
            group.rmdir()
        except OSError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.1)
