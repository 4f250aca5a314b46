"""The webhooks probe's sample and the records it holds: what every front end reads of it (the probe
that makes it is ``probes/webhooks.py``; readers import the sample from here, never the probe).

Two kinds of webhook the API server calls, from its own ``/metrics``:

* conversion webhooks (``spec.conversion`` of a CRD, strategy Webhook): a Crossplane provider
  serves its CRDs' conversions; while its pod is down, every read of a version other than the
  storage one fails ("conversion webhook for X failed: ... connection refused");
* admission webhooks (Validating/MutatingWebhookConfigurations): each write waits for them.

A webhook is *failing* when the server counted failed calls to it in the newest interval in which
it counted any: a webhook nobody needed (a provider awaiting activation, a lab provider that
never runs) has no counted calls, and is not failing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from crdscope.base.samples import Sample, figure

#: How many CRD names a sample lists (a provider converts hundreds of kinds; counts are complete).
MAX_NAMED_CRDS = 50


@dataclass(frozen=True)
class ConversionWebhook:
    """One conversion webhook, its URL or Service as the CRDs name it, and what the server counted
    of the conversions of those CRDs (``apiserver_crd_conversion_webhook_duration_seconds``, named
    ``apiserver_crd_webhook_conversion_duration_seconds`` on 1.26)."""

    #: ``https://host:port/path`` or ``service <namespace>/<name>:<port><path>``.
    name: str
    #: CRDs whose conversion calls it (from the CRD watch; None: the watch has not listed yet).
    crds: int | None = None
    #: Conversions of those CRDs the server counted since it started, and the failed ones.
    conversions_total: int = figure(0, counter=True)
    failures_total: int = figure(0, counter=True)
    #: The same between the last two scrapes of one server process (None: one scrape so far).
    conversions: int | None = figure(None, metric="conversions_in_interval")
    failures: int | None = figure(None, metric="failures_in_interval")
    #: p99 of the conversions in the interval (None: none counted in it).
    p99_seconds: float | None = None
    #: Failed conversions counted in the newest interval that counted any (see the module).
    failing: bool = False
    #: CRDs with failed conversions in that interval (at most :data:`MAX_NAMED_CRDS`) and their number.
    failing_crds: tuple[str, ...] = ()
    failing_crd_count: int = figure(0, metric="failing_crds")  # ``_count`` reads as a histogram's


@dataclass(frozen=True)
class AdmissionWebhook:
    """One admission webhook by name (``apiserver_admission_webhook_*``): calls, rejections, the
    calls that failed (an error rejected the request, or a ``failurePolicy: Ignore`` let it pass)."""

    #: The webhook's name in its configuration (``validate.example.io``).
    name: str
    #: "validating", "admit" (mutating), or both.
    type: str = ""
    #: Calls the server counted (``apiserver_admission_webhook_request_total``; None where it has none).
    requests_total: int | None = figure(None, counter=True)
    #: Requests the webhook rejected or whose call failed (``..._rejection_count``) ...
    rejections_total: int = figure(0, counter=True)
    #: ... of which the call failed (error_type other than no_error) ...
    errors_total: int = figure(0, counter=True)
    #: ... and failed calls let through by ``failurePolicy: Ignore`` (``..._fail_open_count``).
    fail_open_total: int = figure(0, counter=True)
    #: Calls (errors plus fail-opens) that failed between the last two scrapes (None: one scrape).
    failed: int | None = figure(None, metric="failed_in_interval")
    #: Calls timed between the last two scrapes and their p99 (``..._admission_duration_seconds``).
    calls: int | None = figure(None, metric="calls_in_interval")
    p99_seconds: float | None = None
    #: Failed calls counted in the newest interval that counted any.
    failing: bool = False


@dataclass(frozen=True, kw_only=True)
class WebhooksSample(Sample):
    """Conversion and admission webhooks as the API server counts them, and the CRDs that depend on
    a failing conversion webhook."""

    probe = "webhooks"
    short_name = "hook"

    server: str = ""
    conversion_webhooks: tuple[ConversionWebhook, ...] = figure(default_factory=tuple, label="webhook")
    admission_webhooks: tuple[AdmissionWebhook, ...] = figure(default_factory=tuple, label="webhook")
    #: CRDs converted by a webhook (from the CRD watch; None: not listed yet).
    conversion_crds: int | None = None
    #: Conversion webhooks failing, and the CRDs converted through them (named up to :data:`MAX_NAMED_CRDS`):
    #: every read of another version than the one stored fails for those.
    failing_conversion_webhooks: int = 0
    affected_crds: tuple[str, ...] = ()
    affected_crd_count: int = figure(0, metric="affected_crds")
    #: Admission webhooks failing.
    failing_admission_webhooks: int = 0
    #: Every conversion webhook call the server counted, failed ones by failure type
    #: (``apiserver_conversion_webhook_request_total``, not on 1.26; empty where absent).
    conversion_requests_total: int | None = figure(None, counter=True)
    conversion_failures_by_type: dict[str, int] = figure(default_factory=dict, counter=True, label="failure_type")
    #: Seconds between the two scrapes the intervals' figures span (None: one scrape so far).
    interval_seconds: float | None = None
    #: What could not be observed, with why (``/metrics`` forbidden, the CRD watch not listed).
    unobservable: dict[str, str] = field(default_factory=dict)

    @property
    def failing(self) -> tuple[ConversionWebhook, ...]:
        """The conversion webhooks failing."""
        return tuple(webhook for webhook in self.conversion_webhooks if webhook.failing)
