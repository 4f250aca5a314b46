"""Which crdscope lab, if any, serves a given API server address.

Callers that watch a cluster (the headless watch, ``doctor``, the TUI) ask this
to use what only the lab knows: its API server's etcd connections (from /proc)
and its memory cap (``lab up --memory-limit``).
"""

from __future__ import annotations

from pathlib import Path

from .controlplane import Lab, LabState, lab_home


def lab_for_server(server: str, home: Path | None = None) -> tuple[Lab, LabState] | None:
    """The lab whose API server is ``server``, with its state; None for any other cluster.

    Without ``home``: the default lab, then every named one (``lab up --name``).
    """
    homes = [home] if home is not None else [lab_home(), *sorted((lab_home() / "named").glob("*"))]
    for candidate in homes:
        lab = Lab(candidate)
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
