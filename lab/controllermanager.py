"""The lab's kube-controller-manager beside Crossplane: its Deployment and ReplicaSet controllers only.

Crossplane's runtime controller reports a provider's runtime healthy only once the provider's
Deployment is ``Available``, and Crossplane v2.4 writes ``RuntimeActive`` (``AwaitingActivation``
while a safe-start provider is scaled to zero, crossplane#7586) only after that.  Without a
Deployment controller no Deployment ever gets a condition, and neither condition is ever written.
With one, the lab shows what a cluster without Nodes shows: a Deployment scaled to zero is Available
(nothing to run), one of a replica is not (its Pod is created and stays Pending: no kubelet).

Only these two controllers run (no garbage collector, no service-account tokens): the lab's other
behaviour is unchanged.  Started with Crossplane (:func:`lab.crossplane.start`), supervised like it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from collections.abc import Callable

from crdscope.base.errors import LabError
from crdscope.base.labrecord import Component, pid_alive

from .processes import free_port, spawn, tail, wait_http

if TYPE_CHECKING:
    from .controlplane import Lab, LabState

NAME = "controller-manager"
CONTROLLERS = ("deployment", "replicaset")
READY_TIMEOUT_SECONDS = 60.0


def component(binary: Path, state: LabState, port: int) -> Component:
    """kube-controller-manager as the lab's admin (the kubeconfig's current context), serving its
    health on ``port`` (loopback; ``/healthz`` needs no credentials)."""
    run_dir = Path(state.run_dir)
    return Component(
        name=NAME, role=NAME, port=port,
        argv=[str(binary), f"--kubeconfig={state.kubeconfig}", f"--controllers={','.join(CONTROLLERS)}",
              "--leader-elect=false", "--bind-address=127.0.0.1", f"--secure-port={port}",
              f"--cert-dir={run_dir / NAME}"],
        log=str(run_dir / "logs" / f"{NAME}.log"),
    )


def start(lab: Lab, state: LabState, binary: Path, say: Callable[[str], None]) -> None:
    """Start it (once per lab) and wait until it answers its health path."""
    existing = state.components.get(NAME)
    if existing is not None and pid_alive(existing.pid):
        return
    (Path(state.run_dir) / NAME).mkdir(parents=True, exist_ok=True)
    for _attempt in range(3):
        manager = component(binary, state, free_port())
        state.components[NAME] = manager
        spawn(manager)
        lab.save(state)
        if wait_http(manager, READY_TIMEOUT_SECONDS):
            say(f"kube-controller-manager ({', '.join(CONTROLLERS)} controllers) running: provider Deployments "
                "get their status as in a cluster without Nodes")
            return
    raise LabError(f"kube-controller-manager did not start; last lines of {manager.log}:", detail=tail(manager.log))
