"""Which crdscope lab, if any, serves a given API server address.

Callers that watch a cluster (the headless watch, ``doctor``, the TUI) ask this
to use what only the lab knows: its API server's etcd connections (from /proc)
and its memory cap (``lab up --memory-limit``).  Lab commands given no ``--name``
ask :func:`find_lab` which lab they mean (issue 37).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from crdscope.base.errors import CrdscopeError

from .controlplane import Lab, LabState, lab_home


def lab_for_server(server: str, home: Path | None = None) -> tuple[Lab, LabState] | None:
    """The lab whose API server is ``server``, with its state; None for any other cluster.

    Without ``home``: the default lab, then every named one (``lab up --name``).
    """
    homes = [(home, "")] if home is not None else [
        (lab_home(), ""), *((named, named.name) for named in sorted((lab_home() / "named").glob("*")))]
    for candidate, name in homes:
        lab = Lab(candidate, name=name)  # named: its messages and commands say `--name NAME`
        try:
            state = lab.state()
        except Exception:  # noqa: BLE001 - a corrupt state file only means "not a lab"
            continue
        if state is not None and state.server.rstrip("/") == server.rstrip("/"):
            return lab, state
    return None


def lab_memory_limit(server: str, home: Path | None = None) -> int | None:
    """The memory cap (bytes) of the lab serving ``server``; None when uncapped or not a lab."""
    found = lab_for_server(server, home)
    return found[1].memory_limit or None if found else None


def find_lab(name: str = "", *, kubeconfig: str | None = None,
             say: Callable[[str], None] | None = None) -> Lab:
    """The lab a lab command means: ``name`` when given; else the default lab when it is up; else the
    lab serving the current kubeconfig context (``crdscope-lab-X`` after ``lab up --name X``), said
    through ``say``; else the default lab, whose :meth:`Lab.require` then says that none is up."""
    if name:
        return Lab(name=name)
    default = Lab()
    try:
        if default.state() is not None:
            return default
    except CrdscopeError:
        return default  # a corrupt state file: its own error says what to do
    try:
        from crdscope.connection.kubeconfig import load_config

        config = load_config(kubeconfig)
    except CrdscopeError:
        return default  # no kubeconfig, or no current context: nothing to find a lab from
    found = lab_for_server(config.server)
    if found is None:
        return default
    if say is not None:
        which = f"lab {found[0].name}" if found[0].name else "the default lab"
        say(f"{which}: the one serving the current context {config.context} ({config.server})")
    return found[0]
