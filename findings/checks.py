"""Findings about availability, latency, APF and OpenAPI publication, from the latest samples.

Each check takes :class:`Observations` and returns the findings that hold now
(``since`` 0: the engine stamps it when the finding opens, unless the check
knows better, as "not answering" does).  Evidence names each figure as
``probe.field`` so a person can find it in ``crdscope probe NAME --json``.

Each check also declares the event lines of its subject (readyz failing, latency SLOs breached,
429s, the OpenAPI backlog growing) and the :class:`Judgement` s its panels colour by.
"""

from __future__ import annotations

from collections.abc import Mapping

from crdscope.base.facts import ServerAway
from crdscope.base.samples.throttling import PriorityLevel, ThrottlingSample
from crdscope.base.samples.health import HealthSample
from crdscope.base.samples.latency import Canary, LatencySample
from crdscope.base.samples.openapi import OpenAPISample
from crdscope.base.samples.responsiveness import ResponsivenessSample

from .model import Finding, Severity
from .observations import Observations, fmt_count, fmt_seconds
from .spec import AlertRule, CheckSpec, EventRule, Holding, Judgement, Judging, PromQL, Said

#: Canaries with no official SLO (GET /version is a non-resource request) are held to the
#: single-object read SLO: a cheap read that takes longer than 1 s is slow by any measure.
DEFAULT_CANARY_SLO_SECONDS = 1.0
#: What each canary's request is, as the SLOs name verbs and scopes.
CANARY_VERB_SCOPE = {
    "version": "GET non-resource",
    "get_namespace": "GET resource",
    "list_crds": "LIST cluster",
    "list_cr": "LIST cluster",
}
#: The resource each canary requests (the custom resource canary's is the sample's ``cr_resource``).
CANARY_RESOURCE = {"get_namespace": "namespaces", "list_crds": "customresourcedefinitions.apiextensions.k8s.io"}
#: An APF level whose requests wait this long (p99) in its queues is queueing noticeably.
APF_WAIT_WARN_SECONDS = 1.0


def canary_slo_seconds(name: str, canary: Canary) -> float:
    """The SLO a canary is held to: its own, else :data:`DEFAULT_CANARY_SLO_SECONDS`."""
    slo = canary.slo_seconds
    return float(slo) if slo is not None else DEFAULT_CANARY_SLO_SECONDS


def canaries_over_slo(latency: LatencySample) -> list[str]:
    """Names of the canaries whose rolling p99 is over the SLO they are held to."""
    over = []
    for name, canary in (latency.canaries or {}).items():
        p99 = canary.p99_seconds
        if p99 is not None and p99 > canary_slo_seconds(name, canary):
            over.append(name)
    return over


# --------------------------------------------------------------------------- 1. not answering


NOT_ANSWERING = "apiserver-not-answering"


