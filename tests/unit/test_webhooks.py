"""The webhooks probe on real scrapes of each minor, and its edge cases.

``tests/data/webhooks-scrape-<minor>.txt`` hold the webhook families of a real lab's ``/metrics``
(1.26, 1.33, 1.37), twice: the conversion webhook of ``tests/webhook_server.py`` healthy (three
objects created, read in ``v1beta1``, one updated), then stopped (an object created, a read in
``v1beta1``, an update refused by the ``Fail`` admission webhook).  The families were kept and the
rest of the text dropped; nothing else was edited.  Expected figures are summed from that text by a
regular expression here, not by the parser under test.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import httpx
import pytest

from crdscope.base.samples.webhooks import MAX_NAMED_CRDS, AdmissionWebhook, ConversionWebhook, WebhooksSample
from crdscope.base.store import SampleStore
from crdscope.connection.crdwatch import CRDWatch, record_from
from crdscope.connection.metrics import Scrape, parse_text
from crdscope.findings.model import Finding, Severity
from crdscope.findings.observations import Observations
from crdscope.findings.webhooks import SLOW_RECENT_SECONDS, WEBHOOK_SLOW_SECONDS, WEBHOOKS_CHECK
from crdscope.probes import webhooks
from crdscope.probes.webhooks import (FAMILIES, VERDICT_HOLD_SECONDS, WebhooksProbe, admission_totals,
                                      crd_conversions)
from crdscope.probes.replicas import PROCESS_FAMILY
from tests.helpers import mock_cluster

DATA = Path(__file__).resolve().parent.parent / "data"
MINORS = ("1.26", "1.33", "1.37")
CRD = "widgets.webhooks.crdscope.dev"
URL = "https://127.0.0.1:9443/convert"
#: The per-CRD histogram's name on each minor, as the recorded scrapes show it.
CONVERSION_FAMILY = {"1.26": "apiserver_crd_webhook_conversion_duration_seconds",
                     "1.33": "apiserver_crd_conversion_webhook_duration_seconds",
                     "1.37": "apiserver_crd_conversion_webhook_duration_seconds"}


def recorded(minor: str) -> tuple[str, str]:
    """The two recorded scrapes of ``minor``: healthy, then the webhook stopped."""
    text = (DATA / f"webhooks-scrape-{minor}.txt").read_text()
    healthy, stopped = re.split(r"^# crdscope: scrape 2 .*$", text, flags=re.M)
    return healthy, stopped


def summed(text: str, name: str, /, **labels: str) -> float:
    """The sum of sample ``name`` over the lines whose labels include ``labels`` (by regex)."""
    total = 0.0
    for match in re.finditer(rf"^{name}\{{([^}}]*)\}} (\S+)$", text, flags=re.M):
        if all(f'{key}="{value}"' in match.group(1) for key, value in labels.items()):
            total += float(match.group(2))
    return total


def scraped(text: str, at: float) -> Scrape:
    return dataclasses.replace(parse_text(text, (*FAMILIES, PROCESS_FAMILY)), timestamp=at)


def watch_of(*records: dict) -> CRDWatch:
    """A CRD watch that has listed ``records`` (CRD objects as the server sends them)."""
    watch = CRDWatch(mock_cluster(lambda request: httpx.Response(500)))
    for obj in records:
        record = record_from(obj)
        watch.crds[record.name] = record
    watch.status.synced = True
    return watch


def crd(name: str = CRD, url: str | None = URL) -> dict:
    conversion = {"strategy": "Webhook", "webhook": {"clientConfig": {"url": url}}} if url else {"strategy": "None"}
    return {"metadata": {"name": name, "uid": name}, "spec": {"group": name.split(".", 1)[1], "conversion": conversion,
                                                              "versions": [{"name": "v1", "storage": True}]}}


def probe(*records: dict) -> WebhooksProbe:
    from crdscope.connection.metrics import MetricsSource

    cluster = mock_cluster(lambda request: httpx.Response(500))
    return WebhooksProbe(MetricsSource(cluster), watch_of(*(records or (crd(),))), "https://lab.test")


# --------------------------------------------------------------------------- the recorded minors


@pytest.mark.parametrize("minor", MINORS)
def test_each_minors_conversion_histogram_is_read_per_crd(minor):
    healthy, stopped = recorded(minor)
    family = CONVERSION_FAMILY[minor]
    assert f"# TYPE {family} histogram" in healthy  # the name the minor really uses
    for text in (healthy, stopped):
        counted = crd_conversions(scraped(text, 1.0))[CRD]
        assert counted.calls == summed(text, family + "_count", crd_name=CRD) > 0
        assert counted.failed == summed(text, family + "_count", crd_name=CRD, succeeded="false")
        assert counted.buckets[-1] == (float("inf"), counted.calls)
    assert crd_conversions(scraped(healthy, 1.0))[CRD].failed == 0
    assert crd_conversions(scraped(stopped, 1.0))[CRD].failed > 0


@pytest.mark.parametrize("minor", MINORS)
def test_each_minors_webhook_stopped_between_two_scrapes_is_failing_and_names_the_crd(minor):
    healthy, stopped = recorded(minor)
    family = CONVERSION_FAMILY[minor] + "_count"
    webhooks_probe = probe(crd())
    first = webhooks_probe.observe(scraped(healthy, 100.0))
    assert first.ok and "intervals" in first.unobservable
    (hook,) = first.conversion_webhooks
    assert (hook.name, hook.crds, hook.failing, hook.conversions) == (URL, 1, False, None)

    second = webhooks_probe.observe(scraped(stopped, 110.0))
    (hook,) = second.conversion_webhooks
    failed = summed(stopped, family, succeeded="false")
    assert hook.failing and hook.failing_crds == (CRD,) and second.affected_crds == (CRD,)
    assert hook.failures == failed and hook.failures_total == failed
    assert hook.conversions == summed(stopped, family) - summed(healthy, family)
    assert second.interval_seconds == 10.0 and second.failing_conversion_webhooks == 1


@pytest.mark.parametrize("minor", MINORS)
def test_each_minors_admission_figures(minor):
    """Calls, the Fail webhook's refused update (an error rejection), the Ignore one's fail-open."""
    healthy, stopped = recorded(minor)
    totals = admission_totals(scraped(stopped, 1.0))
    strict = totals["strict.webhooks.crdscope.dev"]
    lenient = totals["lenient.webhooks.crdscope.dev"]
    rejections = "apiserver_admission_webhook_rejection_count"
    assert strict.errors_total == summed(stopped, rejections, name=strict.name) >= 1
    assert lenient.fail_open_total == summed(stopped, "apiserver_admission_webhook_fail_open_count",
                                             name=lenient.name) == 1
    assert strict.type == lenient.type == "validating"
    requests = summed(stopped, "apiserver_admission_webhook_request_total", name=lenient.name)
    assert lenient.requests_total == (requests if "apiserver_admission_webhook_request_total" in stopped else None)
    webhooks_probe = probe()
    webhooks_probe.observe(scraped(healthy, 100.0))
    sample = webhooks_probe.observe(scraped(stopped, 110.0))
    failing = {hook.name: hook.failed for hook in sample.admission_webhooks if hook.failing}
    assert failing == {strict.name: strict.errors_total, lenient.name: 1}


def test_the_server_wide_conversion_counter_where_the_minor_has_it():
    for minor in MINORS:
        _, stopped = recorded(minor)
        sample = probe().observe(scraped(stopped, 1.0))
        calls = summed(stopped, "apiserver_conversion_webhook_request_total")
        if "apiserver_conversion_webhook_request_total" in stopped:
            assert sample.conversion_requests_total == calls > 0
            assert sum(sample.conversion_failures_by_type.values()) == summed(
                stopped, "apiserver_conversion_webhook_request_total", result="failure") > 0
        else:
            assert sample.conversion_requests_total is None and "conversion_requests_total" in sample.unobservable


# --------------------------------------------------------------------------- edge cases, inline


def histogram(family: str, crd_name: str, succeeded: str, count: int, seconds: float = 0.002) -> str:
    """One series of the per-CRD histogram (two buckets: the observations all below ``seconds``)."""
    labels = f'crd_name="{crd_name}",from_version="v1",succeeded="{succeeded}",to_version="v1beta1"'
    return (f'{family}_bucket{{{labels},le="{seconds}"}} {count}\n{family}_bucket{{{labels},le="+Inf"}} {count}\n'
            f"{family}_sum{{{labels}}} {count * seconds / 2}\n{family}_count{{{labels}}} {count}\n")


NEW, OLD = CONVERSION_FAMILY["1.37"], CONVERSION_FAMILY["1.26"]


def test_a_webhook_never_called_is_not_failing():
    """A provider awaiting activation, or a lab's provider that never runs: CRDs, no counted call."""
    webhooks_probe = probe(crd(), crd("gadgets.webhooks.crdscope.dev"))
    for at in (1.0, 11.0):
        sample = webhooks_probe.observe(scraped("process_start_time_seconds 5\n", at))
    (hook,) = sample.conversion_webhooks
    assert (hook.crds, hook.conversions_total, hook.conversions, hook.failing) == (2, 0, 0, False)
    assert sample.conversion_crds == 2 and not sample.affected_crds and hook.p99_seconds is None


