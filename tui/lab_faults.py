"""Lab faults in the palette: kill, freeze and restart the lab's components live.

The faults are :data:`crdscope.lab.faults.FAULTS` (the command line offers the same).  The lab's
calls block (signals, waiting for readiness), so they run in thread workers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from collections.abc import Callable

from crdscope.lab.faults import FAULTS

if TYPE_CHECKING:
    from .host import MonitorHost

def run_fault(app: MonitorHost, action: str, component: str) -> None:
    """Apply one fault to the lab in a thread worker and say what happened."""

    lab = app.session.faults
    if lab is None:
        app.notify("no lab here: faults need a crdscope lab", severity="warning")
        return

    def work() -> None:
        try:
            pid = getattr(lab, action)(component)
        except Exception as exc:  # noqa: BLE001 - LabError and OS errors become one line
            app.call_from_thread(app.notify, f"lab {action} {component}: {exc}", severity="error")
            return
        app.call_from_thread(app.notify, f"lab {action} {component} (pid {pid})")

    app.run_worker(work, thread=True, name=f"lab-{action}-{component}", group="lab", exit_on_error=False)


def fault_commands(app: MonitorHost) -> list[tuple[str, str, Callable[[], None]]]:
    """Palette entries for the lab's faults."""
    def fault(action: str, component: str) -> Callable[[], None]:
        return lambda: run_fault(app, action, component)

    return [(f"Lab: {f.action} {f.component}", f.effect, fault(f.action, f.component)) for f in FAULTS]
