"""Inventory: CRDs by state and by owner, who is installing (rate, ETA), Crossplane v2 MRDs, and
Crossplane's install chain (each Provider's revisions, MRDs, CRDs, runtime; the MRAPs)."""

from __future__ import annotations

from collections.abc import Iterable

from textual.widget import Widget
from textual.widgets import Static

from crdscope.base.activation import ActivationView
from crdscope.base.crossplane import CrossplaneChain, MRAPInfo, ProviderChain, RuntimeState, runtimes_summary
from crdscope.base.samples.inventory import InventorySample

from ..format import DASH, age, escape, number as fmt, rate
from .base import ProbePanel
from .text import Cell, columns, pairs

STATES = ("Established", "NamesAccepted", "Pending", "Terminating")
#: Owners listed (the rest are summed into one line).
OWNERS_SHOWN = 8
#: Providers and MRAPs listed (the rest are counted).
PROVIDERS_SHOWN = 8
MRAPS_SHOWN = 4
#: A runtime as a few words, and its colour.  A Deployment that is not Available is information
#: (where no kubelet runs pods, as in crdscope's lab, it never will be; the findings judge the rest),
#: and a safe-start runtime Crossplane v2.4 keeps at zero until an activation is expected.
RUNTIME_TEXT: dict[RuntimeState, tuple[str, str]] = {
    "healthy": ("healthy", "probe-ok"),
    "no-kubelet": ("no pods (no kubelet)", "probe-idle"),
    "deployment-unavailable": ("not Available", "probe-idle"),
    "waiting": ("waiting", "probe-idle"),
    "unhealthy": ("unhealthy", "probe-warn"),
    "unknown": (DASH, "probe-idle"),
    "inactive": ("inactive", "probe-idle"),
    "awaiting-activation": ("scaled to 0 (awaiting)", "probe-idle"),
}


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


def _condition_role(status: str) -> str:
    return {"True": "probe-ok", "False": "probe-warn"}.get(status, "probe-idle")


def _revision_cell(provider: ProviderChain) -> Cell:
    """The active (else newest) revision's number, coloured by its health, and how many others."""
    if not provider.revisions:
        return (DASH, "probe-idle")
    current = next((r for r in provider.revisions if r.desired_state == "Active"), provider.revisions[0])
    others = len(provider.revisions) - 1
    return (f"r{current.revision}" + (f" +{others}" if others else ""), _condition_role(current.healthy))


def _eta_cell(provider: ProviderChain) -> Cell:
    if provider.eta_seconds is not None:
        return age(provider.eta_seconds)
    if provider.expected_crds is not None and provider.crds_established >= provider.expected_crds:
        return "done" if provider.per_minute else "installed"
    if provider.per_minute > 0 or (provider.expected_crds or 0) > provider.crds_established:
        return (provider.eta_note or DASH, "probe-idle")
    return "installed" if provider.crds else ""


def providers_table(chain: CrossplaneChain) -> str:
    """One row per Provider: revision, MRDs Active/Inactive, CRDs Established/expected, pace, runtime;
    under it the package, and why it is unhealthy when it is."""
    rows: list[list[Cell]] = []
    details: list[str] = []
    for provider in chain.providers[:PROVIDERS_SHOWN]:
        expected = provider.expected_crds if provider.expected_crds is not None else provider.crds
        runtime_text, role = RUNTIME_TEXT.get(provider.runtime, (provider.runtime, "probe-idle"))
        rows.append([provider.name, _revision_cell(provider),
                     f"{fmt(provider.mrds_active)}/{fmt(provider.mrds_inactive)}",
                     f"{fmt(provider.crds_established)}/{fmt(expected)}",
                     (rate(provider.per_minute, "/min"), "probe-warn") if provider.per_minute else "",
                     _eta_cell(provider), (runtime_text, role)])
        detail = f"  [$probe-idle]{escape(provider.package or DASH)}[/]"
        # A Provider is unhealthy while its runtime is: said once, in the runtime column.
        if provider.healthy == "False" and provider.runtime not in ("no-kubelet", "deployment-unavailable",
                                                                    "awaiting-activation"):
            detail += f" · [$probe-warn]{escape(provider.healthy_message or 'not healthy')}[/]"
        details.append(detail)
    table = columns(("provider", "rev", "MRDs a/i", "CRDs e/x", "rate", "ETA", "runtime"), rows,
                    max_widths=(24, 0, 0, 0, 0, 16, 22)).split("\n")
    lines = [table[0]]
    for row, detail in zip(table[1:], details, strict=True):
        lines += [row, detail]
    hidden = len(chain.providers) - PROVIDERS_SHOWN
    if hidden > 0:
        lines.append(f"[$probe-idle]{hidden} more providers[/]")
    return "\n".join(lines)


