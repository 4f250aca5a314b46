"""The lab's faults, written once: what ``crdscope lab kill|stop|start`` and the monitor's palette offer.

Showing an outage is part of demonstrating where an API server stops scaling; every fault acts on
a lab crdscope started (never on another cluster), through :class:`lab.controlplane.Lab`'s method of
the action's name.
"""

from __future__ import annotations

from dataclasses import dataclass

#: action (a ``Lab`` method) -> what it does, the command line's help.
ACTIONS = {
    "kill": "SIGKILL a lab component (apiserver or etcd).",
    "stop": "Freeze a lab component (SIGSTOP).",
    "start": "Resume (SIGCONT) or restart a lab component with the same data and ports.",
}


@dataclass(frozen=True)
class Fault:
    """One fault of one component, as the palette offers it."""

    action: str
    component: str
    effect: str


#: In palette order.
FAULTS = (
    Fault("kill", "apiserver", "SIGKILL kube-apiserver (an outage, then restart it)"),
    Fault("start", "apiserver", "restart a killed kube-apiserver, or resume a frozen one"),
    Fault("stop", "apiserver", "freeze kube-apiserver (SIGSTOP): requests time out"),
    Fault("stop", "etcd", "freeze etcd (SIGSTOP): readyz names etcd"),
    Fault("start", "etcd", "resume or restart etcd"),
)
assert {fault.action for fault in FAULTS} <= set(ACTIONS)
