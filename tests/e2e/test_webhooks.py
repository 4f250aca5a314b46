"""The webhooks probe, its finding and its alert rules on the lab, with a real conversion webhook.

``tests/webhook_server.py`` (the ``webhook_server`` fixture) serves a CRD's conversions over TLS on
loopback (the lab reaches it by ``clientConfig.url``: it has no cluster DNS and no Services), and
validates its creates (``failurePolicy: Ignore``).  The CRD stores ``v1`` and serves ``v1beta1``
too: kubectl reading ``v1beta1`` makes the API server convert through the webhook and count it.
The webhook is healthy, then slow, then stopped, as a provider's pod that is starved, then gone:

* ``crdscope probe webhooks --json`` and the probe itself report the conversions, the latency, the
  failures and the CRD they leave unreadable in ``v1beta1``;
* the critical finding opens on every front end (the headless watch's line, the exporter, a real
  Prometheus's alerts from crdscope's series and from the API server's own, ``doctor``, the TUI)
  and closes once the webhook is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bench.common import scrape_metrics, stop_process
from tests.e2e.test_rules_prometheus import PROMETHEUS, PROMTOOL, Prometheus, free_port, probes_up
from tests.faults.helpers import crdscope, spawn
from tests.helpers import async_wait_for, wait_for

pytestmark = pytest.mark.lab

GROUP = "webhooks.crdscope.dev"
CRD = f"widgets.{GROUP}"
OTHER_VERSION = f"widgets.v1beta1.{GROUP}"
#: The per-CRD conversion histogram's count under 1.26's name and the later one (the API server's own).
CONVERSION_COUNT = "apiserver_crd_(webhook_conversion|conversion_webhook)_duration_seconds_count"
#: How slow the slow webhook is: past the findings' 1 s, well inside the API server's 30 s timeout.
SLOW_SECONDS = 1.5


def create(lab, name: str) -> None:
    lab.kubectl("create", "-f", "-", input=json.dumps(
        {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": name}, "spec": {"size": 1}}))


def read_other_version(lab) -> subprocess.CompletedProcess:
    """kubectl reading the version that is not stored: what the API server converts for."""
    return lab.kubectl("get", OTHER_VERSION, "-o", "name", check=False, timeout=60)


@pytest.fixture
def widgets(lab, webhook_server) -> Iterator[str]:
    """The CRD the webhook converts, its admission webhook and three objects; all deleted after."""
    lab.kubectl("apply", "-f", "-", input=json.dumps(webhook_server.conversion_crd(GROUP, "Widget")))
    lab.kubectl("wait", "--for=condition=Established", f"crd/{CRD}", "--timeout=60s")
    lab.kubectl("apply", "-f", "-", input=json.dumps(
        webhook_server.validating_configuration("widgets", GROUP, "widgets", operations=("CREATE",))))
    for index in range(3):
        create(lab, f"w{index}")
    try:
        yield CRD
    finally:
        # Back first: deleting a CRD deletes its objects, and a stopped webhook would hold that up.
        webhook_server.start()
        lab.kubectl("delete", "validatingwebhookconfiguration", "widgets", "--ignore-not-found", check=False)
        lab.kubectl("delete", "crd", CRD, "--ignore-not-found", "--timeout=120s", check=False, timeout=180)


@contextlib.contextmanager
def reading(lab, read: Callable[[Any], subprocess.CompletedProcess] = read_other_version) -> Iterator[list[str]]:
    """kubectl reads the other version twice a second meanwhile (``read``: another read), as a client of
    the provider's kinds would; yields the errors it got."""
    errors: list[str] = []
    done = threading.Event()

    def loop() -> None:
        while not done.is_set():
            answer = read(lab)
            if answer.returncode != 0:
                errors.append(answer.stderr.strip())
            done.wait(0.5)  # a client's pace, not a wait for a condition

    thread = threading.Thread(target=loop, name="kubectl-reads", daemon=True)
    thread.start()
    try:
        yield errors
    finally:
        done.set()
        thread.join(timeout=90)


def stop_webhook(lab, webhook_server) -> str:
    """Stop the webhook as a provider's pod goes away, and write an object: the API server's watch cache
    of ``v1beta1`` cannot convert it, and reads of ``v1beta1`` fail from then on."""
    webhook_server.stop()
    create(lab, "w-after-stop")  # the admission webhook fails open (failurePolicy Ignore)
    failed = wait_for(lambda: (a := read_other_version(lab)).returncode != 0 and a.stderr, timeout=60,
                      message="a read of v1beta1 failing")
    assert f"conversion webhook for {GROUP}/v1, Kind=Widget failed" in failed, failed
    assert "connection refused" in failed, failed
    return failed


# --------------------------------------------------------------------------- the probe


