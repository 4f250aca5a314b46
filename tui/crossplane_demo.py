"""The monitor of ``crdscope lab --crossplane``: once it is up, a provider install runs through Crossplane.

The install itself (:mod:`loader.crossplane_install`) talks to the lab; here it runs in a thread
worker, so the event loop keeps serving the screen, and each line it says becomes a notification.
Quitting the monitor stops it between two requests (the lab and what was applied stay).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from textual.message import Message

from crdscope.loader.crossplane_install import LabClient, Stage, run_install

from .app import CrdscopeApp

log = logging.getLogger("crdscope.tui.crossplane")
#: Seconds a stage's line stays on screen: long enough to read while the panels move.
NOTE_SECONDS = 20.0


class InstallSaid(Message):
    """One line of the install's narration (posted from its thread)."""

    def __init__(self, line: str, severity: str = "information") -> None:
        super().__init__()
        self.line = line
        self.severity = severity


class CrossplaneDemoApp(CrdscopeApp):
    """The monitor, plus the install of ``stages`` on the lab at ``server`` once the screen is up."""

    def __init__(self, *args: Any, stages: list[Stage], server: str, pki_dir: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stages = stages
        self._server = server
        self._pki_dir = pki_dir
        self._stop = threading.Event()
        #: True once every stage is done, False when one failed or timed out, None while running.
        self.install_result: bool | None = None

    def on_ready(self) -> None:
        self.run_worker(self._install, thread=True, name="crossplane-install", group="crossplane-install",
                        exit_on_error=False)

    def on_unmount(self) -> None:
        self._stop.set()  # the worker's thread ends at its next request or poll

    def _say(self, line: str, severity: str = "information") -> None:
        log.info("crossplane install: %s", line)
        self.post_message(InstallSaid(line, severity))  # thread-safe, never waits on the event loop

    def _install(self) -> None:
        client = LabClient(self._server, self._pki_dir)
        try:
            self.install_result = run_install(self.stages, client, say=self._say, stop=self._stop)
        except Exception as exc:  # the monitor keeps running; the line says what failed
            log.exception("the Crossplane install failed")
            self.install_result = False
            self._say(f"the install stopped: {exc}", "error")
            return
        finally:
            client.close()
        if self.install_result:
            self._say("install through Crossplane done: press f for the findings (what the inactive kinds "
                      "would cost); apply an MRAP activating '*' to install every CRD")

    def on_install_said(self, message: InstallSaid) -> None:
        self.notify(message.line, title="Crossplane", severity=message.severity,  # type: ignore[arg-type]
                    timeout=NOTE_SECONDS)
