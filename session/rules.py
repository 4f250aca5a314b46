"""``crdscope rules``: Prometheus alerting rules that give the findings' verdicts without a screen.

The rules read the exporter's series (``crdscope watch --headless --serve-metrics``)
and, where they suffice, the API server's own ``/metrics``; thresholds come
from the same ``[thresholds]`` settings the findings use, so a fleet's
Prometheus and a person's terminal agree.  ``CrdscopeFinding`` fires for any
finding the exporter reports open (``crdscope_finding_open``), the catch-all
for findings no raw series can express (the local kubectl's discovery, say).
"""

from __future__ import annotations

from typing import Any

from crdscope.findings.checks import DEFAULT_CANARY_SLO_SECONDS
from crdscope.findings.crashloop import NEAR_LIMIT_FRACTION
from crdscope.base.settings import Thresholds

#: ``job`` label of the scrape of crdscope's exporter in the rules' selectors (overridable).
DEFAULT_JOB = "crdscope"


def alerting_rules(thresholds: Thresholds | None = None, job: str | None = DEFAULT_JOB,
                   apiserver_job: str | None = "apiserver") -> dict[str, Any]:
    """The rule file as a dict (``groups:``), ready for YAML."""
    t = thresholds or Thresholds()
    sel = f'job="{job}"' if job else ""
    api = f'job="{apiserver_job}"' if apiserver_job else ""

    def m(name: str, extra: str = "") -> str:
        labels = ",".join(x for x in (sel, extra) if x)
        return f"{name}{{{labels}}}" if labels else name

    def a(name: str, extra: str = "") -> str:
        labels = ",".join(x for x in (api, extra) if x)
        return f"{name}{{{labels}}}" if labels else name

    version_canary = m("crdscope_latency_canaries_p99_seconds", 'canary="version"')
    window = f"{t.crashloop_window_seconds:g}s"
    quiet = f"{t.crashloop_quiet_seconds:g}s"

    def grew(series: str) -> str:
        # A counter's rise within the window, exactly: increase() extrapolates to the window's
        # edges and would read 3 restarts as 2.9 or 3.4.
        return f"(max_over_time({series}[{window}]) - min_over_time({series}[{window}]))"

    crash_loop = f"{grew(m('crdscope_health_restarts_total'))} >= {t.crashloop_restarts}"
    rules = [
        _rule("CrdscopeAPIServerNotAnswering", "critical",
              f"{m('crdscope_responsiveness_unanswered_seconds')} > {t.unanswered_seconds_critical:g} or "
              f"{m('crdscope_responsiveness_ping_waiting_seconds')} > {t.ping_unanswered_seconds_critical:g}",
              "API server not answering",
              "A request of crdscope has waited {{ $value | humanizeDuration }} for an answer (or connections "
              "fail): the API server is stopped, stuck or unreachable."),
        _rule("CrdscopeAPFRejecting", "warning",
              f"{m('crdscope_throttling_priority_levels_rejected_per_second')} > 0",
              "APF rejecting requests at priority level {{ $labels.priority_level }}",
              "{{ $value | humanize }} requests/s rejected (429) at {{ $labels.priority_level }}."),
        _rule("CrdscopeAPFRejectingHard", "critical",
              f"{m('crdscope_throttling_priority_levels_rejected_per_second')} >= "
              f"{t.apf_rejected_per_second_critical:g}",
              "APF rejecting many requests at priority level {{ $labels.priority_level }}",
              "{{ $value | humanize }} requests/s rejected (429) at {{ $labels.priority_level }}."),
        _rule("APIServerAPFRejecting", "warning",
              f"sum by (instance, priority_level, flow_schema) "
              f"(rate({a('apiserver_flowcontrol_rejected_requests_total')}[2m])) > 0",
              "APF rejecting requests at {{ $labels.priority_level }} (flow schema {{ $labels.flow_schema }})",
              "From the API server's own apiserver_flowcontrol_rejected_requests_total: "
              "{{ $value | humanize }}/s."),
        _rule("CrdscopeCanaryLatencyOverSLO", "warning",
              f"({m('crdscope_latency_canaries_p99_seconds')} > on(job, instance, canary) "
              f"{m('crdscope_latency_canaries_slo_seconds')}) or "
              f"{version_canary} > {DEFAULT_CANARY_SLO_SECONDS:g}",
              "canary {{ $labels.canary }} p99 over its SLO",
              "p99 {{ $value | humanizeDuration }} over 5 minutes of crdscope's canary requests."),
        _rule("CrdscopeServerLatencyOverSLO", "warning",
              f"{m('crdscope_latency_p99_by_verb_scope')} > on(job, instance, verb_scope) "
              f"{m('crdscope_latency_slo_seconds')}",
              "{{ $labels.verb_scope }} requests: server-side p99 over the SLO",
              "p99 {{ $value | humanizeDuration }} (apiserver_request_sli_duration_seconds)."),
        _rule("CrdscopeOpenAPIBehind", "warning",
              f"{m('crdscope_openapi_backlog')} >= {t.openapi_backlog_warn} or "
              f"{m('crdscope_openapi_backlog_oldest_seconds')} > {t.openapi_oldest_seconds_warn:g}",
              "OpenAPI publication behind", "CRDs Established but not yet published in /openapi/v3."),
        _rule("CrdscopeMemoryPerCRD", "warning",
              f"{m('crdscope_health_mib_per_crd')} > {t.memory_mib_per_crd_warn:g} and "
              f"{m('crdscope_health_r2')} >= 0.8",
              "API server memory {{ $value | humanize }} MiB per CRD", "Least-squares fit of RSS against CRDs."),
        _rule("CrdscopeAPIServerRestarted", "warning",
              f"increase({m('crdscope_health_restarts_total')}[15m]) > 0",
              "API server restarted", "process_start_time_seconds moved forward."),
        _rule("CrdscopeAPIServerCrashLooping", "critical", crash_loop,
              "API server crash-looping",
              "{{ $value }} API server restarts within " f"{window}" " (crdscope_health_restarts_total, counted "
              "from process start times, identity Leases, the lab or kube-state-metrics).",
              keep_firing_for=quiet),
        _rule("CrdscopeAPIServerOOMCrashLoop", "critical",
              f"({crash_loop}) and on(job, instance) ({grew(m('crdscope_health_oom_kills_total'))} > 0 or "
              f"max_over_time(({m('crdscope_health_rss_bytes')} / {m('crdscope_health_memory_limit_bytes')})"
              f"[{window}:30s]) >= {NEAR_LIMIT_FRACTION:g})",
              "API server crash-looping, OOM-killed",
              "Restarting again and again with memory at its limit (or the platform counting OOM kills): "
              "raise the limit or install fewer CRDs; `crdscope doctor` names what the CRDs need.",
              keep_firing_for=quiet),
        _rule("CrdscopeUnusedCRDs", "info",
              f"{m('crdscope_health_crds_without_objects')} / {m('crdscope_health_crds')} > "
              f"{t.unused_crds_fraction_info:g} and {m('crdscope_health_crds')} >= 100",
              "most CRDs have no objects", "{{ $value | humanizePercentage }} of the CRDs have no objects."),
        _rule("CrdscopeFinding", "{{ $labels.severity }}",
              f"{m('crdscope_finding_open')} == 1",
              "crdscope finding {{ $labels.finding }}", "See `crdscope doctor` for its evidence and remedy."),
    ]
    return {"groups": [{"name": "crdscope", "rules": rules}]}


def _rule(name: str, severity: str, expr: str, summary: str, description: str, *,
          keep_firing_for: str | None = None) -> dict[str, Any]:
    rule: dict[str, Any] = {"alert": name, "expr": expr}
    if keep_firing_for:  # Prometheus 2.42+: hold the alert through a quiet spell, as the finding does
        rule["keep_firing_for"] = keep_firing_for
    rule.update({"labels": {"severity": severity}, "annotations": {"summary": summary, "description": description}})
    return rule


def render_rules(thresholds: Thresholds | None = None, job: str | None = DEFAULT_JOB,
                 apiserver_job: str | None = "apiserver") -> str:
    """The rule file as YAML text (``promtool check rules`` reads it)."""
    import yaml

    return yaml.safe_dump(alerting_rules(thresholds, job, apiserver_job), sort_keys=False, width=200)