def not_answering(obs: Observations) -> list[Finding]:
    """A request unanswered past the threshold, an HTTP/2 PING unanswered past its own (shorter)
    one, or health checks failing to reach the server."""
    limit = obs.thresholds.unanswered_seconds_critical
    ping_limit = obs.thresholds.ping_unanswered_seconds_critical
    responsive = obs.latest(ResponsivenessSample)
    evidence: list[str] = []
    since = 0.0
    if responsive is not None:
        waited = float(responsive.unanswered_seconds or 0.0)
        # Recordings made before the PING existed have no such field (None: no PING in use).
        pinged = responsive.ping_waiting_seconds
        ping_waited = float(pinged) if pinged is not None else 0.0
        by_ping = ping_waited > ping_limit
        if waited <= limit and not by_ping:
            return []
        since = responsive.timestamp - max(waited if waited > limit else 0.0, ping_waited if by_ping else 0.0)
        oldest = responsive.oldest_request
        failure = responsive.last_failure
        ping_state = responsive.ping_state
        if by_ping:
            how = {"refused": "connections for it refused", "connecting": "its connection's TLS handshake waiting",
                   "starting": "its connection's TLS handshake waiting",
                   "unreachable": "its connection failing"}.get(ping_state, "")
            evidence.append(f"responsiveness.ping_waiting_seconds = {fmt_seconds(pinged)}: HTTP/2 PING unanswered "
                            f"for {fmt_seconds(pinged)}" + (f" ({how})" if how else "")
                            + f" (the server answers PINGs without a request; threshold {ping_limit:g} s)")
            ping_failure = responsive.ping_failure
            if ping_failure:
                evidence.append(f"responsiveness.ping_failure = {ping_failure}")
        if oldest:
            evidence.append(f"responsiveness.oldest_request_seconds = {fmt_seconds(responsive.oldest_request_seconds)}"
                            f" ({oldest}, waiting for its answer; threshold {limit:g} s)")
        if failure:
            evidence.append(f"responsiveness.last_failure = {failure} (no answer since)")
        evidence.append(f"responsiveness.in_flight = {responsive.in_flight} requests of crdscope's shared client")
        if by_ping and ping_state:
            refused = ping_state == "refused"
        else:
            refused = failure is not None and "Connect" in failure and not oldest
        # One title whichever rule holds while PINGs are in use: after a freeze the PING is answered
        # a moment before the requests caught in it, and the title must not change at that moment.
        pinging = pinged is not None
    else:  # a recording or a run without the responsiveness probe: the health probe's view
        health = obs.latest(HealthSample)
        if health is None or health.error is None:
            return []
        evidence.append(f"health.error = {health.error}")
        refused = "refused" in health.error
        pinging = False
    title = ("API server unreachable: connections refused" if refused
             else "API server not answering: no reply to requests or HTTP/2 PINGs" if pinging
             else "API server not answering: requests wait with no reply")
    cause = ("the API server process is not running or not listening (crashed, restarting, wrong port)"
             if refused else
             "the API server process is stopped or stuck (SIGSTOP, CPU starvation, a deadlock, etcd stalls "
             "it), or the network between here and it drops packets")
    remedy = ("check the API server process and its logs (kubectl is as blind as crdscope now); on a "
              "control plane node: crictl ps / journalctl; a managed cluster: the provider's status page")
    return [Finding(NOT_ANSWERING, Severity.CRITICAL, title, tuple(evidence), cause, remedy, since=since)]


def _not_answering_rules(q: PromQL) -> tuple[AlertRule, ...]:
    t = q.thresholds
    return (AlertRule(
        "CrdscopeAPIServerNotAnswering", "critical",
        f"{q.crdscope('crdscope_responsiveness_unanswered_seconds')} > {t.unanswered_seconds_critical:g} or "
        f"{q.crdscope('crdscope_responsiveness_ping_waiting_seconds')} > {t.ping_unanswered_seconds_critical:g}",
        "API server not answering",
        "A request of crdscope has waited {{ $value | humanizeDuration }} for an answer (or connections "
        "fail): the API server is stopped, stuck or unreachable."),)


def server_away(open_findings: Mapping[str, Finding]) -> ServerAway | None:
    """The "not answering" finding's verdict, for the facts (the health probe dates its outage by it)."""
    finding = open_findings.get(NOT_ANSWERING)
    return ServerAway(finding.since, finding.title) if finding is not None else None


def _readyz_failing(judging: Judging[HealthSample]) -> Holding:
    ready = judging.sample.ready
    if ready is None:
        return None  # readiness not observable (forbidden): what held stands
    if ready:
        return {}
    failing = first_few(list(judging.sample.failing_checks)) or "no check named"
    return {"": Said(Severity.CRITICAL, f"readyz failing: {failing}")}


#: The events log's line while the API server answers /readyz with failing checks.
READYZ_FAILING = EventRule(HealthSample, "readyz-failing", "readyz-recovered", _readyz_failing,
                           lambda _key, _judging: "readyz ok again")


def first_few(names: list[str], shown: int = 3) -> str:
    """``a, b, c (+4 more)``: a restarting server fails a dozen checks at once."""
    more = f" (+{len(names) - shown} more)" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


NOT_ANSWERING_CHECK = CheckSpec(
    not_answering, "API server answering (HTTP/2 PINGs, requests in flight, health checks)",
    probes=(ResponsivenessSample,), also_reads=(HealthSample,),
    thresholds=("unanswered_seconds_critical", "ping_unanswered_seconds_critical"), rules=_not_answering_rules,
    kinds=(NOT_ANSWERING,), events=(READYZ_FAILING,))


# --------------------------------------------------------------------------- 2. latency against SLOs


