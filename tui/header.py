"""The monitor's header: which cluster, which version, how many CRDs, how the probes are doing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.reactive import Reactive, reactive

from crdscope.findings.model import Finding
from crdscope.connection.crdwatch import MANAGED_BY_VALUE
from crdscope.base.samples import SAMPLE_TYPES
from crdscope.base.samples.discovery import DiscoverySample
from crdscope.base.samples.footprint import FootprintSample
from crdscope.base.samples.health import HealthSample
from crdscope.base.samples.inventory import InventorySample
from crdscope.base.store import ProbeHealth
from crdscope.base.samples.throttling import ThrottlingSample
from crdscope.base.samples.version import VersionSample

from .format import DASH, age, escape, number as fmt_number, size as fmt_size
from .host import host_of
from .panels.findings import FindingsView, is_critical
from .panels.text import TextView

if TYPE_CHECKING:
    from .sessions import ClusterSession

def crd_counts(cluster: ClusterSession) -> tuple[int | None, int | None]:
    """CRDs installed and owned by crdscope: the inventory probe's, else the live CRD watch's."""
    inventory = cluster.store.last_good_of(InventorySample)
    if inventory is not None:
        return inventory.crds, inventory.by_owner.get(MANAGED_BY_VALUE, 0)
    found = cluster.crd_counts()
    return found if found is not None else (None, None)


def probe_chip(health: ProbeHealth, now: float) -> str:
    """``●disc 3s`` (ok, seconds since the last run) or ``✗disc 4err`` (consecutive failures)."""
    sample_type = SAMPLE_TYPES.get(health.name)
    name = (sample_type.short_name if sample_type is not None else "") or health.name
    if health.runs == 0 or health.last_run is None:
        return f"[$probe-idle]○{name}[/]"
    if health.consecutive_failures:
        return f"[$probe-fail]✗{name} {health.consecutive_failures}err[/]"
    return f"[$probe-ok]●[/]{name} {age(now - health.last_run)}"


def api_servers(health: HealthSample | None) -> int:
    """How many API servers answer behind the address: live identity Leases, else replicas seen."""
    if health is None:
        return 0
    return health.apiservers or len(health.replicas)


def version_behaviour(discovery: DiscoverySample | None, throttling: ThrottlingSample | None) -> str:
    """What this server's version does differently from a current one, as the probes found it.

    Nothing on a server with aggregated discovery v2 and APF v1 (the current
    behaviour); otherwise ``discovery: legacy only (why)`` and the older API
    versions the probes read, so nobody reads an old server's figures as a new one's.
    """
    parts = []
    if discovery is not None and discovery.format == "legacy":
        why = discovery.fallback_reason or "measured with the legacy walk"
        parts.append(f"discovery: legacy only: {why}")
    elif discovery is not None and discovery.format == "v2beta1":
        parts.append("discovery: aggregated v2beta1 (beta)")
    if throttling is not None and throttling.flowcontrol_api not in ("", "v1"):
        parts.append(f"APF {throttling.flowcontrol_api}")
    return " · ".join(parts)


class ClusterHeader(Vertical):
    """Two lines: one cluster, then its findings' status and its probes' health.

    The status is a :class:`FindingsView` bound to the header's ``findings`` (which the monitor
    screen binds to its own), so it shows what the strip below shows.  The cluster line and the
    probe chips are redrawn by a 1 s clock: the chips' ages run with it, and their health changes
    with nearly every sample, so one redraw a second is the fewest that keeps them true.
    """

    #: Open findings, most severe first (bound to the monitor screen's): the critical colour.
    findings: Reactive[tuple[Finding, ...]] = reactive((), init=False)

    def __init__(self, cluster: ClusterSession, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.cluster = cluster

    def compose(self) -> ComposeResult:
        yield TextView(id="header-cluster")
        with Horizontal(id="header-probes"):
            yield FindingsView(self.cluster, form="status", id="header-findings").data_bind(ClusterHeader.findings)
            yield TextView(id="header-chips")

    def on_mount(self) -> None:
        self.set_interval(1.0, self.redraw)
        self.redraw()

    def watch_findings(self, findings: tuple[Finding, ...]) -> None:
        self.set_class(is_critical(findings), "critical")

    def redraw(self) -> None:
        """The cluster line and the probe chips, now (the findings' status draws itself)."""
        now = self.cluster.now()
        self.query_one("#header-cluster", TextView).show(self.cluster_line(now))
        self.query_one("#header-chips", TextView).show(self.chips(now))

    def markup(self) -> str:
        """What the header shows, as markup: the cluster line, then the status and the chips."""
        cluster, chips = (self.query_one(f"#header-{part}", TextView).shown for part in ("cluster", "chips"))
        status = self.query_one(FindingsView).shown
        return f"{cluster}\n{status} {chips}" if status else f"{cluster}\n{chips}"

    def cluster_line(self, now: float) -> str:
        """Context, server, version, CRDs, API servers, an old server's behaviour; a mode label
        and where the samples come from before them when that is news."""
        cluster = self.cluster
        mode_label = host_of(self).mode_label
        feed = cluster.feed
        context = escape(str(feed.context or DASH))
        server = escape(str(feed.server or DASH))
        version_sample = cluster.store.last_good_of(VersionSample)
        version = escape((version_sample.git_version if version_sample else "") or DASH)
        total, owned = crd_counts(cluster)
        crds = f"CRDs [b]{fmt_number(total)}[/b]"
        if owned:
            crds += f" (crdscope {fmt_number(owned)})"
        first = f"[b]{context}[/b] {server} · k8s {version} · {crds}"
        servers = api_servers(cluster.store.last_good_of(HealthSample))
        if servers > 1:
            first += f" · [b]{servers}[/b] API servers"
        behaviour = version_behaviour(cluster.store.last_good_of(DiscoverySample),
                                      cluster.store.last_good_of(ThrottlingSample))
        if behaviour:
            first += f" · [$probe-warn]{escape(behaviour)}[/]"
        if cluster.origin is not None:
            first = f"[reverse] {escape(cluster.origin(now))} [/reverse] " + first
        if mode_label:
            first = f"[reverse] {escape(mode_label)} [/reverse] " + first
        return first

    def chips(self, now: float) -> str:
        """The monitor's own load, then a chip per probe (paused first when paused)."""
        cluster = self.cluster
        chips = " ".join(probe_chip(h, now) for h in cluster.probe_health().values())
        if cluster.probes_paused:
            chips = "[$probe-warn b]⏸ PAUSED[/] " + chips
        own = own_load(cluster.store.last_good_of(FootprintSample))
        return f"{own}{chips or '[$probe-idle]no probes[/]'}"


def own_load(sample: FootprintSample | None) -> str:
    """``own 0.4/s 2.1KiB/s · ``: what the monitor itself sends the server (``?`` has the detail)."""
    if sample is None:
        return ""
    text = f"own {sample.requests_per_second:.1f}/s {fmt_size(sample.bytes_per_second)}/s"
    if sample.held_back:
        return f"[$probe-warn]{text}, holding back {len(sample.held_back)}[/] · "
    if sample.over_budget:
        return f"[$probe-warn]{text}, over budget: {escape(', '.join(sample.over_budget))}[/] · "
    return f"{text} · "
