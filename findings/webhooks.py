"""Findings about the webhooks the API server calls: conversion webhooks failing (every read of another
version than the stored one of their CRDs fails) or slow, admission webhooks failing or slow.

Judged only on what the server counted (the webhooks probe's verdicts): a webhook nobody called, a
provider awaiting activation or a lab's provider that never runs, is never a finding.
"""

from __future__ import annotations

from crdscope.base.samples.webhooks import AdmissionWebhook, ConversionWebhook, WebhooksSample

from .model import Finding, Severity
from .observations import Observations, fmt_count, fmt_seconds
from .spec import AlertRule, CheckSpec, PromQL

#: A webhook whose calls take longer than this (p99) slows what waits for it: every list of another
#: version (conversion), every write (admission).  Upjet's conversions take milliseconds.
WEBHOOK_SLOW_SECONDS = 1.0
#: How long a slow interval keeps its finding open (samples come every 10-20 s; a quiet interval,
#: one with no call, says nothing of the webhook's speed).
SLOW_RECENT_SECONDS = 120.0
#: CRD names a finding lists before "and N more".
NAMED = 8
#: The finding kinds (a finding's id is ``<kind>:<webhook>``).
CONVERSION_FAILING, CONVERSION_SLOW = "conversion-webhook-failing", "conversion-webhook-slow"
ADMISSION_FAILING, ADMISSION_SLOW = "admission-webhook-failing", "admission-webhook-slow"


def _named(names: tuple[str, ...], count: int) -> str:
    shown = ", ".join(names[:NAMED])
    return shown + (f" and {count - min(len(names), NAMED)} more" if count > min(len(names), NAMED) else "")


def _conversion_failing(webhook: ConversionWebhook, sample: WebhooksSample) -> Finding:
    interval = (f"{fmt_count(webhook.failures)} of {fmt_count(webhook.conversions)} conversions failed in the last "
                f"{fmt_seconds(sample.interval_seconds)}" if webhook.failures else "no conversion counted since")
    types = ", ".join(f"{kind} {count:,}" for kind, count in sample.conversion_failures_by_type.items())
    evidence = [f"webhooks.conversion_webhooks[{webhook.name}].failing: {interval}; {webhook.failures_total:,} of "
                f"{webhook.conversions_total:,} since the server started "
                "(apiserver_crd_conversion_webhook_duration_seconds, succeeded=\"false\")",
                f"CRDs whose conversions failed: {_named(webhook.failing_crds, webhook.failing_crd_count)}",
                f"CRDs converted through it: {fmt_count(webhook.crds)}"]
    if types:
        evidence.append(f"failed conversion calls by type (every webhook): {types}")
    return Finding(
        f"{CONVERSION_FAILING}:{webhook.name}", Severity.CRITICAL,
        f"conversion webhook failing: {_named(webhook.failing_crds, webhook.failing_crd_count)} "
        f"unreadable in other versions ({webhook.name})", tuple(evidence),
        f"the API server calls {webhook.name} to convert these CRDs' objects between versions, and the calls "
        "fail (the provider's pod down, scaled to zero or OOM-killed, its Service without endpoints, its "
        "certificate rejected): every read of a version other than the stored one fails, and the API "
        "server's watch caches of those versions cannot list",
        "bring the webhook back: for a Crossplane provider, kubectl get providers and its Deployment's pods in "
        "crossplane-system (Running? OOMKilled?); for a Service, kubectl get endpoints; reads of the storage "
        "version still work meanwhile")


def _slow(kind: str, name: str, p99_seconds: float, where: str, waits: str) -> tuple[str, tuple[str, ...], str, str]:
    """A slow webhook's title, evidence, cause and remedy."""
    return (f"{kind} webhook slow: p99 {fmt_seconds(p99_seconds)} ({name})",
            (f"webhooks.{kind}_webhooks[{name}].p99_seconds = {fmt_seconds(p99_seconds)} within the last "
             f"{SLOW_RECENT_SECONDS:g} s (limit {WEBHOOK_SLOW_SECONDS:g} s; {where})",),
            f"the API server waits for {name} on {waits}; it answers slowly (short of CPU or memory, "
            "throttled, or far away)", f"give the webhook's pods more CPU, or more replicas; {waits} wait for it "
            "meanwhile")


def _admission_failing(webhook: AdmissionWebhook) -> Finding:
    return Finding(
        f"{ADMISSION_FAILING}:{webhook.name}", Severity.WARNING,
        f"admission webhook failing: {webhook.name} ({webhook.type or 'admission'})",
        (f"webhooks.admission_webhooks[{webhook.name}].failed = {fmt_count(webhook.failed)} calls failed in the "
         f"last interval; since the server started: {webhook.errors_total:,} rejected by an error, "
         f"{webhook.fail_open_total:,} let through (failurePolicy Ignore) "
         "(apiserver_admission_webhook_rejection_count, apiserver_admission_webhook_fail_open_count)",),
        f"the API server cannot get an answer from {webhook.name}: with failurePolicy Fail the writes it "
        "covers are rejected, with Ignore they pass unchecked, each after the call's timeout",
        "kubectl get validatingwebhookconfigurations,mutatingwebhookconfigurations to find its Service or URL, "
        "then bring the webhook back (or delete a configuration whose webhook is gone for good)")


