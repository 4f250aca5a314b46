"""An API server that keeps dying: one crash-loop finding, and whether memory is why.

A capped API server that cannot hold its CRDs is OOM-killed, restarted, reloads every CRD from
etcd, and is killed again.  Each piece (a restart, refused connections, memory at the limit)
has its own finding; this one says what they add up to: how often, since when, what share of
the time the server was away, whether the kernel killed it for memory (confirmed where the
platform counts OOM kills: the lab's memory group, kube-state-metrics' last terminated
reason; likely where memory was near the limit before each death), what the CRDs need
against the limit, and what to do.

It opens when ``crashloop_restarts`` restarts *of one replica* fall within
``crashloop_window_seconds``, stays open through the restarts that follow (each within a window
of the one before) and while the server is down, and closes once the replica has served
``crashloop_quiet_seconds`` with no restart.  Restarts come from every source
(:mod:`probes.restarts`), so a process that died before crdscope ever scraped it still counts.

Several API servers behind one address are judged one by one: a rolling restart (each replica
replaced once, one after the other) is no crash loop, and a finding names the replica(s) that
loop.  Restarts whose replica no source names are judged together, as one server's.
"""

from __future__ import annotations

import math
import statistics

from crdscope.base.facts import LimitOrigin, MemoryLimit
from crdscope.base.settings import Thresholds
from crdscope.costmodel.attribution import StartupNeed, startup_need
from crdscope.base.samples.health import HealthSample
from crdscope.base.samples.inventory import InventorySample
from crdscope.base.restarts import RestartEvent
from crdscope.base.samples.version import VersionSample

from .model import Finding, Severity, format_duration
from .observations import Observations, fmt_count, kubernetes_minor
from .spec import AlertRule, CheckSpec, PromQL

CRASH_LOOP = "apiserver-crash-looping"
MIB = float(1 << 20)
#: Memory within this fraction of the limit before a death makes an OOM kill likely.
NEAR_LIMIT_FRACTION = 0.9
#: A limit that fits leaves this much above the upper end of the cost model's interval for what the
#: CRDs need at start-up (the model's value can be 25% low: a limit at it may be killed again).
HEADROOM_FRACTION = 0.3
#: Deaths listed by the memory they were last seen with.
SHOWN_DEATHS = 5


def loop_of(events: tuple[RestartEvent, ...], thresholds: Thresholds, now: float,
            down: bool) -> list[RestartEvent]:
    """The restarts of the crash loop going on now (empty: none).

    The loop is the chain of restarts ending with the latest, each within a window of the one
    before; it counts once some ``crashloop_restarts`` of it fall within one window, and lasts
    while the server is down or has not yet served ``crashloop_quiet_seconds`` since.
    """
    ordered = sorted(events, key=lambda e: e.at)
    if not ordered:
        return []
    if not down and now - ordered[-1].at > thresholds.crashloop_quiet_seconds:
        return []
    chain = [ordered[-1]]
    for event in reversed(ordered[:-1]):
        if chain[0].at - event.at > thresholds.crashloop_window_seconds:
            break
        chain.insert(0, event)
    need = max(1, thresholds.crashloop_restarts)
    dense = any(chain[i + need - 1].at - chain[i].at <= thresholds.crashloop_window_seconds
                for i in range(len(chain) - need + 1))
    return chain if dense else []


def looping_replicas(events: tuple[RestartEvent, ...], thresholds: Thresholds, now: float,
                     down: bool) -> dict[str, list[RestartEvent]]:
    """Replica -> the restarts of its crash loop going on now, for each replica that loops ("":
    restarts no source could place on a replica)."""
    by_replica: dict[str, list[RestartEvent]] = {}
    for event in events:
        by_replica.setdefault(event.replica, []).append(event)
    named = [name for name in by_replica if name]
    loops = {}
    for replica, own in by_replica.items():
        # While the address answers nothing, every replica is down; while one of several answers,
        # a replica's loop lasts only through its own quiet spell.
        loop = loop_of(tuple(own), thresholds, now, down)
        if loop:
            loops[replica] = loop
    if len(named) <= 1 and "" in by_replica and not loops:
        # One server (or no names at all): its unnamed and named restarts are the same process's.
        pooled = loop_of(events, thresholds, now, down)
        if pooled:
            loops[named[0] if named else ""] = pooled
    return loops


