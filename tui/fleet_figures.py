"""The key figures of one cluster, as the fleet and compare screens show them.

Read from the cluster's store with the typed reads (the panels' own sources), formatted with
``tui.format`` and the panels' helpers, so a figure reads the same in the fleet row, the compare
screen and the cluster's full monitor.  :func:`differences` states, in words, how two clusters
differ on them ("lab-b uses 31% less memory per CRD", "discovery 2.3x slower on lab-a").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from crdscope.findings.model import Finding, Severity
from crdscope.base.samples.discovery import DiscoverySample
from crdscope.base.samples.health import HealthSample
from crdscope.base.samples.inventory import InventorySample
from crdscope.base.samples.latency import LatencySample
from crdscope.base.samples.openapi import OpenAPISample
from crdscope.base.samples.throttling import ThrottlingSample
from crdscope.base.samples.version import VersionSample
from crdscope.session.values import finite_number

from .format import DASH, MIB, duration, number, rate, size
from .header import api_servers, crd_counts
from .panels.findings import ROLE
from .panels.text import Cell
from .sessions import ClusterSession


@dataclasses.dataclass(frozen=True)
class ClusterFigures:
    """One cluster's key figures (None: not known yet)."""

    name: str
    version: str = ""
    apiservers: int = 0
    crds: int | None = None
    crds_per_minute: float | None = None
    discovery_cold_seconds: float | None = None
    apf_rejected_per_s: float | None = None
    openapi_backlog: int | None = None
    rss_bytes: float | None = None
    mib_per_crd: float | None = None
    memory_limit_bytes: float | None = None
    canary_p99_seconds: float | None = None
    restarts: int | None = None
    worst: Finding | None = None

    @property
    def headroom_bytes(self) -> float | None:
        """Memory left under the limit (None: no limit known, or no memory figure)."""
        if self.memory_limit_bytes is None or self.rss_bytes is None:
            return None
        return self.memory_limit_bytes - self.rss_bytes

    @property
    def headroom_crds(self) -> int | None:
        """How many more CRDs fit in the headroom at the fitted MiB per CRD."""
        free = self.headroom_bytes
        if free is None or not self.mib_per_crd or self.mib_per_crd <= 0:
            return None
        return max(0, int(free / MIB / self.mib_per_crd))


def figures_of(session: ClusterSession) -> ClusterFigures:
    """``session``'s key figures from its store (the last good sample of each probe)."""
    store = session.store
    version = store.last_good_of(VersionSample)
    health = store.last_good_of(HealthSample)
    inventory = store.last_good_of(InventorySample)
    discovery = store.last_good_of(DiscoverySample)
    throttling = store.last_good_of(ThrottlingSample)
    openapi = store.last_good_of(OpenAPISample)
    latency = store.last_good_of(LatencySample)
    total, _ = crd_counts(session)
    limit = session.memory_limit  # the session's facts: the flag, the lab's cap or Prometheus'; one precedence
    p99s = [p for c in (latency.canaries.values() if latency is not None else ())
            if (p := finite_number(c.p99_seconds)) is not None]
    findings = session.current_findings()
    return ClusterFigures(
        name=session.name,
        version=(version.git_version if version is not None else "") or "",
        apiservers=api_servers(health),
        crds=total,
        crds_per_minute=inventory.per_minute if inventory is not None else None,
        discovery_cold_seconds=finite_number(discovery.cold_seconds) if discovery is not None else None,
        apf_rejected_per_s=finite_number(throttling.rejected_per_s) if throttling is not None else None,
        openapi_backlog=openapi.backlog if openapi is not None else None,
        rss_bytes=finite_number(health.rss_bytes) if health is not None else None,
        mib_per_crd=finite_number(health.mib_per_crd) if health is not None else None,
        memory_limit_bytes=float(limit) if limit else None,
        canary_p99_seconds=max(p99s) if p99s else None,
        restarts=health.restarts if health is not None else None,
        worst=findings[0] if findings else None,
    )


def headroom_text(figures: ClusterFigures) -> str:
    """``1.2GiB ≈800 CRDs`` under the limit, or a dash without one."""
    free = figures.headroom_bytes
    if free is None:
        return DASH
    crds = figures.headroom_crds
    return size(free) + (f" ≈{number(crds)} CRDs" if crds is not None else "")


def worst_cell(finding: Finding | None) -> Cell:
    """The worst open finding, in its severity's role colour."""
    if finding is None:
        return ("none", "probe-ok")
    if finding.accepted is not None:  # only accepted ones are open (they sort after those that page)
        return (f"{finding.severity.value} (accepted): {finding.title}", "probe-idle")
    return (f"{finding.severity.value}: {finding.title}", ROLE[finding.severity])


@dataclasses.dataclass(frozen=True)
class Column:
    """One column of the fleet table: header, cell, and the value it sorts by (None last)."""

    header: str
    cell: Callable[[ClusterFigures], Cell]
    sort_value: Callable[[ClusterFigures], float | str | None]


def _mib(value: float | None) -> str:
    return f"{value:.2f}" if value is not None else DASH