def latency_slo(obs: Observations) -> list[Finding]:
    """One finding per canary or server-side verb and scope whose p99 is over its SLO."""
    latency = obs.good(LatencySample)
    if latency is None:
        return []
    found = []
    for name in canaries_over_slo(latency):
        canary = latency.canaries[name]
        slo = canary_slo_seconds(name, canary)
        own = "" if canary.slo_seconds is not None else " (no official SLO: held to the 1 s single-object read SLO)"
        what = CANARY_VERB_SCOPE.get(name, name)
        resource = latency.cr_resource if name == "list_cr" else CANARY_RESOURCE.get(name, "")
        if resource:
            what += f" {resource}"
        found.append(Finding(
            f"latency-slo:canary {name}", Severity.WARNING,
            f"slow requests: {what} canary {name} p99 {fmt_seconds(canary.p99_seconds)} over its {slo:g} s SLO",
            (f"latency.canaries.{name}.p99_seconds = {fmt_seconds(canary.p99_seconds)} over {canary.count} "
             f"requests in the last 5 minutes, timed by crdscope; SLO {slo:g} s{own}",
             f"latency.canaries.{name}.seconds = {fmt_seconds(canary.seconds)} (the latest one)"),
            "the API server or etcd is slow or was stalled (a long GC, CPU starvation, a freeze, an etcd "
            "leader change); a p99 over 5 minutes keeps a stall in view for 5 minutes after it",
            "compare with the server-side p99 (latency.p99_by_verb_scope) and etcd's latency; if the server is "
            "healthy again the finding closes when the stall leaves the 5-minute window"))
    found += [_server_breach(latency, key) for key in latency.slo_breaches or ()]
    return found


def _server_breach(latency: LatencySample, key: str) -> Finding:
    """The finding of one "VERB scope" whose server-side p99 is over its SLO, naming the resources behind it."""
    p99 = (latency.p99_by_verb_scope or {}).get(key)
    limit = (latency.slo_seconds or {}).get(key)
    slo_text = "its" if limit is None else f"the {limit:g} s"
    count = (latency.requests_by_verb_scope or {}).get(key)
    # Recordings made before the resources were counted have none: the title then names the verb alone.
    slowest = [(name.removeprefix(key + " "), n) for name, n in (latency.requests_over_slo or {}).items()
               if name.startswith(key + " ")]
    evidence = [f"latency.p99_by_verb_scope[{key}] = {fmt_seconds(p99)} from {latency.server_family} over "
                f"{fmt_seconds(latency.window_seconds)} ({fmt_count(count)} requests), the server's own histogram"]
    if slowest:
        evidence.append("latency.requests_over_slo: " + ", ".join(
            f"{resource} {fmt_count(n)}" for resource, n in slowest) + f" requests over {slo_text} SLO in the "
            "window (the resources with the most)")
    to = f" to {', '.join(resource for resource, _ in slowest)}" if slowest else ""
    return Finding(
        f"latency-slo:{key}", Severity.WARNING,
        f"{key} requests{to}: server-side p99 {fmt_seconds(p99)} over {slo_text} SLO", tuple(evidence),
        "the API server is slow to serve these requests: big LISTs, a slow conversion webhook of the resource's "
        "CRD, etcd latency, or memory pressure (GC)" + (
            "; admission webhooks and APF queueing are not in this histogram" if latency.server_family.endswith(
                "_sli_duration_seconds") else "; or admission webhooks, or APF queueing"),
        "look at the resources named (apiserver_request_sli_duration_seconds by resource and version), their "
        "CRD's conversion webhook (webhooks panel) and etcd request latency")


def _latency_rules(q: PromQL) -> tuple[AlertRule, ...]:
    version_canary = q.crdscope("crdscope_latency_canaries_p99_seconds", 'canary="version"')
    return (
        AlertRule("CrdscopeCanaryLatencyOverSLO", "warning",
                  f"({q.crdscope('crdscope_latency_canaries_p99_seconds')} > on(job, instance, cluster, canary) "
                  f"{q.crdscope('crdscope_latency_canaries_slo_seconds')}) or "
                  f"{version_canary} > {DEFAULT_CANARY_SLO_SECONDS:g}",
                  "canary {{ $labels.canary }} p99 over its SLO",
                  "p99 {{ $value | humanizeDuration }} over 5 minutes of crdscope's canary requests."),
        AlertRule("CrdscopeServerLatencyOverSLO", "warning",
                  f"{q.crdscope('crdscope_latency_p99_by_verb_scope')} > on(job, instance, cluster, verb_scope) "
                  f"{q.crdscope('crdscope_latency_slo_seconds')}",
                  "{{ $labels.verb_scope }} requests: server-side p99 over the SLO",
                  "p99 {{ $value | humanizeDuration }} (apiserver_request_sli_duration_seconds)."),
    )