def crash_loop(obs: Observations) -> list[Finding]:
    """One critical finding while an API server crash-loops (restarts from every source), naming the
    replica(s) that loop where several serve."""
    health = obs.latest(HealthSample)
    if health is None:
        return []
    loops = looping_replicas(health.restart_events, obs.thresholds, obs.now, health.down)
    if not loops:
        return []
    loop = sorted((e for events in loops.values() for e in events), key=lambda e: e.at)
    replicas = sorted(name for name in loops if name)
    several = len({e.replica for e in health.restart_events if e.replica}) > 1 or (health.apiservers or 0) > 1
    who = f" (replica {', '.join(replicas)})" if replicas and several else ""
    last_good = obs.good(HealthSample)
    start = loop[0].at
    span = max(obs.now - start, 1.0)
    evidence = [f"health.restarts = {fmt_count(health.restarts)} during the watch, counted by "
                f"{health.restarts_source or '?'} ({_sources(health)}); {len(loop)} in this loop since "
                f"{format_duration(obs.now - start)} ago"]
    if who:
        evidence.append("restarts per replica: " + ", ".join(
            f"{name or 'unnamed'} {sum(1 for e in health.restart_events if e.replica == name)}"
            for name in sorted({e.replica for e in health.restart_events})))
    uptime, uptime_line = _uptime(loop)
    if uptime_line:
        evidence.append(uptime_line)
    down_share = _down_share(health, start, obs.now)
    evidence.append(f"down {down_share:.0%} of the time since the loop began (health.outages)")

    limit = obs.facts.memory_limit_bytes
    oom, oom_evidence = _oom(health, loop, limit, obs)
    evidence += oom_evidence
    need = _need(health, last_good, obs)
    if need is not None:
        evidence += _need_lines(need, health)

    verdict = {"confirmed": ", OOM-killed", "likely": ", OOM-killed (likely)"}.get(oom, "")
    # "Up" is each process's lifetime; what callers saw is answered or not: a process that lives 6 s
    # and dies before it serves left the drill's title reading "up ~5.8 s each time, down 100%".
    lived = f", each process lived ~{format_duration(uptime)}" if uptime is not None else ""
    title = (f"API server crash-looping{who}{verdict}: {len(loop)} restarts in {format_duration(span)}{lived}, "
             f"not answering {down_share:.0%} of the time")
    if oom:
        remedy = _oom_remedy(obs.facts.memory_limit, need, last_good, obs.facts.lab.name)
        return [Finding(CRASH_LOOP, Severity.CRITICAL, title, tuple(evidence), OOM_CAUSE, remedy, since=start)]
    return [Finding(CRASH_LOOP, Severity.CRITICAL, title, tuple(evidence), CRASH_CAUSE, CRASH_REMEDY, since=start)]


#: Why a server that is OOM-killed again and again is killed.
OOM_CAUSE = ("the API server needs more memory than its limit allows: at start-up it loads every CRD "
             "from etcd (schemas, validators, a storage and watch cache per CRD version) and is killed "
             "before or soon after it serves, then restarted to do the same")
#: Why a server crash-loops when memory is not why, and what to do.
CRASH_CAUSE = ("the API server process exits or is killed again and again: a crash at start-up (flags, "
               "certificates, etcd unreachable), a failing liveness probe, or memory the platform does "
               "not report")
CRASH_REMEDY = ("read the API server's last log lines before each death (kubectl logs --previous, "
                "crictl logs, journalctl) and the container's last terminated reason")


def _uptime(loop: list[RestartEvent]) -> tuple[float | None, str]:
    """How long each process of the loop lived (the median), and the evidence line saying so."""
    uptimes = [e.uptime_seconds for e in loop if e.uptime_seconds is not None]
    if uptimes:
        uptime = statistics.median(uptimes)
        return uptime, f"typical uptime {format_duration(uptime)} before each death (median of {len(uptimes)})"
    gaps = [b.at - a.at for a, b in zip(loop, loop[1:], strict=False)]
    if gaps:
        uptime = statistics.median(gaps)
        return uptime, f"a restart every {format_duration(uptime)} (median gap)"
    return None, ""


