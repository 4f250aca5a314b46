"""Findings about what CRDs cost the API server: memory, unused CRDs, discovery (etcd connections: etcd.py)."""

from __future__ import annotations

from collections.abc import Mapping

from crdscope.base.samples.discovery import DiscoverySample
from crdscope.base.samples.health import HealthSample

from .crashloop import loop_of
from .model import Finding, Severity
from .observations import Observations, fmt_count
from .spec import AlertRule, CheckSpec, PromQL

MIB = float(1 << 20)
#: Below this many CRDs unused ones are not worth a finding.
UNUSED_MIN_CRDS = 100
#: Growth is judged over at least this long, and only while the CRD count did not change.
GROWTH_MIN_SECONDS = 300.0


# --------------------------------------------------------------------------- 4. no aggregated discovery


def no_aggregated_discovery(obs: Observations) -> list[Finding]:
    """The server answers discovery only the legacy way: every client walks 2+N group-versions."""
    discovery = obs.good(DiscoverySample)
    if discovery is None or discovery.mode != "legacy" or not discovery.fallback_reason:
        return []
    gvs = discovery.group_versions
    return [Finding(
        "no-aggregated-discovery", Severity.WARNING,
        f"no aggregated discovery: every client walks {gvs + 2} requests to discover this server",
        (f"discovery.fallback_reason = {discovery.fallback_reason}",
         f"discovery.group_versions = {gvs}; a cold kubectl sends 2 + {gvs} GETs"),
        "aggregated discovery (one request) is GA from Kubernetes 1.30 (beta 1.27, feature gate "
        "AggregatedDiscoveryEndpoint); this server is older or has it off",
        "upgrade the control plane (or enable the feature gate); until then keep client caches warm "
        "and avoid short-lived kubectl pods")]


NO_AGGREGATED_DISCOVERY_CHECK = CheckSpec(
    no_aggregated_discovery, "aggregated discovery offered", probes=(DiscoverySample,),
    kinds=("no-aggregated-discovery",))


# --------------------------------------------------------------------------- 7. memory


def memory(obs: Observations) -> list[Finding]:
    """High MiB per CRD, growth with no CRD added, headroom against a known limit, restarts."""
    health = obs.good(HealthSample)
    if health is None:
        return []
    found: list[Finding] = []
    limit = obs.thresholds.memory_mib_per_crd_warn
    # Where Crossplane's MRDs arrived too, the CRDs' own share is judged: an MRD costs memory of its own.
    per_crd = health.mib_per_crd_own if health.mib_per_crd_own is not None else health.mib_per_crd
    if (per_crd is not None and per_crd > limit
            and (health.r2 or 0.0) >= obs.thresholds.memory_fit_r2_min):
        evidence = [f"health.mib_per_crd = {health.mib_per_crd or 0.0:.2f} (least squares of "
                    f"process_resident_memory_bytes against the CRD count, R² {health.r2 or 0.0:.2f}, "
                    f"{health.fit_points} points at {health.fit_crd_counts} CRD counts)",
                    f"health.crds = {fmt_count(health.crds)}"]
        if health.mib_per_crd_own is not None:
            how = (f"fitted with the MRD count, {health.mib_per_mrd or 0.0:.2f} MiB per MRD" if health.own_share_by
                   == "fit" else "each MRD's measured 0.8 MiB taken out first (MRDs and CRDs grew together)")
            evidence.append(f"health.mib_per_crd_own = {per_crd:.2f} with {fmt_count(health.mrds)} Crossplane "
                            f"MRDs present ({how})")
        found.append(Finding(
            "memory-per-crd", Severity.WARNING,
            f"API server memory grows {per_crd:.2f} MiB per CRD (over {limit:g})"
            + (" (the MRDs' own share taken out)" if health.mib_per_crd_own is not None else ""),
            tuple(evidence),
            "each CRD version costs the server schemas, validators, OpenAPI and a storage with its watch cache; "
            "big schemas (Crossplane providers) cost the most",
            "install only the CRDs you use (Crossplane v2: ManagedResourceActivationPolicy), and size the "
            "API server's memory for the CRD count you plan"))
    found += _growth(obs)
    found += _headroom(obs, health)
    now_health = obs.latest(HealthSample) or health
    restarts = now_health.restarts or 0
    looping = loop_of(now_health.restart_events, obs.thresholds, obs.now, now_health.down)
    if restarts and not looping:  # a crash loop is its own finding, which says more
        found.append(Finding(
            "apiserver-restarted", Severity.WARNING,
            f"{restarts} API server restart{'s' if restarts != 1 else ''} while watched",
            (f"health.restarts = {fmt_count(restarts)}, counted by {now_health.restarts_source or '?'} "
             f"(health.restarts_by_source = {dict(now_health.restarts_by_source)})",)
            + ((f"health.pod_restarts = {dict(now_health.pod_restarts)} (kube-state-metrics)",)
               if now_health.pod_restarts else ()),
            "an OOM kill (memory limit), a crash, or a deliberate restart (upgrade, certificate rotation)",
            "check the container's last state (kubectl describe pod: OOMKilled?) and the server's logs"))
    return found


