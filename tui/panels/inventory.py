"""Inventory: CRDs by state and by owner, who is installing (rate, ETA), Crossplane v2 MRDs."""

from __future__ import annotations

from collections.abc import Iterable

from textual.widget import Widget
from textual.widgets import Static

from crdscope.probes.inventory import InventorySample

from ..format import DASH, age, number as fmt, rate
from .base import ProbePanel
from .text import Cell, columns, pairs

STATES = ("Established", "NamesAccepted", "Pending", "Terminating")
#: Owners listed (the rest are summed into one line).
OWNERS_SHOWN = 8


def owners_table(sample: InventorySample) -> str:
    """Owners by CRD count, with the install rate and ETA of those still installing."""
    ordered = sorted(sample.by_owner.items(), key=lambda kv: (-kv[1], kv[0]))
    rows: list[list[Cell]] = []
    for owner, crds in ordered[:OWNERS_SHOWN]:
        install = sample.installing.get(owner)
        if install is not None:
            eta = install.eta_seconds
            rows.append([owner, fmt(crds), fmt(install.established),
                         (rate(install.per_minute, "/min"), "probe-warn"),
                         age(eta) if eta is not None else (install.eta_note or DASH)])
        else:
            rows.append([owner, fmt(crds), "", "", "installed"])
    rest = ordered[OWNERS_SHOWN:]
    if rest:
        rows.append([f"{len(rest)} more owners", fmt(sum(c for _, c in rest)), "", "", ""])
    if not rows:
        return "[$probe-idle]no CRDs on this server[/]"
    return columns(("owner", "CRDs", "estab.", "rate", "ETA"), rows, max_widths=(34, 0, 0, 0, 24))


def mrd_line(sample: InventorySample) -> str:
    """Crossplane v2 ManagedResourceDefinitions Active/Inactive, or why they are not shown."""
    mrds = sample.mrds
    if mrds.unobservable:
        return f"[$probe-idle]MRDs: {mrds.unobservable}[/]"
    if not mrds.present:
        return "[$probe-idle]no Crossplane v2 ManagedResourceDefinitions[/]"
    return "MRDs " + pairs(("Active", fmt(mrds.active)), ("Inactive", fmt(mrds.inactive)),
                           ("total", fmt(mrds.total)))


class InventoryPanel(ProbePanel):
    """Counts from the shared CRD watch (the inventory probe)."""

    probes = ("inventory",)
    panel_title = "Inventory"
    tab_label = "Inventory"

    def compose_body(self) -> Iterable[Widget]:
        yield Static("", id="inventory-counts")
        yield Static("", id="inventory-owners")
        yield Static("", id="inventory-mrds")

    def status_markup(self) -> str:
        """As every panel, and an outage when the shared CRD watch stays disconnected.

        The inventory probe keeps answering from the watch's last state while the
        server is away (``watch_connected`` False): its counts are then as last seen.
        """
        base = super().status_markup()
        latest = self.store.latest_of(InventorySample)
        if latest is None or latest.error or latest.watch_connected:
            return base
        history = self.store.good_history_of(InventorySample)
        if not history:
            return base
        connected = [s for s in history if s.watch_connected]
        away = self.now() - (connected[-1] if connected else history[0]).timestamp
        if away < self.stale_after("inventory"):
            return base  # the watch reconnects now and then (its own timeout): not an outage
        return f"[$probe-fail]✗ {age(away)} since last good sample · CRD watch not connected: counts as last seen[/]"

    def draw(self) -> None:
        sample = self.store.last_good_of(InventorySample)
        if sample is None:
            return
        by_state = sample.by_state
        states = [(state, fmt(by_state.get(state, 0))) for state in STATES if by_state.get(state)]
        counts = pairs(("CRDs", fmt(sample.crds)), *states, ("rate", rate(sample.per_minute, "/min")))
        watch = "" if sample.watch_connected else " [$probe-warn](watch reconnecting)[/]"
        self.query_one("#inventory-counts", Static).update(counts + watch)
        self.query_one("#inventory-owners", Static).update(owners_table(sample))
        self.query_one("#inventory-mrds", Static).update(mrd_line(sample))