def mrap_line(mrap: MRAPInfo) -> str:
    """An MRAP: its patterns, how many MRDs it activated, and matches still Inactive."""
    patterns = ", ".join(mrap.patterns) or DASH
    text = f"MRAP [b]{escape(mrap.name)}[/b] {escape(patterns)} → activated [b]{fmt(mrap.activated)}[/b]"
    if mrap.matching_inactive:
        text += f" · [$probe-warn]{fmt(mrap.matching_inactive)} matching still Inactive[/]"
    if mrap.healthy == "False" or mrap.message:
        text += f" · [$probe-warn]{escape(mrap.message or 'not healthy')}[/]"
    return text


#: Names shown per activation line (inactive composed kinds, dead entries, plan entries).
ACTIVATION_NAMES_SHOWN = 3


def _names(names: tuple[str, ...], total: int) -> str:
    shown = ", ".join(escape(n) for n in names[:ACTIVATION_NAMES_SHOWN])
    return shown + (f" (+{fmt(total - ACTIVATION_NAMES_SHOWN)})" if total > ACTIVATION_NAMES_SHOWN else "")


def activation_lines(view: ActivationView) -> list[str]:
    """What the Compositions need activated: needed / active / inactive / unused kinds and the plan."""
    if not view.compositions_read and not (view.dead_entries or view.active_unused or view.needed):
        return []
    source = (f"{fmt(view.compositions)} Compositions" if view.compositions_read
              else "kinds in use (Compositions not read)")
    inactive = view.needed - view.needed_active
    lines = [f"Activation ({source}): needed [b]{fmt(view.needed)}[/b] · active [b]{fmt(view.needed_active)}[/b]"
             + (f" · [$probe-fail]inactive {fmt(inactive)}[/]" if inactive else " · inactive 0")
             + f" · unused active [b]{fmt(view.active_unused)}[/b]"
             + (f" · [$probe-warn]{fmt(view.not_established)} not Established[/]" if view.not_established else "")]
    if view.composed_inactive:
        names = _names(view.composed_inactive_names, view.composed_inactive)
        lines.append(f"[$probe-fail]composed but not active: {names}[/]")
    if view.dead_entries:
        names = _names(view.dead_entry_names, view.dead_entries)
        lines.append(f"[$probe-warn]MRAP entries matching nothing: {names}[/]")
    if view.plan_entries:
        lines.append(f"plan: {fmt(view.plan_entries)} entries ({_names(view.plan, view.plan_entries)}) "
                     "[$probe-idle]· crdscope mrap --yaml[/]")
    return lines


def crossplane_block(chain: CrossplaneChain, now: float) -> str:
    """The install chain, or nothing where Crossplane's package API is absent."""
    if not chain.present:
        return ""
    read = f" [$probe-idle](read {age(now - chain.read_at)} ago)[/]" if chain.read_at else ""
    lines = [f"[b]Crossplane[/b]{read}"]
    if chain.providers:
        lines.append(providers_table(chain))
        if summary := runtimes_summary(chain):
            lines.append(f"[$probe-idle]runtimes: {escape(summary)}[/]")
    elif "providers" not in chain.unobservable:
        lines.append("[$probe-idle]no Providers[/]")
    for revision in chain.orphan_revisions:
        lines.append(f"[$probe-idle]revision {escape(revision.name)} (r{revision.revision}, "
                     f"{escape(revision.desired_state or DASH)}): no Provider claims it[/]")
    if chain.mrds_unattributed:
        lines.append(f"[$probe-idle]{fmt(chain.mrds_unattributed)} MRDs not listed by any revision (yet)[/]")
    lines += [mrap_line(m) for m in chain.mraps[:MRAPS_SHOWN]]
    if len(chain.mraps) > MRAPS_SHOWN:
        lines.append(f"[$probe-idle]{len(chain.mraps) - MRAPS_SHOWN} more MRAPs[/]")
    lines += activation_lines(chain.activation)
    for part, reason in chain.unobservable.items():
        lines.append(f"[$probe-idle]{escape(part)}: {escape(reason)}[/]")
    return "\n".join(lines)


class InventoryPanel(ProbePanel):
    """Counts from the shared CRD watch (the inventory probe)."""

    probes = ("inventory",)
    panel_title = "Inventory"
    tab_label = "Inventory"
    shows = "CRDs by state and by owner, install rate and ETA"

    def compose_body(self) -> Iterable[Widget]:
        yield Static("", id="inventory-counts")
        yield Static("", id="inventory-owners")
        yield Static("", id="inventory-mrds")
        crossplane = Static("", id="inventory-crossplane")
        crossplane.display = False  # shown once a sample has a Crossplane chain
        yield crossplane

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
        if away < self.cluster.stale_after("inventory"):
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
        block = crossplane_block(sample.crossplane, self.now())
        crossplane = self.query_one("#inventory-crossplane", Static)
        crossplane.display = bool(block)  # no empty row where Crossplane is absent
        crossplane.update(block)
