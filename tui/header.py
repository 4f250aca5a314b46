"""The monitor's header: which cluster, which version, how many CRDs, how the probes are doing."""

from __future__ import annotations

import time

from textual.markup import escape
from textual.widgets import Static

from crdscope.probes.crdwatch import MANAGED_BY_VALUE
from crdscope.probes.scheduler import ProbeHealth
from crdscope.session.values import get, number

from .format import DASH, age, number as fmt_number

#: Short probe names for the header at 80 columns.
SHORT_NAMES = {"version": "ver", "inventory": "inv", "discovery": "disc", "throttling": "apf",
               "openapi": "oapi", "health": "health", "latency": "lat", "loader": "load"}


def crd_counts(app) -> tuple[int | None, int | None]:
    """CRDs installed and owned by crdscope: the inventory probe's, else the feed's watch."""
    inventory = app.store.last_good("inventory")
    if inventory is not None:
        total = number(get(inventory, "crds"))
        owned = number(get(get(inventory, "by_owner", {}), MANAGED_BY_VALUE, 0))
        return (None if total is None else int(total), None if owned is None else int(owned))
    counts = getattr(app.feed, "crd_counts", None)
    found = counts() if callable(counts) else None
    return found if found is not None else (None, None)


def probe_chip(health: ProbeHealth, now: float) -> str:
    """``●disc 3s`` (ok, seconds since the last run) or ``✗disc 4err`` (consecutive failures)."""
    name = SHORT_NAMES.get(health.name, health.name)
    if health.runs == 0 or health.last_run is None:
        return f"[$probe-idle]○{name}[/]"
    if health.consecutive_failures:
        return f"[$probe-fail]✗{name} {health.consecutive_failures}err[/]"
    return f"[$probe-ok]●[/]{name} {age(now - health.last_run)}"


class ClusterHeader(Static):
    """Two lines: the cluster, then the probes' health (refreshed every second)."""

    def on_mount(self) -> None:
        self.set_interval(1.0, self.redraw)
        self.redraw()

    def redraw(self) -> None:
        self.update(self.markup())

    def markup(self) -> str:
        app = self.app
        feed = app.feed
        context = escape(str(getattr(feed, "context", "") or DASH))
        server = escape(str(getattr(feed, "server", "") or DASH))
        version_sample = app.store.last_good("version")
        version = escape(str(get(version_sample, "git_version", "") or DASH))
        total, owned = crd_counts(app)
        crds = f"CRDs [b]{fmt_number(total)}[/b]"
        if owned:
            crds += f" (crdscope {fmt_number(owned)})"
        first = f"[b]{context}[/b] {server} · k8s {version} · {crds}"
        if getattr(app, "mode_label", ""):
            first = f"[reverse] {escape(app.mode_label)} [/reverse] " + first
        now = app.now() if callable(getattr(app, "now", None)) else time.time()
        chips = " ".join(probe_chip(h, now) for h in app.probe_health().values())
        if app.probes_paused:
            chips = "[$probe-warn b]⏸ PAUSED[/] " + chips
        return f"{first}\n{chips or '[$probe-idle]no probes[/]'}"