def test_both_family_names_add_up_and_the_latency_comes_from_the_interval():
    webhooks_probe = probe()
    webhooks_probe.observe(scraped(histogram(NEW, CRD, "true", 10), 1.0))
    slow = histogram(NEW, CRD, "true", 10) + histogram(OLD, CRD, "true", 4, seconds=2.048)
    sample = webhooks_probe.observe(scraped(slow, 11.0))
    (hook,) = sample.conversion_webhooks
    assert (hook.conversions_total, hook.conversions, hook.failing) == (14, 4, False)
    assert 1.0 < hook.p99_seconds <= 2.048  # only the interval's four slow ones


def test_a_quiet_interval_keeps_the_verdict_for_a_while_and_successes_end_it():
    webhooks_probe = probe()
    failing = histogram(NEW, CRD, "true", 3) + histogram(NEW, CRD, "false", 5)
    webhooks_probe.observe(scraped(histogram(NEW, CRD, "true", 3), 1.0))
    assert webhooks_probe.observe(scraped(failing, 11.0)).conversion_webhooks[0].failing
    quiet = webhooks_probe.observe(scraped(failing, 21.0)).conversion_webhooks[0]
    assert quiet.failing and quiet.conversions == 0 and quiet.failing_crds == (CRD,)
    recovered = failing.replace(histogram(NEW, CRD, "true", 3), histogram(NEW, CRD, "true", 9))
    assert not webhooks_probe.observe(scraped(recovered, 31.0)).conversion_webhooks[0].failing
    # Failing again, then nothing called for longer than the verdict holds: no longer failing.
    again = recovered.replace(histogram(NEW, CRD, "false", 5), histogram(NEW, CRD, "false", 6))
    assert webhooks_probe.observe(scraped(again, 41.0)).conversion_webhooks[0].failing
    assert webhooks_probe.observe(scraped(again, 41.0 + VERDICT_HOLD_SECONDS - 1)).failing_conversion_webhooks == 1
    assert webhooks_probe.observe(scraped(again, 41.0 + VERDICT_HOLD_SECONDS + 1)).failing_conversion_webhooks == 0


