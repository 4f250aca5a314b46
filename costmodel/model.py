"""Predict what installing a set of CRDs costs an API server: :func:`estimate`.

Linear figures (memory, heap, OpenAPI v2 bytes, etcd connections) are sums of
fitted terms over the CRDs' features; install time is the loader's pacing or the
server's fitted work, whichever is longer, plus a tail (:func:`install_seconds`); discovery sizes are
built from the CRDs' names (:mod:`.documents`) and scaled by the calibrated
factor; request counts are exact.  Every fitted figure carries an interval:
the prediction widened by twice the calibration's relative RMS error (at
least :data:`MIN_RELATIVE_INTERVAL`; resident memory at least :data:`RSS_MIN_RELATIVE_INTERVAL`).

Two paths a CRD takes into a cluster, priced apart: :data:`DIRECT` (a client creates it: ``crdscope
load``, ``kubectl apply``, a Helm chart) and :data:`ACTIVATION` (Crossplane creates it when an MRAP
activates its ManagedResourceDefinition), whose memory and time have their own coefficients
(:func:`.coefficients.activation_for`); discovery, OpenAPI and etcd figures are the same on both.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from crdscope.loader.documents import CRDDocument
from crdscope.connection.ratelimit import NAMED_LIMITS, replay_legacy_walk

from .coefficients import Coefficients, PathCoefficients, activation_for, for_minor, parse_minor
from .delta import Delta, diff
from .documents import aggregated_bytes, legacy_bytes
from .features import CRDFeatures, features_of
from .fitting import paced_value

#: The narrowest interval given (the lab is one machine; another machine differs at least this much).
MIN_RELATIVE_INTERVAL = 0.10
#: Widening of the calibration's relative RMS error into an interval.
INTERVAL_RMS_MULTIPLE = 2.0
#: Resident memory's narrowest interval: the same install's RSS moved 22% from one run to the next
#: (1.33, 2026-12-06), and held-out sets landed up to 25% off either way on every minor while the
#: memory they held was within 11% (1.37, 2026-12-07): a calibration's fit to its own points is
#: narrower than that spread, which is the server's, not the model's.
RSS_MIN_RELATIVE_INTERVAL = 0.25
TOP_CRDS = 10
#: ``install_seconds`` of coefficient format 2: ``max(CRDs / pace, server terms) + tail``.
INSTALL_MODEL = "paced"
#: The paths a CRD takes into a cluster (:func:`estimate`'s ``path``).
DIRECT = "direct"
ACTIVATION = "activation"
DIRECT_NOTE = "direct install (a client creates the CRDs: crdscope load, kubectl apply)"
#: Activated through Crossplane, CRDs held more than the direct model predicts for the same CRDs:
#: measured/predicted 1.5-2.1 on 1.37 (``bench mrap``, 200 and 600 AWS CRDs; ``bench/RESULTS.md``, "The
#: activation planner").  Said only while no minor's activation path is calibrated, never folded in.
ACTIVATION_MEASURED_RATIO = (1.5, 2.1)
UNCALIBRATED_ACTIVATION_NOTE = (
    "as a direct install: the Crossplane activation path is not calibrated yet (python -m bench calibrate "
    f"--activation --kubernetes MINOR), and activated CRDs measured {ACTIVATION_MEASURED_RATIO[0]:g}-"
    f"{ACTIVATION_MEASURED_RATIO[1]:g}x the direct model on 1.37 (bench mrap)")
#: Whatever prices memory and time: a minor's direct coefficients or its activation path's.
Priced = Coefficients | PathCoefficients


@dataclass(frozen=True)
class Interval:
    """A predicted figure with its low and high bounds."""

    value: float
    low: float
    high: float

    @classmethod
    def around(cls, value: float, relative: float) -> Interval:
        """``value`` +- ``relative`` of it (never below zero: these are sizes, counts and times)."""
        return cls(value, max(0.0, value * (1 - relative)), value * (1 + relative))

    @classmethod
    def signed(cls, value: float, relative: float) -> Interval:
        """``value`` +- ``relative`` of it, for a figure a release may lower (a delta): a negative
        value's interval stays below zero as a positive one's stays above."""
        if value >= 0:
            return cls.around(value, relative)
        return cls(value, value * (1 + relative), min(0.0, value * (1 - relative)))

    def plus(self, offset: float) -> Interval:
        """The interval moved by ``offset``."""
        return Interval(self.value + offset, self.low + offset, self.high + offset)


@dataclass(frozen=True)
class Target:
    """What is on the cluster before SOURCE is installed (empty: a fresh cluster)."""

    rss_bytes: float | None = None
    crds: int = 0
    group_versions: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()
    description: str = ""


@dataclass(frozen=True)
class CRDCost:
    """One CRD's predicted memory and what drives it."""

    name: str
    memory_bytes: float
    served_versions: int
    schema_bytes: int


