"""Restart a dead kube-apiserver the way a kubelet restarts a container: with a back-off.

``lab up`` returns while the lab keeps running, so the supervisor is a small detached process
(``python -m crdscope.lab.supervisor HOME``) that reads the lab's state file, notices an API
server that died (OOM-killed by its cgroup limit, or killed by hand), waits its back-off and
starts it again on the same port.  Each death and restart is a JSON line in the lab's events
log, so benchmarks and tests can read the outage windows.  It exits when the lab is torn down.

Back-off: 1 s, doubling to at most 30 s, reset once a run has lasted 60 s (a kubelet uses
10 s to 5 min; a lab wants its outages short enough to watch).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import cgroups
from crdscope.base.errors import LabError
from .controlplane import Lab
from .processes import pid_is
from crdscope.base.labrecord import Component, proc_state

if TYPE_CHECKING:
    from .controlplane import LabState

POLL_SECONDS = 0.25
FIRST_BACKOFF_SECONDS = 1.0
MAX_BACKOFF_SECONDS = 30.0
RESET_AFTER_SECONDS = 60.0


def read_events(path: str | Path) -> list[dict[str, Any]]:
    """The supervisor's events (``died`` and ``restarted``), oldest first."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return []
    events = []
    for line in lines:
        try:
            events.append(json.loads(line))
        except ValueError:
            continue  # a line being written
    return events


def outages(events: list[dict[str, Any]]) -> list[float]:
    """Seconds from each death to the API server serving again (restarted events carry it)."""
    return [float(e["outage_seconds"]) for e in events if e.get("event") == "restarted"]


#: Processes restarted whenever they die (no memory limit needed): Crossplane's core and registry, and
#: the Deployment controller beside them.
ALWAYS_SUPERVISED = ("crossplane", "registry", "controller-manager")


def supervised(state: LabState) -> list[Component]:
    """The components this lab's supervisor restarts."""
    apiservers = state.apiservers() if state.supervise_apiservers else []
    return [*apiservers, *(c for c in state.components.values() if c.role in ALWAYS_SUPERVISED)]


class Supervisor:
    """The loop behind ``python -m crdscope.lab.supervisor``."""

    def __init__(self, home: Path) -> None:
        self.lab = Lab(home)
        self.backoff: dict[str, float] = {}
        self.died_at: dict[str, float] = {}
        self.oom_seen: dict[str, int] = {}

    def _event(self, path: str, **fields: object) -> None:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"at": round(time.time(), 3), **fields}) + "\n")

    def run(self) -> None:
        """Watch until the lab's state file disappears (``lab down``)."""
        while True:
            try:
                state = self.lab.state()
            except LabError:
                state = None
            if state is None or state.supervisor_pid not in (0, os.getpid()):
                return
            for component in supervised(state):
                self._check(state, component)
            time.sleep(POLL_SECONDS)

    def _check(self, state: LabState, component: Component) -> None:
        if pid_is(component):
            if proc_state(component.pid) != "T" and time.time() - component.started_at > RESET_AFTER_SECONDS:
                self.backoff.pop(component.name, None)
            return
        now = time.time()
        if component.name not in self.died_at:
            killed = cgroups.oom_kills(Path(component.cgroup)) if component.cgroup else 0
            oom = killed > self.oom_seen.get(component.name, 0)
            self.oom_seen[component.name] = killed
            self.died_at[component.name] = now
            delay = self.backoff.get(component.name, 0.0)
            delay = FIRST_BACKOFF_SECONDS if delay == 0 else min(delay * 2, MAX_BACKOFF_SECONDS)
            self.backoff[component.name] = delay
            self._event(state.events_log, event="died", component=component.name, pid=component.pid,
                        oom_killed=oom, ran_seconds=round(now - component.started_at, 1), backoff_seconds=delay)
            return
        if now - self.died_at[component.name] < self.backoff[component.name]:
            return
        component.restarts += 1
        try:
            self.lab.respawn(state, component, wait=True, retry=True)
        except LabError as exc:
            # Killed again before it served (the limit is below what it needs at start): back off more.
            self.lab.save(state)
            self._event(state.events_log, event="failed", component=component.name, pid=component.pid,
                        reason=str(exc).split(";")[0])
            self.died_at.pop(component.name)
            return
        died = self.died_at.pop(component.name)
        self.lab.save(state)
        self._event(state.events_log, event="restarted", component=component.name, pid=component.pid,
                    restarts=component.restarts, outage_seconds=round(time.time() - died, 2))


def main(argv: list[str]) -> int:
    """Entry point: ``python -m crdscope.lab.supervisor HOME``."""
    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print("usage: python -m crdscope.lab.supervisor LAB_HOME", file=sys.stderr)
        return 2
    try:
        Supervisor(Path(argv[0])).run()
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