def test_a_webhook_back_within_an_interval_is_no_longer_failing_once_quiet():
    """Failures and successes in one interval (stopped, then back: the API server's watch cache lists
    again), then nothing: the failures stopped with the successes."""
    webhooks_probe = probe()
    webhooks_probe.observe(scraped(histogram(NEW, CRD, "true", 3), 1.0))
    mixed = histogram(NEW, CRD, "true", 4) + histogram(NEW, CRD, "false", 30)
    assert webhooks_probe.observe(scraped(mixed, 11.0)).conversion_webhooks[0].failing  # some failed
    assert not webhooks_probe.observe(scraped(mixed, 21.0)).conversion_webhooks[0].failing


def test_a_new_server_process_has_no_interval_until_its_second_scrape():
    webhooks_probe = probe()
    webhooks_probe.observe(scraped("process_start_time_seconds 5\n" + histogram(NEW, CRD, "true", 50), 1.0))
    restarted = "process_start_time_seconds 90\n" + histogram(NEW, CRD, "false", 2)
    first = webhooks_probe.observe(scraped(restarted, 100.0))
    assert first.conversion_webhooks[0].conversions is None and not first.conversion_webhooks[0].failing
    assert "intervals" in first.unobservable
    later = restarted.replace(histogram(NEW, CRD, "false", 2), histogram(NEW, CRD, "false", 7))
    assert webhooks_probe.observe(scraped(later, 110.0)).conversion_webhooks[0].failures == 5


