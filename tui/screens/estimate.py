"""The estimate dialog (``e``): what installing a source would cost the cluster being watched.

The target is what the monitor already knows (the server's minor version, its RSS and CRD
count from the latest samples): no extra requests to the cluster.  Reading the source and
pricing it run off the event loop.
"""

from __future__ import annotations

import asyncio

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from crdscope.costmodel.model import Target
from crdscope.base.samples.health import HealthSample
from crdscope.base.samples.version import VersionSample

from crdscope.session.core import SessionStore


class EstimateScreen(ModalScreen[None]):
    """Ask for a SOURCE, then show ``crdscope estimate``'s table for the watched cluster."""

    BINDINGS = [Binding("escape", "dismiss_none", "Close")]

    def __init__(self, store: SessionStore, *, cluster: str = "") -> None:
        super().__init__(classes="dialog-screen")
        self.store = store
        #: Whose API server (a fleet's cluster; "" when only one is watched).
        self.cluster = cluster

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            server = f"the API server of {self.cluster}" if self.cluster else "this API server"
            yield Static(f"Estimate: what would installing SOURCE cost {server}?", classes="dialog-title",
                         markup=False)
            yield Input(placeholder="a directory, an archive, YAML, synthetic:N or a .xpkg", id="estimate-source")
            with VerticalScroll():
                yield Static("", id="estimate-result", markup=False)

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def _target(self) -> tuple[str, Target]:
        from crdscope.costmodel.coefficients import calibrated_minors

        version = self.store.last_good_of(VersionSample)
        health = self.store.last_good_of(HealthSample)
        minor = (f"{version.major}.{version.minor.rstrip('+')}" if version is not None and version.major
                 else calibrated_minors()[-1])
        rss = float(health.rss_bytes) if health is not None and health.rss_bytes is not None else None
        crds = int(health.crds or 0) if health is not None else 0
        return minor, Target(rss_bytes=rss, crds=crds, description="the watched cluster")

    async def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        result = self.query_one("#estimate-result", Static)
        spec = event.value.strip()
        if not spec:
            return
        result.update(f"reading {spec} ...")
        try:
            text = await self._estimate(spec)
        except Exception as exc:  # noqa: BLE001 - any bad source is one line in the dialog, never a crash
            text = f"cannot estimate {spec}: {' '.join(str(exc).split()) or type(exc).__name__}"
        result.update(text)

    async def _estimate(self, spec: str) -> str:
        from crdscope.costmodel.model import estimate
        from crdscope.costmodel.report import to_table
        from crdscope.costmodel.source import read_source

        read = await read_source(spec)
        if not read.crds:
            return f"{spec}: no CustomResourceDefinition found"
        minor, target = self._target()
        predicted = await asyncio.to_thread(estimate, read.crds, minor, target=target)
        note = ("\n(the cluster's group-versions are not compared: discovery figures count every group-version "
                "of SOURCE as new)")
        return to_table(predicted, source=read.spec) + note

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