@dataclass(frozen=True)
class ClientWalk:
    """The legacy discovery walk behind one client's rate limit."""

    name: str
    qps: float
    burst: int
    seconds: float


@dataclass(frozen=True)
class Estimate:
    """What installing a set of CRDs costs, predicted for one Kubernetes minor."""

    minor_requested: str
    minor_used: str
    model_note: str
    crds: int
    served_versions: int
    schema_bytes: int
    memory_bytes: Interval
    heap_bytes: Interval
    rss_before_bytes: float | None
    rss_after_bytes: Interval | None
    groups_added: int
    group_versions_added: int
    resources_added: int
    #: None where the minor serves no aggregated discovery by default (1.26: alpha, off)
    aggregated_bytes_added: float | None
    aggregated_bytes_after: float | None
    legacy_requests_added: int
    legacy_requests_after: int
    legacy_walks: tuple[ClientWalk, ...]
    kubectl_cache_bytes_after: float
    openapi_v3_paths_added: int
    openapi_v2_bytes_added: Interval
    install_seconds: Interval
    etcd_connections_added: Interval
    top_crds: tuple[CRDCost, ...]
    memory_limit_bytes: float | None = None
    headroom_bytes: float | None = None
    #: about how many CRDs like these fit before the API server reaches its memory limit
    crds_until_limit: int | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: the loader's pace the install time is for (CRDs/s; None: coefficients of format 1, no pace of their own)
    install_pace_per_second: float | None = None
    #: the heap the CRDs hold once garbage is collected (None: the minor's calibration did not measure it)
    live_heap_bytes: Interval | None = None
    #: SOURCE against the release the cluster runs (None: not compared, every CRD is added); with a
    #: delta the memory, heap, OpenAPI v2 and etcd figures are net: negative when the release frees
    delta: Delta | None = None
    groups_removed: int = 0
    group_versions_removed: int = 0
    resources_removed: int = 0
    openapi_v3_paths_removed: int = 0
    #: :data:`DIRECT` or :data:`ACTIVATION`: which path memory and time were priced for, said plainly in
    #: ``path_note``; through activation ``install_seconds`` runs from the MRAP's apply to every CRD Established
    path: str = DIRECT
    path_note: str = DIRECT_NOTE

    @property
    def crds_added(self) -> int:
        return len(self.delta.added) if self.delta is not None else self.crds

    @property
    def crds_removed(self) -> int:
        return len(self.delta.removed) if self.delta is not None else 0

    @property
    def crds_changed(self) -> int:
        return len(self.delta.changed) if self.delta is not None else 0

    @property
    def crds_unchanged(self) -> int:
        return len(self.delta.unchanged) if self.delta is not None else 0

    @property
    def crds_written(self) -> int:
        """CRDs an install writes: those added and those changed."""
        return self.crds_added + self.crds_changed


#: Aggregated discovery is served by default from 1.27 (beta); 1.26 has it as an alpha behind the
#: AggregatedDiscoveryEndpoint feature gate, off by default (its clients walk the legacy endpoints).
AGGREGATED_DEFAULT_FROM = (1, 27)


def relative_interval(coefficients: Priced, name: str) -> float:
    """The half-width of a figure's interval, relative to the figure."""
    rms = float(coefficients.figure(name).get("relative_rms") or 0.0)
    floor = RSS_MIN_RELATIVE_INTERVAL if name == "rss_bytes" else MIN_RELATIVE_INTERVAL
    return max(floor, INTERVAL_RMS_MULTIPLE * rms)


def linear(coefficients: Priced, name: str, values: dict[str, float]) -> float:
    """A linear figure: each of its fitted terms times its regressor in ``values``, summed."""
    terms = coefficients.figure(name).get("terms") or {}
    return sum(float(c) * values.get(term, 0.0) for term, c in terms.items())


def install_pace(coefficients: Coefficients, pace_per_second: float | None = None) -> float | None:
    """The loader's pace an install time is priced at: the one asked for, else the calibration's."""
    figure = coefficients.figure("install_seconds")
    if figure.get("model") != INSTALL_MODEL:
        return None
    return float(pace_per_second or figure["pace_per_second"])