async def test_the_probe_follows_a_conversion_webhook_healthy_slow_then_stopped(lab, webhook_server, widgets):
    from crdscope.connection.crdwatch import CRDWatch
    from crdscope.connection.metrics import MetricsSource
    from crdscope.findings.model import Severity
    from crdscope.findings.observations import Observations
    from crdscope.findings.webhooks import WEBHOOKS_CHECK
    from crdscope.probes.webhooks import WebhooksProbe
    from crdscope.base.store import SampleStore

    url = webhook_server.url("/convert")
    async with lab.cluster() as cluster:
        watch = CRDWatch(cluster)
        assert await watch.sync_once() is None
        probe = WebhooksProbe(MetricsSource(cluster), watch, cluster.server)
        store = SampleStore()

        async def until(holds, message):
            """Run the probe until its sample satisfies ``holds`` (each run is an interval)."""
            async def observed():
                sample = probe.observe(await probe.metrics.scrape())
                store.add(sample)
                hook = next((h for h in sample.conversion_webhooks if h.name == url), None)
                return hook is not None and holds(sample, hook) and sample
            return await async_wait_for(observed, timeout=90, interval=0.5, message=message)

        # Healthy: kubectl reads v1beta1; conversions counted, none failed, nothing failing.
        assert (await asyncio.to_thread(read_other_version, lab)).returncode == 0
        healthy = await until(lambda s, h: h.conversions_total >= 3, "the healthy webhook's conversions")
        (hook,) = [h for h in healthy.conversion_webhooks if h.name == url]
        assert (hook.crds, hook.failures_total, hook.failing) == (1, 0, False), hook
        assert healthy.affected_crds == () and not WEBHOOKS_CHECK(Observations(store=store, now=healthy.timestamp))

        # Slow: a write waits for the admission webhook, and the watch cache of v1beta1 for its conversion.
        webhook_server.slow(SLOW_SECONDS)
        await asyncio.to_thread(create, lab, "w-slow")
        slow = await until(lambda s, h: (h.p99_seconds or 0.0) > 1.0, "a slow conversion")
        (hook,) = [h for h in slow.conversion_webhooks if h.name == url]
        assert not hook.failing and hook.p99_seconds <= 2 * SLOW_SECONDS, hook
        admission = {h.name: h for h in slow.admission_webhooks}[f"widgets.{GROUP}"]
        found = {f.id: f for f in WEBHOOKS_CHECK(Observations(store=store, now=slow.timestamp))}
        assert found[f"conversion-webhook-slow:{url}"].severity is Severity.WARNING, found
        assert admission.requests_total is None or admission.requests_total >= 4, admission

        # Stopped: reads of v1beta1 fail; the webhook is failing and the CRD named.
        await asyncio.to_thread(stop_webhook, lab, webhook_server)
        stopped = await until(lambda s, h: h.failing, "the stopped webhook failing")
        (hook,) = [h for h in stopped.conversion_webhooks if h.name == url]
        assert hook.failing_crds == (CRD,) and stopped.affected_crds == (CRD,), stopped
        assert hook.failures and hook.failures_total >= hook.failures, hook
        found = {f.id: f for f in WEBHOOKS_CHECK(Observations(store=store, now=stopped.timestamp))}
        critical = found[f"conversion-webhook-failing:{url}"]
        assert critical.severity is Severity.CRITICAL and CRD in critical.title and url in critical.title

        # Back: the watch cache lists again through it, conversions succeed, the verdict ends.
        webhook_server.start()
        await until(lambda s, h: not h.failing, "the webhook back and no longer failing")


def test_crdscope_probe_webhooks_reports_the_failures_and_names_the_crd(lab, webhook_server, widgets):
    url = webhook_server.url("/convert")
    assert read_other_version(lab).returncode == 0
    stop_webhook(lab, webhook_server)
    with reading(lab) as errors:  # the two scrapes of the one-shot form are 2 s apart: reads meanwhile
        done = crdscope("probe", "webhooks", "--json", "--kubeconfig", lab.kubeconfig, "--context",
                        lab.admin_context, timeout=120)
    assert done.returncode == 0, done.stderr
    assert errors and all("conversion webhook" in error for error in errors), errors[:3]
    sample = json.loads(done.stdout)
    hooks = {hook["name"]: hook for hook in sample["conversion_webhooks"]}
    hook = hooks[url]
    assert hook["failing"] and hook["failing_crds"] == [CRD] and hook["failures"] > 0, hook
    assert hook["failures_total"] >= hook["failures"] and hook["crds"] == 1
    assert CRD in sample["affected_crds"] and sample["failing_conversion_webhooks"] >= 1
    if sample["conversion_requests_total"] is not None:  # 1.33 and 1.37 count every call too (1.26 not)
        assert sample["conversion_failures_by_type"]["conversion_webhook_call_failure"] > 0, sample


# --------------------------------------------------------------------------- every front end


def collect(stream) -> list[str]:
    """The lines a child writes, gathered by a thread as they come."""
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(iter(stream.readline, "")), daemon=True).start()
    return lines


