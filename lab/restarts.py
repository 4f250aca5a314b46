"""The lab's own account of API server restarts, for the health probe.

The supervisor (:mod:`lab.supervisor`) logs every death of a lab API server, with how long
it ran and whether its memory group's OOM-kill counter rose: every restart, at its exact
time, including those the monitor never saw because the process died before it served a
scrape.  The health probe never imports the lab: lab-aware callers put
:func:`restart_reader`'s callable into the core's facts (``base.facts.LabHooks.restarts``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from crdscope.base.restarts import LAB_SUPERVISOR, PlatformRestarts, RestartEvent

from . import cgroups
from .supervisor import read_events

#: Deaths handed over per reading (the crash-loop finding looks at the last ten minutes).
KEEP_EVENTS = 100


def platform_restarts(events: list[dict[str, object]], hosts: dict[str, str],
                      oom_kills: int | None, apiservers: set[str] | None = None) -> PlatformRestarts:
    """The supervisor's ``died`` events of API servers as restart events.

    ``hosts``: component -> replica host name; ``apiservers``: the API servers' component names
    (the supervisor also restarts Crossplane's processes, which are no API server restart).
    """
    deaths = []
    for event in events:
        if event.get("event") != "died":
            continue
        component = str(event.get("component") or "")
        if apiservers is not None and component not in apiservers:
            continue
        at, ran = event.get("at"), event.get("ran_seconds")
        deaths.append(RestartEvent(
            at=float(at) if isinstance(at, (int, float)) else 0.0, source=LAB_SUPERVISOR,
            replica=hosts.get(component) or component, oom_killed=bool(event.get("oom_killed")),
            uptime_seconds=float(ran) if isinstance(ran, (int, float)) else None))
    return PlatformRestarts(LAB_SUPERVISOR, len(deaths), tuple(deaths[-KEEP_EVENTS:]), oom_kills)


def restart_reader(server: str, home: Path | None = None) -> Callable[[], PlatformRestarts | None] | None:
    """A callable reading the lab's restarts of the API server at ``server``; None when not a lab.

    Each call re-reads the state file and the supervisor's log (small files; call it from a
    thread).  It returns None for an unsupervised lab (nothing restarts it, nothing counts).
    """
    from .lookup import lab_for_server

    found = lab_for_server(server, home)
    if found is None:
        return None
    lab = found[0]

    def read() -> PlatformRestarts | None:
        state = lab.state()
        if state is None or not state.events_log or not state.supervise_apiservers:
            return None
        apiservers = state.apiservers()
        hosts = {c.name: c.hostname for c in apiservers if c.hostname}
        groups = [Path(c.cgroup) for c in apiservers if c.cgroup]
        oom = sum(cgroups.oom_kills(group) for group in groups) if groups else None
        return platform_restarts(read_events(state.events_log), hosts, oom, {c.name for c in apiservers})

    return read