def _crash_loop_rules(q: PromQL) -> tuple[AlertRule, ...]:
    looping = f"{q.grew(q.crdscope('crdscope_health_restarts_total'))} >= {q.thresholds.crashloop_restarts}"
    near_limit = (f"max_over_time(({q.crdscope('crdscope_health_rss_bytes')} / "
                  f"{q.crdscope('crdscope_health_memory_limit_bytes')})[{q.window}:30s]) >= {NEAR_LIMIT_FRACTION:g}")
    return (
        AlertRule("CrdscopeAPIServerCrashLooping", "critical", looping, "API server crash-looping",
                  "{{ $value }} API server restarts within " f"{q.window}" " (crdscope_health_restarts_total, "
                  "counted from process start times, identity Leases, the lab or kube-state-metrics).",
                  keep_firing_for=q.quiet),
        AlertRule("CrdscopeAPIServerOOMCrashLoop", "critical",
                  f"({looping}) and on(job, instance, cluster) "
                  f"({q.grew(q.crdscope('crdscope_health_oom_kills_total'))} > 0 or {near_limit})",
                  "API server crash-looping, OOM-killed",
                  "Restarting again and again with memory at its limit (or the platform counting OOM kills): "
                  "raise the limit or install fewer CRDs; `crdscope doctor` names what the CRDs need.",
                  keep_firing_for=q.quiet),
    )


CRASH_LOOP_CHECK = CheckSpec(
    crash_loop, "API server crash-looping (restarts from start times, Leases, the lab, kube-state-metrics)",
    probes=(HealthSample,), also_reads=(VersionSample, InventorySample),
    thresholds=("crashloop_restarts", "crashloop_window_seconds", "crashloop_quiet_seconds"),
    constants=("NEAR_LIMIT_FRACTION", "HEADROOM_FRACTION"), rules=_crash_loop_rules, kinds=(CRASH_LOOP,))


def _sources(health: HealthSample) -> str:
    return ", ".join(f"{source} {count}" for source, count in sorted(health.restarts_by_source.items())) or "-"


def _down_share(health: HealthSample, start: float, now: float) -> float:
    down = 0.0
    for outage in health.outages:
        end = outage.end if outage.end is not None else now
        down += max(0.0, min(end, now) - max(outage.start, start))
    return min(1.0, down / max(now - start, 1.0))


def _oom(health: HealthSample, loop: list[RestartEvent], limit: int | None,
         obs: Observations) -> tuple[str, list[str]]:
    """("confirmed" | "likely" | "", evidence lines)."""
    evidence: list[str] = []
    killed = [e for e in loop if e.oom_killed]
    confirmed = bool(killed) or bool(health.oom_killed_pods)
    if killed:
        evidence.append(f"OOM-killed: {len(killed)} of {len(loop)} deaths ({killed[-1].source}: the memory "
                        f"group's OOM-kill counter rose; health.oom_kills = {fmt_count(health.oom_kills)})")
    if health.oom_killed_pods:
        evidence.append(f"health.oom_killed_pods = {', '.join(health.oom_killed_pods)} (kube-state-metrics: "
                        "last terminated reason OOMKilled)")
    deaths = [e.rss_bytes_at_death for e in loop if e.rss_bytes_at_death]
    peak = max((s.rss_bytes for s in obs.health_history()
                if s.rss_bytes and s.timestamp >= loop[0].at - obs.thresholds.crashloop_window_seconds), default=None)
    near = False
    if limit:
        if deaths:
            shown = ", ".join(f"{d / MIB:,.0f}" for d in deaths[-SHOWN_DEATHS:])
            evidence.append(f"memory when last seen before a death: {shown} MiB (health.restart_events, from "
                            f"scrapes); limit {limit / MIB:,.0f} MiB")
            near = any(d >= NEAR_LIMIT_FRACTION * limit for d in deaths)
        if peak:
            evidence.append(f"highest resident memory seen in the loop {peak / MIB:,.0f} MiB = {peak / limit:.0%} "
                            f"of the {limit / MIB:,.0f} MiB limit")
            near = near or peak >= NEAR_LIMIT_FRACTION * limit
        if not deaths and not peak:
            evidence.append(f"limit {limit / MIB:,.0f} MiB; no process of the loop served a scrape (each died "
                            "before it served /metrics)")
    else:
        evidence.append("memory limit unknown (--memory-limit, the lab's cap, or --prometheus with "
                        "kube-state-metrics): an OOM kill cannot be judged")
    if confirmed:
        return "confirmed", evidence
    return ("likely" if near else ""), evidence