def _breaches(judging: Judging[LatencySample]) -> Holding:
    """The open latency-slo findings (the finding is the judge), each said with its p99 and SLO."""
    open_ = {f.id.partition(":")[2]: f for f in judging.findings.values() if f.kind == "latency-slo"}
    return {key: Said(f.severity, f"latency SLO breached: {breach_text(key, judging.sample)}")
            for key, f in open_.items()}


def breach_text(key: str, latency: LatencySample) -> str:
    """A breach (``"VERB scope"``, ``"canary NAME"``) as a person reads it: ``LIST cluster p99 31.00 s > 30 s``."""
    canary = latency.canaries.get(key.removeprefix("canary ")) if key.startswith("canary ") else None
    p99: float | None = latency.p99_by_verb_scope.get(key)
    slo: float | None = latency.slo_seconds.get(key)
    if canary is not None:
        p99, slo = canary.p99_seconds, canary_slo_seconds(key.removeprefix("canary "), canary)
    return f"{key} p99 {p99:.2f} s > {slo:g} s" if p99 is not None and slo is not None else key


#: The events log's lines as each latency-slo finding opens and closes.
LATENCY_SLO_BREACHED = EventRule(LatencySample, "latency-slo-breached", "latency-slo-recovered", _breaches,
                                 lambda key, _judging: f"latency SLO met again: {key}", finding="latency-slo")

LATENCY_SLO_CHECK = CheckSpec(
    latency_slo, "request latency against the SLOs (canaries, server-side p99)",
    probes=(LatencySample,), constants=("DEFAULT_CANARY_SLO_SECONDS",), rules=_latency_rules, kinds=("latency-slo",),
    events=(LATENCY_SLO_BREACHED,))


# --------------------------------------------------------------------------- 5. APF


def apf(obs: Observations) -> list[Finding]:
    """Priority levels rejecting (429) or queueing requests, with the flow schemas behind them."""
    throttling = obs.good(ThrottlingSample)
    if throttling is None:
        return []
    found = []
    for level in throttling.priority_levels or ():
        rate = level.rejected_per_s or 0.0
        rejected = level.rejected or 0
        schemas = [f for f in throttling.flow_schemas or () if f.priority_level == level.name]
        if rejected > 0 or rate > 0:
            rejecting = [f"{f.name} {f.rejected_per_s:.2f}/s" for f in schemas if f.rejected]
            reasons = ", ".join(f"{k} {v}" for k, v in sorted((level.rejected_by_reason or {}).items()))
            evidence = [f"throttling.priority_levels[{level.name}].rejected_per_s = {rate:.2f} "
                        f"({rejected} rejected in {fmt_seconds(throttling.interval_seconds)}; "
                        f"apiserver_flowcontrol_rejected_requests_total)"]
            if reasons:
                evidence.append(f"by reason: {reasons}")
            evidence.append("flow schemas rejected: " + (", ".join(rejecting) or "not named by the metrics"))
            evidence.append(_seats(level))
            severity = APF_REJECTING_HARD.severity if APF_REJECTING_HARD.crossed(rate, obs.thresholds) \
                else Severity.WARNING
            found.append(Finding(
                f"apf-rejecting:{level.name}", severity,
                f"APF rejecting requests at priority level {level.name} ({rate:.2f}/s)", tuple(evidence),
                f"more requests arrive at {level.name} than its seats and queues hold: a client flooding the "
                "server (a controller relisting, a provider installing thousands of CRDs) or a level sized too small",
                f"find the client in the flow schemas above (kubectl get flowschema -o wide); slow it down, or give "
                f"{level.name} more seats (its PriorityLevelConfiguration's nominalConcurrencyShares)"))
        elif (level.wait_p99_seconds or 0.0) > APF_WAIT_WARN_SECONDS:
            queueing = [f"{f.name} ({f.inqueue} in queue)" for f in schemas if f.inqueue]
            found.append(Finding(
                f"apf-queueing:{level.name}", Severity.WARNING,
                f"APF queueing requests at priority level {level.name}: p99 wait {fmt_seconds(level.wait_p99_seconds)}",
                (f"throttling.priority_levels[{level.name}].wait_p99_seconds = {fmt_seconds(level.wait_p99_seconds)}"
                 f", inqueue = {level.inqueue} (apiserver_flowcontrol_request_wait_duration_seconds)",
                 "flow schemas queueing: " + (", ".join(queueing) or "none at the last scrape"), _seats(level)),
                f"{level.name} is at its seat limit; requests wait in its queues before they run",
                "see which flow schemas fill it; if it keeps growing it will reject (429)"))
    return found