def test_the_finding_opens_in_the_headless_watch_the_exporter_and_prometheus(lab, webhook_server, widgets,
                                                                               tmp_path):
    if not os.path.exists(PROMETHEUS):
        pytest.fail("Debian's prometheus is required: make system-deps")
    url = webhook_server.url("/convert")
    assert read_other_version(lab).returncode == 0
    port = free_port()
    watch = spawn("watch", "--headless", "--duration", "10m", "--serve-metrics", f"127.0.0.1:{port}",
                  "--kubeconfig", lab.kubeconfig, "--context", lab.admin_context, stderr=subprocess.DEVNULL)
    lines = collect(watch.stdout)
    prometheus = Prometheus(lab, tmp_path, port, apiserver_keep=CONVERSION_COUNT)
    try:
        wait_for(lambda: "webhooks" in probes_up(scrape_metrics(port)), timeout=120,
                 message="the exporter's webhooks figures")
        wait_for(lambda: prometheus.query(f'crdscope_webhooks_conversion_webhooks_failing{{webhook="{url}"}}'),
                 timeout=90, message="Prometheus holding the webhook's series before the failure")
        stop_webhook(lab, webhook_server)
        with reading(lab):
            opened = wait_for(lambda: next((line for line in lines if "finding opened: conversion webhook "
                                            "failing" in line), None), timeout=120,
                              message=f"the headless line (so far: {lines[-5:]})")
            assert "critical" in opened and CRD in opened and url in opened, opened
            text = scrape_metrics(port)
            assert f'webhook="{url}"}} 1.0' in text.split("crdscope_webhooks_conversion_webhooks_failing{")[1], text
            assert f'finding="conversion-webhook-failing:{url}"' in text and 'severity="critical"' in text
            checked = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True,
                                     timeout=60)  # the per-webhook series' names and types too
            assert checked.returncode == 0, checked.stdout + checked.stderr
            ours = wait_for(lambda: prometheus.firing("CrdscopeConversionWebhookFailing"), timeout=90,
                            message="CrdscopeConversionWebhookFailing firing")
            assert {a["labels"]["webhook"] for a in ours} == {url} and ours[0]["labels"]["severity"] == "critical"
            servers = wait_for(lambda: prometheus.firing("APIServerConversionWebhookFailing"), timeout=90,
                               message=f"APIServerConversionWebhookFailing firing ({prometheus.diagnose()})")
            assert CRD in {a["labels"]["crd_name"] for a in servers}, servers
        webhook_server.start()
        closed = wait_for(lambda: next((line for line in lines if "finding closed" in line
                                        and "conversion webhook failing" in line), None), timeout=120,
                          message=f"the finding closing once the webhook is back (so far: {lines[-5:]})")
        assert url in closed
    finally:
        prometheus.close()
        stop_process(watch)


async def test_the_finding_opens_in_doctor_and_the_tui(lab, webhook_server, widgets):
    from crdscope.tui.launch import build_app
    from crdscope.tui.panels.findings import FindingsView

    url = webhook_server.url("/convert")
    finding_id = f"conversion-webhook-failing:{url}"
    assert (await asyncio.to_thread(read_other_version, lab)).returncode == 0
    await asyncio.to_thread(stop_webhook, lab, webhook_server)
    with reading(lab):
        # doctor: watches long enough for two runs of the probe (what fails now is an interval's).
        done = await asyncio.to_thread(crdscope, "doctor", "--duration", "30s", "--json", "--kubeconfig",
                                       lab.kubeconfig, "--context", lab.admin_context, timeout=180)
        report = json.loads(done.stdout)
        found = {f["id"]: f for f in report["findings"]}
        assert finding_id in found, (report["findings"], done.stderr)
        assert found[finding_id]["severity"] == "critical" and CRD in found[finding_id]["title"]
        assert done.returncode == report["exit_code"] == 2
        assert "conversion and admission webhooks answering" in report["checked"]

        # The TUI: the findings strip and the health panel's webhooks line.
        app = build_app(lab.kubeconfig, lab.admin_context, record=None, layout="grid")
        async with app.run_test(size=(160, 50)) as pilot:
            await async_wait_for(lambda: any(f.id == finding_id for f in app.session.current_findings()),
                                 timeout=120, message="the finding open in the TUI's core")
            await pilot.pause()
            strip = app.monitor_screen.query_one("#findings-strip", FindingsView)
            await async_wait_for(lambda: "conversion webhook failing" in strip.shown, timeout=10,
                                 message="the findings strip naming it")
            line = app.monitor_screen.query_one("#health-webhooks")
            await async_wait_for(lambda: "conversion webhook failing" in str(line.render()), timeout=10,
                                 message="the health panel's webhooks line")
            assert CRD in str(line.render())
            webhook_server.start()
            await async_wait_for(lambda: not any(f.id == finding_id for f in app.session.current_findings()),
                                 timeout=120, message="the finding closed once the webhook is back")