def _need(health: HealthSample, last_good: HealthSample | None, obs: Observations) -> StartupNeed | None:
    """What the cost model says the cluster's CRDs need at start-up (None: no CRD count known).

    The CRD count is the newest known, from a failed sample too: it is the CRD watch's, which
    outlives the server's answers.  A server killed while CRDs were being added may never answer a
    good sample that saw them (the drill's first death came within one health interval of the
    load), and the CRDs it reloads and dies on are the ones the watch saw added.  They are priced by
    their own terms where the watch counted them (the inventory's served versions and schema bytes,
    per CRD, for that count), else as typical CRDs.
    """
    crds = health.crds if health.crds is not None else (last_good.crds if last_good else None)
    if not crds:
        return None
    minor = kubernetes_minor(obs)
    inventory = obs.good(InventorySample)
    if inventory is None or not inventory.crds or not inventory.crd_schema_bytes:
        return startup_need(crds, minor)
    share = crds / inventory.crds
    return startup_need(crds, minor, served_versions=(inventory.served_versions or 0) * share,
                        schema_bytes=inventory.crd_schema_bytes * share)


def _need_lines(need: StartupNeed, health: HealthSample) -> list[str]:
    """The evidence of what the CRDs need: the count and how it was priced, the model's interval."""
    seen = " (the CRD watch's count; the server has not answered since)" if health.error and health.crds else ""
    priced = ("their own served versions and schema bytes, as the CRD watch counted them (inventory."
              "served_versions, crd_schema_bytes)" if need.own_terms else "typical CRDs of a real provider")
    span = need.crd_bytes
    return [f"health.crds = {fmt_count(need.crds)}{seen}: the cost model (Kubernetes {need.minor}, {priced}) puts "
            f"the server at ~{need.total_bytes / MIB:,.0f} MiB with them ({need.base_bytes / MIB:,.0f} MiB without "
            f"CRDs, ~{need.per_crd_bytes / MIB:.2f} MiB per CRD)",
            f"the model's interval: {need.baseline_bytes / MIB:,.0f} MiB for the server without CRDs plus "
            f"{span.low / MIB:,.0f}-{span.high / MIB:,.0f} MiB for the CRDs (±{need.relative:.0%} of "
            f"{span.value / MIB:,.0f} MiB): at most ~{need.high_bytes / MIB:,.0f} MiB"]


def limit_to_raise(need: StartupNeed) -> int:
    """The limit the remedy names, in MiB: the upper end of the model's interval for what the CRDs
    need, plus :data:`HEADROOM_FRACTION`, rounded up to a whole MiB."""
    return math.ceil(need.high_bytes * (1 + HEADROOM_FRACTION) / MIB)


def _how_to_raise(limit: MemoryLimit | None, mib: int, lab_name: str | None) -> str:
    """Where a limit of ``mib`` MiB is set, by where the limit came from."""
    if limit is not None and limit.origin is LimitOrigin.LAB:
        return f": `crdscope lab limit {mib}Mi{f' --name {lab_name}' if lab_name else ''}`"
    if limit is not None and limit.origin is LimitOrigin.FLAG:
        return f" (the API server's resources.limits.memory: {mib}Mi; then watch with `--memory-limit {mib}Mi`)"
    return f" (the API server's resources.limits.memory: {mib}Mi)"


def _oom_remedy(limit: MemoryLimit | None, need: StartupNeed | None, last_good: HealthSample | None,
                lab_name: str | None) -> str:
    parts = []
    if need is not None:
        mib = limit_to_raise(need)
        now = f"; now {limit.bytes / MIB:,.0f} MiB" if limit else ""
        parts.append(f"raise the memory limit to at least {mib:,} MiB{_how_to_raise(limit, mib, lab_name)} (the upper "
                     f"end of the cost model's interval for the {fmt_count(need.crds)} CRDs stored, "
                     f"~{need.high_bytes / MIB:,.0f} MiB, plus {HEADROOM_FRACTION:.0%}{now})")
    else:
        parts.append("raise the memory limit")
    unused = last_good.crds_without_objects if last_good else None
    if unused:
        parts.append(f"or remove CRDs no one uses ({fmt_count(unused)} have no objects; with Crossplane v2 a "
                     "ManagedResourceActivationPolicy activating only the kinds in use)")
    else:
        parts.append("or install fewer CRDs (with Crossplane v2, a ManagedResourceActivationPolicy activating "
                     "only the kinds in use)")
    parts.append("until then the server restarts into the same kill: stop the installer adding CRDs (the limit "
                 "named is for the CRDs stored: `crdscope estimate SOURCE` prices what an installer still adds)")
    return "; ".join(parts)