def test_crds_are_grouped_by_webhook_and_affected_crds_are_capped():
    names = [f"k{i:03d}.aws.test" for i in range(MAX_NAMED_CRDS + 5)]
    records = [crd(name, "https://provider-aws:9443/convert") for name in names]
    webhooks_probe = probe(*records, crd("ok.gcp.test", "https://provider-gcp:9443/convert"),
                           crd("plain.example.io", None))
    webhooks_probe.observe(scraped(histogram(NEW, names[0], "true", 1), 1.0))
    sample = webhooks_probe.observe(scraped(histogram(NEW, names[0], "false", 1), 11.0))
    aws, gcp = sample.conversion_webhooks
    assert (aws.crds, aws.failing, aws.failing_crds, gcp.crds, gcp.failing) == (
        len(names), True, (names[0],), 1, False)
    assert sample.affected_crd_count == len(names) and sample.affected_crds == tuple(names[:MAX_NAMED_CRDS])
    assert sample.conversion_crds == len(names) + 1  # the CRD converted by the server itself is not one


def test_metrics_forbidden_or_down_and_crds_not_listed():
    forbidden = probe().observe(Scrape(1.0, error="/metrics answered 403: forbidden", status=403))
    assert forbidden.ok and set(forbidden.unobservable) == {"conversion_webhooks", "admission_webhooks"}
    down = probe().observe(Scrape(1.0, error="connection refused"))
    assert down.error == "connection refused"
    unlisted = probe()
    unlisted.crds.status.synced = False
    sample = unlisted.observe(scraped(histogram(NEW, CRD, "false", 1), 1.0))
    assert sample.conversion_webhooks == () and "not listed" in sample.unobservable["conversion_webhooks"]


async def test_once_lists_crds_and_scrapes_twice(monkeypatch):
    """The one-shot form through the HTTP answers a server gives: a CRD list, then two scrapes."""
    healthy, stopped = recorded("1.37")
    scrapes = iter((healthy, stopped))
    crd_list = {"kind": "CustomResourceDefinitionList", "metadata": {"resourceVersion": "7"}, "items": [crd()]}

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/metrics":
            return httpx.Response(200, text=next(scrapes))
        return httpx.Response(200, json=crd_list)

    monkeypatch.setattr(webhooks, "ONCE_INTERVAL_SECONDS", 0.0)
    sample = await webhooks.once(mock_cluster(handler))
    assert isinstance(sample, WebhooksSample) and sample.affected_crds == (CRD,), sample
    assert sample.to_json()["conversion_webhooks"][0]["failing_crds"] == [CRD]