def install_seconds(coefficients: Coefficients, loads: dict[str, float],
                    pace_per_second: float | None = None) -> float:
    """Seconds ``crdscope load`` takes to install a set with regressors ``loads`` (all Established).

    ``crdscope load`` paces its creations (20 CRDs/s at its defaults), so a set takes at least
    N / pace; the API server's own work (per CRD, per schema byte) runs while the loader paces and
    only its excess over the pace adds time; the tail (the client's start, the last CRD's way to
    Established) is paid once.  ``pace_per_second`` defaults to the pace the model was calibrated at.
    Coefficients of format 1 hold a plain sum of terms (pace and server work added, not overlapped).
    """
    figure = coefficients.figure("install_seconds")
    terms = {str(name): float(value) for name, value in (figure.get("terms") or {}).items()}
    pace = install_pace(coefficients, pace_per_second)
    if pace is None:
        return sum(value * loads.get(name, 0.0) for name, value in terms.items())
    return paced_value(terms, float(figure.get("tail_seconds") or 0.0), loads, loads.get("crds", 0.0) / pace)


def crd_terms(crd: CRDFeatures) -> dict[str, float]:
    """One CRD's regressors (the names the coefficient file's terms use)."""
    return {"crds": 1.0, "served_versions": float(crd.served), "schema_bytes": float(crd.schema_bytes)}


def crd_memory(coefficients: Priced, crd: CRDFeatures) -> float:
    """Resident memory one CRD adds (bytes)."""
    return linear(coefficients, "rss_bytes", crd_terms(crd))


def _as_features(crds: Iterable[CRDFeatures | CRDDocument]) -> list[CRDFeatures]:
    return [crd if isinstance(crd, CRDFeatures) else features_of(crd) for crd in crds]


def sum_terms(crds: list[CRDFeatures], *, first_crds: bool = True) -> dict[str, float]:
    """The regressors of a set: per-CRD terms summed, and ``fixed`` (1 when these are the
    cluster's first CRDs: the API server pays a one-time cost for its first CRDs)."""
    totals: dict[str, float] = {"fixed": 1.0 if crds and first_crds else 0.0}
    for crd in crds:
        for name, value in crd_terms(crd).items():
            totals[name] = totals.get(name, 0.0) + value
    return totals


def delta_terms(delta: Delta, *, first_crds: bool = True) -> dict[str, float]:
    """The regressors of a delta: the terms of what it writes less those of what it replaces (a CRD
    left as it is counts in neither)."""
    totals = sum_terms(list(delta.written), first_crds=first_crds)
    for crd in delta.replaced:
        for name, value in crd_terms(crd).items():
            totals[name] = totals.get(name, 0.0) - value
    return totals


def _resources(crds: Iterable[CRDFeatures]) -> set[tuple[str, str, str]]:
    """(group, version, plural) of every served version: one discovery resource each."""
    return {(crd.group, version, crd.plural) for crd in crds for version in crd.served_versions}


def _discovery(coefficients: Coefficients, crds: list[CRDFeatures], delta: Delta,
               target: Target) -> dict[str, float]:
    """Discovery's change: SOURCE's documents in, the installed release's out, beside what else the
    cluster serves (its group-versions less the installed release's)."""
    baseline = coefficients.baseline
    installed = delta.installed
    old_gvs = {gv for crd in installed for gv in crd.group_versions}
    old_groups = {crd.group for crd in installed}
    gvs = {gv for crd in crds for gv in crd.group_versions}
    groups = {crd.group for crd in crds}
    other_gvs, other_groups = target.group_versions - old_gvs, target.groups - old_groups
    new_gvs, gone_gvs = gvs - target.group_versions - old_gvs, old_gvs - gvs
    scale = float(coefficients.figure("aggregated_bytes").get("scale") or 1.0)
    legacy_scale = float(coefficients.figure("legacy_bytes").get("scale") or 1.0)
    added = scale * (aggregated_bytes(crds, other_groups, other_gvs)
                     - aggregated_bytes(installed, other_groups, other_gvs))
    # A watched cluster's own documents are not known here: the baseline stands for them.
    before_gvs = max(len(target.group_versions), int(baseline.get("group_versions", 0)))
    net_gvs = len(new_gvs) - len(gone_gvs)
    return {
        "groups": len(groups - target.groups - old_groups), "groups_removed": len(old_groups - groups),
        "group_versions": len(new_gvs), "group_versions_removed": len(gone_gvs),
        "resources": len(_resources(crds) - _resources(installed)),
        "resources_removed": len(_resources(installed) - _resources(crds)),
        "aggregated_added": added,
        # None: a minor calibrated where aggregated discovery is not served (1.26)
        "aggregated_after": float(baseline.get("aggregated_bytes") or 0) + added,
        "legacy_added": net_gvs,
        "legacy_after": 2 + before_gvs + net_gvs,
        "kubectl_cache_after": float(baseline.get("legacy_bytes", 0)) + legacy_scale * (
            legacy_bytes(crds, other_gvs) - legacy_bytes(installed, other_gvs)),
    }