def slowest_recently(obs: Observations) -> tuple[dict[str, float], dict[str, float]]:
    """The highest p99 within :data:`SLOW_RECENT_SECONDS` of each conversion and admission webhook."""
    conversion: dict[str, float] = {}
    admission: dict[str, float] = {}
    for sample in obs.store.good_history_of(WebhooksSample):
        if obs.now - sample.timestamp > SLOW_RECENT_SECONDS:
            continue
        for into, hooks in ((conversion, sample.conversion_webhooks), (admission, sample.admission_webhooks)):
            for hook in hooks:
                if hook.p99_seconds is not None:
                    into[hook.name] = max(into.get(hook.name, 0.0), hook.p99_seconds)
    return conversion, admission


def webhooks(obs: Observations) -> list[Finding]:
    """Conversion webhooks failing (critical) or slow; admission webhooks failing or slow."""
    sample = obs.good(WebhooksSample)
    if sample is None:
        return []
    found = [_conversion_failing(webhook, sample) for webhook in sample.failing]
    found += [_admission_failing(webhook) for webhook in sample.admission_webhooks if webhook.failing]
    conversion, admission = slowest_recently(obs)
    failing = {webhook.name for webhook in sample.failing}
    found += [Finding(f"{CONVERSION_SLOW}:{name}", Severity.WARNING, *_slow(
                  "conversion", name, p99, "apiserver_crd_conversion_webhook_duration_seconds",
                  "every list and watch event of its CRDs in another version"))
              for name, p99 in sorted(conversion.items()) if p99 > WEBHOOK_SLOW_SECONDS and name not in failing]
    found += [Finding(f"{ADMISSION_SLOW}:{name}", Severity.WARNING, *_slow(
                  "admission", name, p99, "apiserver_admission_webhook_admission_duration_seconds",
                  "every write it covers"))
              for name, p99 in sorted(admission.items()) if p99 > WEBHOOK_SLOW_SECONDS]
    return found


#: The per-CRD conversion histogram's count, under 1.26's name and the later one.
CONVERSION_COUNT = '__name__=~"apiserver_crd_(webhook_conversion|conversion_webhook)_duration_seconds_count"'


def _webhooks_rules(q: PromQL) -> tuple[AlertRule, ...]:
    slow = f"{SLOW_RECENT_SECONDS:g}s"
    failed = q.apiserver("", CONVERSION_COUNT + ',succeeded="false"')
    return (
        AlertRule("CrdscopeConversionWebhookFailing", "critical",
                  f"{q.crdscope('crdscope_webhooks_conversion_webhooks_failing')} == 1",
                  "Conversion webhook {{ $labels.webhook }} failing",
                  "The API server's calls to {{ $labels.webhook }} fail: reads of its CRDs in other versions "
                  "than the stored one fail.", finding=CONVERSION_FAILING),
        AlertRule("CrdscopeConversionWebhookSlow", "warning",
                  f"max_over_time({q.crdscope('crdscope_webhooks_conversion_webhooks_p99_seconds')}[{slow}]) "
                  f"> {WEBHOOK_SLOW_SECONDS:g}",
                  "Conversion webhook {{ $labels.webhook }} slow",
                  "p99 {{ $value | humanizeDuration }} per conversion call.", finding=CONVERSION_SLOW),
        AlertRule("CrdscopeAdmissionWebhookFailing", "warning",
                  f"{q.crdscope('crdscope_webhooks_admission_webhooks_failing')} == 1",
                  "Admission webhook {{ $labels.webhook }} failing",
                  "The API server's calls to {{ $labels.webhook }} fail: the writes it covers are rejected "
                  "or pass unchecked.", finding=ADMISSION_FAILING),
        AlertRule("APIServerConversionWebhookFailing", "critical",
                  "sum by (cluster, instance, crd_name) "
                  f"(rate({failed}[2m])) > 0",
                  "Conversions of {{ $labels.crd_name }} failing",
                  "From the API server's own conversion histogram: {{ $value | humanize }} failed conversions/s.",
                  finding=CONVERSION_FAILING),
    )


WEBHOOKS_CHECK = CheckSpec(
    webhooks, "conversion and admission webhooks answering", probes=(WebhooksSample,),
    constants=("WEBHOOK_SLOW_SECONDS", "SLOW_RECENT_SECONDS"), rules=_webhooks_rules,
    kinds=(CONVERSION_FAILING, CONVERSION_SLOW, ADMISSION_FAILING, ADMISSION_SLOW))