def test_pacing_is_declared_and_settings_override_it():
    from crdscope.base.settings import Settings
    from crdscope.probes.probe import paced

    def pacing(settings: Settings):
        return paced(WebhooksProbe.name, WebhooksProbe.pacing, settings.cadences, settings.budgets)

    assert pacing(Settings()) == WebhooksProbe.pacing
    assert WebhooksProbe.pacing.budget is None  # it sends nothing of its own: the shared scrape is budgeted
    overridden = pacing(Settings().override("cadences", webhooks=5.0, webhooks_idle=60.0))
    assert (overridden.busy, overridden.idle) == (5.0, 60.0)
    assert pacing(Settings().override("cadences", webhooks=40.0)).cadence(quiet=True) == 40.0  # never below busy


# --------------------------------------------------------------------------- the finding


def judge(*samples: WebhooksSample, now: float | None = None) -> dict[str, Finding]:
    store = SampleStore()
    for sample in samples:
        store.add(sample)
    observations = Observations(store=store, now=now if now is not None else samples[-1].timestamp)
    return {finding.id: finding for finding in WEBHOOKS_CHECK(observations)}


def test_a_failing_conversion_webhook_is_critical_and_names_its_crds_and_url():
    hook = ConversionWebhook(URL, crds=2, conversions_total=40, failures_total=37, conversions=12, failures=12,
                             failing=True, failing_crds=(CRD,), failing_crd_count=1)
    found = judge(WebhooksSample(timestamp=100.0, conversion_webhooks=(hook,), interval_seconds=10.0,
                                 conversion_failures_by_type={"conversion_webhook_call_failure": 37}))
    finding = found[f"conversion-webhook-failing:{URL}"]
    assert finding.severity is Severity.CRITICAL and list(found) == [finding.id]  # failing, so not "slow" too
    assert CRD in finding.title and URL in finding.title
    assert "12 of 12 conversions failed in the last 10.0 s" in finding.evidence[0]
    assert "conversion_webhook_call_failure 37" in " ".join(finding.evidence)


def test_slow_webhooks_are_warnings_while_recent():
    slow = WebhooksSample(timestamp=100.0, conversion_webhooks=(ConversionWebhook(URL, conversions=3, p99_seconds=1.9),),
                          admission_webhooks=(AdmissionWebhook("v.example.io", calls=2, p99_seconds=2.4),))
    quiet = WebhooksSample(timestamp=110.0, conversion_webhooks=(ConversionWebhook(URL, conversions=0),),
                           admission_webhooks=(AdmissionWebhook("v.example.io", calls=0),))
    found = judge(slow, quiet)  # the quiet interval after says nothing of their speed
    assert {f.severity for f in found.values()} == {Severity.WARNING}
    assert "p99 1.90 s" in found[f"conversion-webhook-slow:{URL}"].title
    assert "p99 2.40 s" in found["admission-webhook-slow:v.example.io"].title
    assert judge(slow, quiet, now=100.0 + SLOW_RECENT_SECONDS + 1) == {}
    fast = dataclasses.replace(slow, conversion_webhooks=(ConversionWebhook(URL, p99_seconds=WEBHOOK_SLOW_SECONDS),),
                               admission_webhooks=())
    assert judge(fast) == {}


def test_a_failing_admission_webhook_is_a_warning_and_a_healthy_sample_is_nothing():
    failing = AdmissionWebhook("strict.example.io", type="validating", errors_total=3, failed=2, calls=2, failing=True)
    found = judge(WebhooksSample(timestamp=1.0, admission_webhooks=(failing,)))
    assert found["admission-webhook-failing:strict.example.io"].severity is Severity.WARNING
    assert judge(WebhooksSample(timestamp=1.0, conversion_webhooks=(ConversionWebhook(URL, conversions=5),))) == {}
    assert judge(WebhooksSample(timestamp=1.0, error="timeout")) == {}