def _memory_rules(q: PromQL) -> tuple[AlertRule, ...]:
    t = q.thresholds
    return (
        AlertRule("CrdscopeMemoryPerCRD", "warning",
                  f"({q.crdscope('crdscope_health_mib_per_crd_own')} or {q.crdscope('crdscope_health_mib_per_crd')})"
                  f" > {t.memory_mib_per_crd_warn:g} and "
                  f"{q.crdscope('crdscope_health_r2')} >= {t.memory_fit_r2_min:g}",
                  "API server memory {{ $value | humanize }} MiB per CRD", "Least-squares fit of RSS against CRDs.",
                  finding="memory-per-crd"),
        AlertRule("CrdscopeAPIServerRestarted", "warning",
                  f"increase({q.crdscope('crdscope_health_restarts_total')}[15m]) > 0",
                  "API server restarted", "process_start_time_seconds moved forward.", finding="apiserver-restarted"),
    )


MEMORY_CHECK = CheckSpec(
    memory, "memory per CRD, growth, restarts", probes=(HealthSample,),
    thresholds=("memory_mib_per_crd_warn", "memory_fit_r2_min", "memory_growth_mib_per_minute_warn",
                "memory_limit_fraction_warn", "memory_limit_fraction_critical", "crashloop_restarts",
                "crashloop_window_seconds", "crashloop_quiet_seconds"),
    constants=("GROWTH_MIN_SECONDS",), rules=_memory_rules,
    kinds=("memory-per-crd", "memory-growth", "memory-headroom", "apiserver-restarted"))


#: The finding that says memory is near the limit: while it is open the monitor's heavy optional reads
#: wait (the session writes :func:`memory_pressure` into its facts; ``probes.guard`` reads it).
HEADROOM = "memory-headroom"


def memory_pressure(open_findings: Mapping[str, Finding]) -> str | None:
    """Why heavy optional reads wait now (None: they may run): the memory finding's verdict, judged
    once, by the memory finding's declaration (``memory_limit_fraction_warn`` of the known limit)."""
    headroom = open_findings.get(HEADROOM)
    return f"{headroom.title}: heavy optional reads wait" if headroom is not None else None


def _headroom(obs: Observations, health: HealthSample) -> list[Finding]:
    """Resident memory against a known limit.

    After a restart a fresh process starts small and grows back to the limit: judged on the
    newest figure alone the finding would close and reopen with every restart of a crash
    loop.  Within ``crashloop_window_seconds`` of a restart it judges the highest figure of
    that window instead, and says so.
    """
    # Judged on the newest sample with a figure: a fresh process between two OOM kills answered
    # /readyz before /metrics, and the finding closed and reopened around it (CI, the crash-loop test).
    health = obs.newest_health_with("rss_bytes") or health
    # The one limit the session knows (a limit given, --memory-limit or the lab's cap, wins over
    # the one Prometheus shows: base.facts).
    known = obs.facts.memory_limit
    if known is None or not health.rss_bytes:
        return []
    limit = known.bytes
    window = obs.thresholds.crashloop_window_seconds
    events = (obs.latest(HealthSample) or health).restart_events
    rss, held = health.rss_bytes, ""
    recent = [s for s in obs.health_history() if s.rss_bytes and s.timestamp >= obs.now - window]
    # The new process's first figures can arrive before its restart is counted (the supervisor's
    # file, the Lease, the start time are read on their own cadences): a process start time that
    # changed within the window is a restart too.
    started = {s.start_time for s in recent if s.start_time is not None}
    if (events and obs.now - max(e.at for e in events) <= window) or len(started) > 1:
        peak = max((s.rss_bytes for s in recent if s.rss_bytes), default=rss)
        if peak > rss:
            rss, held = peak, (f" (the highest of the last {window / 60:.0f} min: the API server restarted, "
                               f"a fresh process starts small; now {health.rss_bytes / MIB:,.0f} MiB)")
    fraction = rss / limit
    if fraction < obs.thresholds.memory_limit_fraction_warn:
        return []
    severity = Severity.CRITICAL if fraction >= obs.thresholds.memory_limit_fraction_critical else Severity.WARNING
    where = "" if known.given else f" ({known.describe()})"
    return [Finding(
        HEADROOM, severity,
        f"API server memory at {fraction:.0%} of its {limit / MIB:,.0f} MiB limit",
        (f"health.rss_bytes = {rss / MIB:,.0f} MiB{held}; limit {limit / MIB:,.0f} MiB{where}",),
        "CRDs and objects use memory the limit does not leave room for; an OOM kill restarts the server",
        "raise the limit or remove unused CRDs before adding more")]