def _seats(level: PriorityLevel) -> str:
    return (f"seats in use {level.executing_seats} of {fmt_count(level.limit_seats)}, "
            f"{level.inqueue} waiting in queues")


#: How far back the APF warning looks for rejections (the counter's increase).
APF_RECENT = "2m"
#: A priority level rejecting this many requests a second is critical (fewer: a warning).
APF_REJECTING_HARD = Judgement("APF rejections per second at a priority level", "apf_rejected_per_second_critical",
                               Severity.CRITICAL, inclusive=True)


def _throttled(judging: Judging[ThrottlingSample]) -> Holding:
    """The apf-rejecting findings (server-side 429s, by priority level), and 429s crdscope's own
    requests received since the sample before."""
    holding = {f.id: Said(f.severity, f"429s began: {f.title}")
               for f in judging.findings.values() if f.kind == "apf-rejecting"}
    before = judging.before[-1].responses_429.total if judging.before else None
    if before is not None and judging.sample.responses_429.total > before:
        holding["crdscope"] = Said(Severity.WARNING, "429s began: crdscope received 429s")
    return holding


def _throttling_stopped(key: str, _judging: Judging[ThrottlingSample]) -> str:
    level = key.partition(":")[2]
    return f"429s stopped at priority level {level}" if level else "429s stopped: crdscope answered again"


#: The events log's lines while APF rejects (the apf-rejecting findings) or crdscope receives 429s.
THROTTLED = EventRule(ThrottlingSample, "throttling-began", "throttling-stopped", _throttled, _throttling_stopped,
                      finding="apf-rejecting")


def _apf_rules(q: PromQL) -> tuple[AlertRule, ...]:
    rejected = q.crdscope("crdscope_throttling_priority_levels_rejected_per_second")
    # The warning reads the level's counter, not the per-second gauge: a squeeze shorter than two of
    # Prometheus's scrapes shows in the gauge for one probe run only, and a busy Prometheus missed it
    # (tests/e2e/test_rules_prometheus.py, 1 run in 30 on a loaded machine); the counter keeps it.
    counted = q.crdscope("crdscope_throttling_priority_levels_rejected_total")
    return (
        AlertRule("CrdscopeAPFRejecting", "warning", f"increase({counted}[{APF_RECENT}]) > 0",
                  "APF rejecting requests at priority level {{ $labels.priority_level }}",
                  "Requests rejected (429) at {{ $labels.priority_level }} within the last " + APF_RECENT + ".",
                  finding="apf-rejecting"),
        AlertRule("CrdscopeAPFRejectingHard", "critical",
                  f"{rejected} >= {APF_REJECTING_HARD.limit(q.thresholds):g}",
                  "APF rejecting many requests at priority level {{ $labels.priority_level }}",
                  "{{ $value | humanize }} requests/s rejected (429) at {{ $labels.priority_level }}.",
                  finding="apf-rejecting"),
        AlertRule("APIServerAPFRejecting", "warning",
                  f"sum by (cluster, instance, priority_level, flow_schema) "
                  f"(rate({q.apiserver('apiserver_flowcontrol_rejected_requests_total')}[2m])) > 0",
                  "APF rejecting requests at {{ $labels.priority_level }} (flow schema {{ $labels.flow_schema }})",
                  "From the API server's own apiserver_flowcontrol_rejected_requests_total: "
                  "{{ $value | humanize }}/s.", finding="apf-rejecting"),
    )


APF_CHECK = CheckSpec(
    apf, "APF rejecting or queueing", probes=(ThrottlingSample,),
    thresholds=("apf_rejected_per_second_critical",), constants=("APF_WAIT_WARN_SECONDS",), rules=_apf_rules,
    kinds=("apf-rejecting", "apf-queueing"), judgements=(APF_REJECTING_HARD,), events=(THROTTLED,))


# --------------------------------------------------------------------------- 6. OpenAPI


#: CRDs Established but not yet in /openapi/v3: this many make the finding, a warning line and the
#: panel's warning colour ...
OPENAPI_BACKLOG = Judgement("CRDs Established but not yet published in OpenAPI", "openapi_backlog_warn",
                            inclusive=True)
