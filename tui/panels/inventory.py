"""Inventory: CRDs by state and by owner, who is installing (rate, ETA), Crossplane v2 MRDs."""

from __future__ import annotations

from collections.abc import Iterable

from textual.widget import Widget
from textual.widgets import Static

from crdscope.session.values import get, number

from ..format import DASH, age, number as fmt, rate
from .base import ProbePanel
from .text import columns, pairs

STATES = ("Established", "NamesAccepted", "Pending", "Terminating")
#: Owners listed (the rest are summed into one line).
OWNERS_SHOWN = 8


def owners_table(sample: object) -> str:
    """Owners by CRD count, with the install rate and ETA of those still installing."""
    by_owner = get(sample, "by_owner", {}) or {}
    installing = get(sample, "installing", {}) or {}
    ordered = sorted(by_owner.items(), key=lambda kv: (-kv[1], kv[0]))
    rows = []
    for owner, crds in ordered[:OWNERS_SHOWN]:
        install = installing.get(owner)
        if install is not None:
            eta = number(get(install, "eta_seconds"))
            rows.append([owner, fmt(crds), fmt(get(install, "established")),
                         (rate(number(get(install, "per_minute")), "/min"), "probe-warn"),
                         age(eta) if eta is not None else (get(install, "eta_note") or DASH)])
        else:
            rows.append([owner, fmt(crds), "", "", "installed"])
    rest = ordered[OWNERS_SHOWN:]
    if rest:
        rows.append([f"{len(rest)} more owners", fmt(sum(c for _, c in rest)), "", "", ""])
    if not rows:
        return "[$probe-idle]no CRDs on this server[/]"
    return columns(("owner", "CRDs", "estab.", "rate", "ETA"), rows, max_widths=(34, 0, 0, 0, 24))


def mrd_line(sample: object) -> str:
    """Crossplane v2 ManagedResourceDefinitions Active/Inactive, or why they are not shown."""
    mrds = get(sample, "mrds")
    if mrds is None:
        return ""
    if get(mrds, "unobservable"):
        return f"[$probe-idle]MRDs: {get(mrds, 'unobservable')}[/]"
    if not get(mrds, "present"):
        return "[$probe-idle]no Crossplane v2 ManagedResourceDefinitions[/]"
    return "MRDs " + pairs(("Active", fmt(get(mrds, "active"))), ("Inactive", fmt(get(mrds, "inactive"))),
                           ("total", fmt(get(mrds, "total"))))


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
        latest = self.store.latest("inventory")
        if latest is None or latest.error or get(latest, "watch_connected", True):
            return base
        history = self.store.good_history("inventory")
        connected = [s for s in history if get(s, "watch_connected", False)]
        away = self.now() - (connected[-1] if connected else history[0]).timestamp
        if away < self.stale_after("inventory"):
            return base  # the watch reconnects now and then (its own timeout): not an outage
        return f"[$probe-fail]✗ {age(away)} since last good sample · CRD watch not connected: counts as last seen[/]"

    def draw(self) -> None:
        sample = self.store.last_good("inventory")
        if sample is None:
            return
        by_state = get(sample, "by_state", {}) or {}
        states = [(state, fmt(by_state.get(state, 0))) for state in STATES if by_state.get(state)]
        counts = pairs(("CRDs", fmt(get(sample, "crds"))), *states,
                       ("rate", rate(number(get(sample, "per_minute")), "/min")))
        watch = "" if get(sample, "watch_connected", True) else " [$probe-warn](watch reconnecting)[/]"
        self.query_one("#inventory-counts", Static).update(counts + watch)
        self.query_one("#inventory-owners", Static).update(owners_table(sample))
        self.query_one("#inventory-mrds", Static).update(mrd_line(sample))