def _growth(obs: Observations) -> list[Finding]:
    """Resident memory rising while the CRD count stayed put (a leak, or objects piling up)."""
    # (time, rss, crds, process start) of the samples that have both figures
    history = [(s.timestamp, s.rss_bytes, s.crds, s.start_time) for s in obs.health_history()
               if s.rss_bytes is not None and s.crds is not None]
    if len(history) < 2:
        return []
    newest = history[-1]
    oldest = next(s for s in history if s[2:] == newest[2:])  # same CRD count, same process
    span = newest[0] - oldest[0]
    if span < GROWTH_MIN_SECONDS:
        return []
    per_minute = (newest[1] - oldest[1]) / MIB / (span / 60.0)
    if per_minute <= obs.thresholds.memory_growth_mib_per_minute_warn:
        return []
    return [Finding(
        "memory-growth", Severity.WARNING,
        f"API server memory growing {per_minute:.0f} MiB/min with no CRD added",
        (f"health.rss_bytes {oldest[1] / MIB:,.0f} -> {newest[1] / MIB:,.0f} MiB over "
         f"{span / 60:.0f} min at {fmt_count(newest[2])} CRDs (threshold "
         f"{obs.thresholds.memory_growth_mib_per_minute_warn:g} MiB/min)",),
        "objects piling up (watch caches), big LIST answers being built, or a leak",
        "look at health.storage_objects_top and at clients listing large collections")]


# --------------------------------------------------------------------------- 8. unused CRDs


def unused_crds(obs: Observations) -> list[Finding]:
    """Most CRDs have no objects: they cost memory and discovery for nothing."""
    health = obs.newest_health_with("crds_without_objects")
    if health is None:
        return []
    unused = health.crds_without_objects
    crds = health.crds
    if unused is None or not crds or crds < UNUSED_MIN_CRDS:
        return []
    if unused / crds < obs.thresholds.unused_crds_fraction_info:
        return []
    examples = ", ".join(list(health.unused_crd_examples or ())[:3])
    evidence = [f"health.crds_without_objects = {fmt_count(unused)} of health.crds = {fmt_count(crds)} "
                "(apiserver_resource_objects / apiserver_storage_objects: no series or 0 for the resource)"]
    if examples:
        evidence.append(f"for example: {examples}")
    free = ""
    if health.mib_per_crd is not None:
        mib = unused * health.mib_per_crd
        free = f" would free about {mib:,.0f} MiB"
        evidence.append(f"health.mib_per_crd = {health.mib_per_crd:.2f} (measured fit) × {fmt_count(unused)} "
                        f"= {mib:,.0f} MiB")
    return [Finding(
        "unused-crds", Severity.INFO,
        f"{fmt_count(unused)} of {fmt_count(crds)} CRDs have no objects", tuple(evidence),
        "providers install every CRD they know, used or not (a Crossplane provider family brings hundreds)",
        f"with Crossplane v2, a ManagedResourceActivationPolicy that activates only the kinds in use{free}; "
        "otherwise install smaller provider families")]


def _unused_crds_rules(q: PromQL) -> tuple[AlertRule, ...]:
    crds = q.crdscope("crdscope_health_crds")
    return (AlertRule(
        "CrdscopeUnusedCRDs", "info",
        f"{q.crdscope('crdscope_health_crds_without_objects')} / {crds} > "
        f"{q.thresholds.unused_crds_fraction_info:g} and {crds} >= {UNUSED_MIN_CRDS}",
        "most CRDs have no objects", "{{ $value | humanizePercentage }} of the CRDs have no objects."),)


UNUSED_CRDS_CHECK = CheckSpec(
    unused_crds, "CRDs without objects", probes=(HealthSample,), thresholds=("unused_crds_fraction_info",),
    constants=("UNUSED_MIN_CRDS",), rules=_unused_crds_rules, kinds=("unused-crds",))