#: ... as does the oldest of them waiting this long.
OPENAPI_OLDEST = Judgement("seconds the oldest CRD waits for OpenAPI publication", "openapi_oldest_seconds_warn",
                           inclusive=True)
#: Consecutive rises of the OpenAPI backlog that count as "growing" below the warn threshold.
BACKLOG_RISES = 2


def openapi_behind(obs: Observations) -> list[Finding]:
    """CRDs Established but not yet published in OpenAPI, past the thresholds."""
    openapi = obs.good(OpenAPISample)
    if openapi is None:
        return []
    backlog = openapi.backlog or 0
    oldest = openapi.backlog_oldest_seconds
    limits = obs.thresholds
    if not OPENAPI_BACKLOG.crossed(backlog, limits) and not OPENAPI_OLDEST.crossed(oldest, limits):
        return []
    names = ", ".join(list(openapi.backlog_names or ())[:3])
    evidence = [f"openapi.backlog = {backlog} CRDs Established but not in /openapi/v3 (threshold "
                f"{OPENAPI_BACKLOG.limit(limits):g})",
                f"openapi.backlog_oldest_seconds = {fmt_seconds(oldest)} (threshold "
                f"{OPENAPI_OLDEST.limit(limits):g} s)" + (f"; waiting: {names}" if names else "")]
    if openapi.v2_seconds is not None:
        evidence.append(f"openapi.v2_seconds = {fmt_seconds(openapi.v2_seconds)} to build and send /openapi/v2 "
                        f"({fmt_count(openapi.v2_bytes)} bytes): each CRD change rebuilds it")
    return [Finding(
        "openapi-behind", Severity.WARNING,
        f"OpenAPI publication behind: {backlog} CRDs waiting, oldest {fmt_seconds(oldest)}", tuple(evidence),
        "the API server rebuilds the aggregated OpenAPI spec after CRD changes; with thousands of CRDs each "
        "rebuild takes seconds and they queue while CRDs keep arriving",
        "install CRDs in fewer, larger batches or slower; kubectl explain and server-side apply of the new kinds "
        "wait for publication")]


def _openapi_rules(q: PromQL) -> tuple[AlertRule, ...]:
    t = q.thresholds
    return (AlertRule(
        "CrdscopeOpenAPIBehind", "warning",
        f"{q.crdscope('crdscope_openapi_backlog')} >= {OPENAPI_BACKLOG.limit(t):g} or "
        f"{q.crdscope('crdscope_openapi_backlog_oldest_seconds')} >= {OPENAPI_OLDEST.limit(t):g}",
        "OpenAPI publication behind", "CRDs Established but not yet published in /openapi/v3."),)


def _backlog_growing(judging: Judging[OpenAPISample]) -> Holding:
    """Growing from the moment it crosses the threshold or rose :data:`BACKLOG_RISES` times in a row
    (an info line below the threshold), until it drains to 0."""
    backlog = judging.sample.backlog or 0
    if backlog <= 0:
        return {}
    if judging.held:
        return judging.held
    crossed = OPENAPI_BACKLOG.crossed(backlog, judging.thresholds)
    figures = [s.backlog or 0 for s in judging.before] + [backlog]
    rises = next((n for n in range(len(figures) - 1) if figures[-1 - n] <= figures[-2 - n]), len(figures) - 1)
    if not crossed and rises < BACKLOG_RISES:
        return {}
    return {"": Said(OPENAPI_BACKLOG.severity if crossed else Severity.INFO,
                     f"OpenAPI backlog growing: {backlog:.0f} CRDs Established but not yet published")}


#: The events log's lines while the OpenAPI backlog grows, and once it has drained.
OPENAPI_GROWING = EventRule(OpenAPISample, "openapi-backlog-growing", "openapi-backlog-drained", _backlog_growing,
                            lambda _key, _judging: "OpenAPI backlog drained", judgements=(OPENAPI_BACKLOG,),
                            constants=("BACKLOG_RISES",))

OPENAPI_BEHIND_CHECK = CheckSpec(
    openapi_behind, "OpenAPI publication backlog", probes=(OpenAPISample,),
    thresholds=("openapi_backlog_warn", "openapi_oldest_seconds_warn"), rules=_openapi_rules, kinds=("openapi-behind",),
    judgements=(OPENAPI_BACKLOG, OPENAPI_OLDEST), events=(OPENAPI_GROWING,))