def _restarts(figures: ClusterFigures) -> Cell:
    return (number(figures.restarts), "probe-fail") if figures.restarts else number(figures.restarts)


def _rejections(figures: ClusterFigures) -> Cell:
    shown = rate(figures.apf_rejected_per_s)
    return (shown, "probe-warn") if figures.apf_rejected_per_s else shown


def _severity_rank(figures: ClusterFigures) -> float:
    return -1.0 if figures.worst is None else float(figures.worst.severity.rank)


#: The fleet table, left to right (each column sortable).
COLUMNS: tuple[Column, ...] = (
    Column("cluster", lambda f: f.name, lambda f: f.name),
    Column("k8s", lambda f: f.version or DASH, lambda f: f.version or None),
    Column("API", lambda f: number(f.apiservers) if f.apiservers else DASH, lambda f: f.apiservers or None),
    Column("CRDs", lambda f: number(f.crds), lambda f: f.crds),
    Column("pace", lambda f: rate(f.crds_per_minute, "/min"), lambda f: f.crds_per_minute),
    Column("disc cold", lambda f: duration(f.discovery_cold_seconds), lambda f: f.discovery_cold_seconds),
    Column("APF rej", _rejections, lambda f: f.apf_rejected_per_s),
    Column("OAPI backlog", lambda f: number(f.openapi_backlog), lambda f: f.openapi_backlog),
    Column("RSS", lambda f: size(f.rss_bytes), lambda f: f.rss_bytes),
    Column("MiB/CRD", lambda f: _mib(f.mib_per_crd), lambda f: f.mib_per_crd),
    Column("headroom", headroom_text, lambda f: f.headroom_bytes),
    Column("restarts", _restarts, lambda f: f.restarts),
    Column("worst finding", lambda f: worst_cell(f.worst), _severity_rank),
)


def sort_rows(rows: list[ClusterFigures], column: Column, descending: bool) -> list[ClusterFigures]:
    """``rows`` by ``column`` (unknown values last either way; ties by cluster name)."""
    known = [r for r in rows if column.sort_value(r) is not None]
    unknown = sorted((r for r in rows if column.sort_value(r) is None), key=lambda r: r.name)
    known.sort(key=lambda r: r.name)
    known.sort(key=lambda r: column.sort_value(r), reverse=descending)  # type: ignore[arg-type, return-value]
    return known + unknown


# -- two clusters compared -----------------------------------------------------------------

#: Below this relative difference two figures read as the same.
SAME_WITHIN = 0.05


def less_or_more(a: ClusterFigures, b: ClusterFigures, value: float | None, other: float | None,
                 what: str) -> str | None:
    """``lab-b uses 31% less memory per CRD`` (B against A), or None when not both known or alike."""
    if value is None or other is None or value <= 0 or other <= 0:
        return None
    change = other / value - 1
    if abs(change) < SAME_WITHIN:
        return None
    if change > 1:
        return f"{b.name} uses {change + 1:.1f}x the {what} of {a.name}"
    return f"{b.name} uses {abs(change) * 100:.0f}% {'less' if change < 0 else 'more'} {what}"


def slower(a: ClusterFigures, b: ClusterFigures, value: float | None, other: float | None,
           what: str) -> str | None:
    """``discovery 2.3x slower on lab-a``, or None when not both known or alike."""
    if value is None or other is None or value <= 0 or other <= 0:
        return None
    if abs(value / other - 1) < SAME_WITHIN:
        return None
    slow, ratio = (a, value / other) if value > other else (b, other / value)
    return f"{what} {ratio:.1f}x slower on {slow.name}"


def differences(a: ClusterFigures, b: ClusterFigures) -> list[str]:
    """How ``b`` differs from ``a`` on the key figures, in words (empty: nothing known differs)."""
    lines = []
    if a.version and b.version and a.version != b.version:
        lines.append(f"{a.name} runs {a.version}, {b.name} runs {b.version}")
    if a.crds is not None and b.crds is not None and a.crds != b.crds:
        lines.append(f"{a.name} has {number(a.crds)} CRDs, {b.name} {number(b.crds)}")
    said = [
        less_or_more(a, b, a.mib_per_crd, b.mib_per_crd, "memory per CRD"),
        less_or_more(a, b, a.rss_bytes, b.rss_bytes, "memory"),
        slower(a, b, a.discovery_cold_seconds, b.discovery_cold_seconds, "discovery"),
        slower(a, b, a.canary_p99_seconds, b.canary_p99_seconds, "canary p99"),
    ]
    lines += [line for line in said if line]
    if (a.restarts or 0) != (b.restarts or 0):
        lines.append(f"restarts: {a.name} {number(a.restarts or 0)}, {b.name} {number(b.restarts or 0)}")
    a_rank = a.worst.severity.rank if a.worst else -1
    b_rank = b.worst.severity.rank if b.worst else -1
    if a_rank != b_rank:
        worse = a if a_rank > b_rank else b
        if worse.worst is not None and worse.worst.severity is not Severity.INFO:
            lines.append(f"only {worse.name} has a {worse.worst.severity.value} finding: {worse.worst.title}")
    return lines