def _walks(coefficients: Coefficients, requests: int) -> tuple[ClientWalk, ...]:
    latency = float(coefficients.baseline.get("legacy_request_seconds") or 0.005)
    group_versions = [latency] * max(0, requests - 2)
    walks = []
    for limits in NAMED_LIMITS:
        model = replay_legacy_walk(latency, latency, group_versions, limits)
        walks.append(ClientWalk(limits.name, limits.qps, limits.burst, model.seconds))
    return tuple(walks)


def _limit(memory: Interval, per_crd: float, fixed: float, rss_after: Interval | None,
           limit: float | None) -> tuple[float | None, int | None]:
    """(headroom bytes after the install, CRDs like these that fit before the limit).

    Counted from the RSS before the install; the first CRDs' one-time cost (``fixed``)
    is paid once, not per CRD.
    """
    if limit is None or rss_after is None:
        return None, None
    headroom = limit - rss_after.value
    if per_crd <= 0:
        return headroom, None
    before = rss_after.value - memory.value
    return headroom, max(0, int((limit - before - fixed) // per_crd))


def _figure(coefficients: Priced, name: str, totals: dict[str, float]) -> Interval:
    """A linear figure with its interval (a delta's may be negative)."""
    return Interval.signed(linear(coefficients, name, totals), relative_interval(coefficients, name))


def _install(coefficients: Coefficients, written: list[CRDFeatures], pace_per_second: float | None) -> Interval:
    """Seconds to install what a source writes: no install beats the loader's pace, so the interval
    stops at that floor; nothing written takes no time."""
    if not written:
        return Interval(0.0, 0.0, 0.0)
    seconds = Interval.around(install_seconds(coefficients, sum_terms(written), pace_per_second),
                              relative_interval(coefficients, "install_seconds"))
    pace = install_pace(coefficients, pace_per_second)
    if pace is None:
        return seconds
    return Interval(seconds.value, max(seconds.low, len(written) / pace), seconds.high)


def priced_by(coefficients: Coefficients, path: str) -> tuple[Priced, str, str]:
    """What prices memory and time on ``path``, the path actually priced and that path said plainly: while
    no minor's activation path is calibrated, the direct coefficients, and the note says so."""
    if path == DIRECT:
        return coefficients, DIRECT, DIRECT_NOTE
    if path != ACTIVATION:
        raise ValueError(f"unknown path {path!r}")
    found = activation_for(coefficients.requested)
    if found is None:
        return coefficients, DIRECT, UNCALIBRATED_ACTIVATION_NOTE
    return found, ACTIVATION, found.note


def _activation_seconds(priced: Priced, written: list[CRDFeatures]) -> Interval:
    """From an MRAP's apply to every CRD of ``written`` Established: Crossplane's reaction, paid once per
    activation (``fixed``), and its work per CRD and schema byte."""
    if not written:
        return Interval(0.0, 0.0, 0.0)
    return Interval.around(linear(priced, "activation_seconds", {**sum_terms(written), "fixed": 1.0}),
                           relative_interval(priced, "activation_seconds"))


def _notes(coefficients: Coefficients, kubernetes_minor: str) -> list[str]:
    notes = [] if coefficients.requested == coefficients.minor else [coefficients.note]
    if parse_minor(kubernetes_minor) < AGGREGATED_DEFAULT_FROM:
        notes.append(f"Kubernetes {kubernetes_minor} serves no aggregated discovery by default (alpha, feature gate "
                     "AggregatedDiscoveryEndpoint): clients walk the legacy endpoints")
    return notes


def estimate(crds: Iterable[CRDFeatures | CRDDocument], kubernetes_minor: str, *, target: Target | None = None,
             memory_limit_bytes: float | None = None, load_rate_per_second: float | None = None,
             installed: Iterable[CRDFeatures] | None = None, path: str = DIRECT) -> Estimate:
    """What installing ``crds`` on ``target`` (default: an empty cluster) costs on ``kubernetes_minor``.

    The install time is ``crdscope load``'s at the pace the model was calibrated at (its default),
    or at ``load_rate_per_second``: the server's fitted work does not depend on the pace, so another
    pace moves only the floor (a pace far faster than the server meets its limits instead: not modelled).
    ``installed``: the release the cluster runs that ``crds`` replace (:mod:`.delta`); the figures are
    then the delta's: a CRD left as it is costs nothing, a changed one its difference, a removed one
    frees what it held (memory, heap, OpenAPI and discovery go negative when the release sheds more).
    ``path``: :data:`ACTIVATION` prices memory and time as Crossplane creating the CRDs (an MRAP activating
    their MRDs); the time is then the MRAP's apply to every CRD Established, not the loader's.  Where no
    minor's activation path is calibrated, the estimate is the direct one (its ``path``) and says so.
    """
    coefficients = for_minor(kubernetes_minor)
    priced, path, path_note = priced_by(coefficients, path)
    target = target or Target()
    listed = _as_features(crds)
    delta = diff(installed if installed is not None else (), listed)
    totals = delta_terms(delta, first_crds=target.crds == 0)
    memory = _figure(priced, "rss_bytes", totals)
    live = _figure(priced, "live_heap_bytes", totals) if priced.figure("live_heap_bytes").get("terms") else None
    before = target.rss_bytes if target.rss_bytes is not None else coefficients.baseline.get("rss_bytes")
    rss_after = memory.plus(float(before)) if before is not None else None
    discovery = _discovery(coefficients, listed, delta, target)
    costs = sorted((CRDCost(crd.name, crd_memory(priced, crd), crd.served, crd.schema_bytes)
                    for crd in listed), key=lambda cost: (-cost.memory_bytes, cost.name))
    fixed = linear(priced, "rss_bytes", {"fixed": totals["fixed"]})
    # "CRDs like these": SOURCE's own CRDs, whatever the delta.
    per_crd = linear(priced, "rss_bytes", sum_terms(listed, first_crds=False)) / len(listed) if listed else 0.0
    headroom, until_limit = _limit(memory, per_crd, fixed, rss_after, memory_limit_bytes)
    aggregated = parse_minor(kubernetes_minor) >= AGGREGATED_DEFAULT_FROM
    totals_of_source = sum_terms(listed)
    return Estimate(
        minor_requested=coefficients.requested, minor_used=coefficients.minor, model_note=coefficients.note,
        crds=len(listed), served_versions=int(totals_of_source.get("served_versions", 0)),
        schema_bytes=int(totals_of_source.get("schema_bytes", 0)), memory_bytes=memory,
        heap_bytes=_figure(priced, "heap_bytes", totals),
        rss_before_bytes=float(before) if before is not None else None, rss_after_bytes=rss_after,
        groups_added=int(discovery["groups"]), group_versions_added=int(discovery["group_versions"]),
        resources_added=int(discovery["resources"]),
        aggregated_bytes_added=discovery["aggregated_added"] if aggregated else None,
        aggregated_bytes_after=discovery["aggregated_after"] if aggregated else None,
        legacy_requests_added=int(discovery["legacy_added"]), legacy_requests_after=int(discovery["legacy_after"]),
        legacy_walks=_walks(coefficients, int(discovery["legacy_after"])),
        kubectl_cache_bytes_after=discovery["kubectl_cache_after"],
        openapi_v3_paths_added=int(discovery["group_versions"]),
        openapi_v2_bytes_added=_figure(coefficients, "openapi_v2_bytes", totals),
        install_seconds=(_activation_seconds(priced, list(delta.written)) if path == ACTIVATION
                         else _install(coefficients, list(delta.written), load_rate_per_second)),
        etcd_connections_added=_figure(coefficients, "etcd_connections", totals),
        top_crds=tuple(costs[:TOP_CRDS]), memory_limit_bytes=memory_limit_bytes,
        headroom_bytes=headroom, crds_until_limit=until_limit, notes=tuple(_notes(coefficients, kubernetes_minor)),
        install_pace_per_second=None if path == ACTIVATION else install_pace(coefficients, load_rate_per_second),
        live_heap_bytes=live, path=path, path_note=path_note,
        delta=delta if installed is not None else None, groups_removed=int(discovery["groups_removed"]),
        group_versions_removed=int(discovery["group_versions_removed"]),
        resources_removed=int(discovery["resources_removed"]),
        openapi_v3_paths_removed=int(discovery["group_versions_removed"]))
