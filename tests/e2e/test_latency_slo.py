"""The latency SLO finding provoked for real: a slow conversion webhook makes single-object reads of one
custom resource breach the 1 s SLO, and every front end names the verb and the resource.

``tests/webhook_server.py`` converts the ``widgets`` CRD between its stored ``v1`` and ``v1beta1``;
made slow (1.5 s an answer, a provider's webhook short of CPU), every ``kubectl get`` of a widget at
``v1beta1`` waits for it inside the API server, which counts the wait in its own
``apiserver_request_sli_duration_seconds`` (unlike an admission webhook's or an APF queue's, which the
SLI leaves out, as the SLO does).  A client reading one widget by name meanwhile is a stream of
``GET resource`` requests of 1.5 s: the server-side p99 of ``GET resource`` goes over 1 s.

The finding opens in the headless watch (its line), the exporter (the finding's series and the
resource's count of requests over the SLO) and ``doctor``, each naming ``GET resource`` and
``widgets.webhooks.crdscope.dev``; it closes in the headless watch once the webhook answers at once
again and the slow reads have left the SLO's 5-minute window (measured, not shortened).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from typing import Any

import pytest

from bench.common import scrape_metrics, stop_process
from crdscope.probes.latency import WINDOW_SECONDS
from tests.e2e.test_rules_prometheus import free_port, probes_up
from tests.e2e.test_webhooks import CRD, OTHER_VERSION, collect, reading, widgets  # noqa: F401 - a fixture
from tests.faults.helpers import crdscope, spawn
from tests.helpers import wait_for

pytestmark = pytest.mark.lab

#: How slow the webhook is: past the GET SLO's 1 s, well inside the API server's 30 s timeout.
SLOW_SECONDS = 1.5
KEY = "GET resource"
FINDING = f"latency-slo:{KEY}"


def series(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """One family's samples of an exposition: sorted labels -> value."""
    from prometheus_client.parser import text_string_to_metric_families

    return {tuple(sorted(s.labels.items())): s.value for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == name}


def value(text: str, name: str, **labels: str) -> float | None:
    return next((v for key, v in series(text, name).items() if set(labels.items()) <= set(key)), None)


def timed_reads_of_one_widget() -> tuple[list[float], Callable[[Any], subprocess.CompletedProcess]]:
    """kubectl reading widget w0 at ``v1beta1`` by name (a ``GET resource``), as a client of a provider's
    kind would; and how long each successful read took (kubectl's whole run: an upper bound of the request)."""
    took: list[float] = []

    def read(lab) -> subprocess.CompletedProcess:
        started = time.monotonic()
        answer = lab.kubectl("get", OTHER_VERSION, "w0", "-o", "name", check=False, timeout=60)
        if answer.returncode == 0:
            took.append(time.monotonic() - started)
        return answer

    return took, read


@pytest.mark.usefixtures("widgets")  # the converted CRD, its three objects; deleted after
def test_a_slow_conversion_webhook_breaches_the_get_slo_on_every_front_end(lab, webhook_server):
    port = free_port()
    watch = spawn("watch", "--headless", "--duration", "20m", "--serve-metrics", f"127.0.0.1:{port}",
                  "--kubeconfig", lab.kubeconfig, "--context", lab.admin_context, stderr=subprocess.DEVNULL)
    lines = collect(watch.stdout)
    try:
        wait_for(lambda: "latency" in probes_up(scrape_metrics(port)), timeout=120,
                 message="the exporter's latency figures")
        assert not [line for line in lines if FINDING.split(":")[0] in line and KEY in line], lines
        webhook_server.slow(SLOW_SECONDS)
        took, read_one = timed_reads_of_one_widget()
        with reading(lab, read_one) as errors:
            started = time.monotonic()
            opened = wait_for(lambda: next((line for line in lines if f"finding opened: {KEY} requests" in line),
                                           None), timeout=180, message=f"the headless line (so far: {lines[-5:]})")
            opened_after = time.monotonic() - started
            assert "warning" in opened and f"{KEY} requests to {CRD}" in opened and "over the 1 s SLO" in opened

            text = wait_for(lambda: (t := scrape_metrics(port)) and f'finding="{FINDING}"' in t and t, timeout=60,
                            message="the exporter's finding series")
            assert value(text, "crdscope_finding_open", finding=FINDING, severity="warning") == 1.0
            assert value(text, "crdscope_latency_p99_by_verb_scope", verb_scope=KEY) > 1.0
            assert value(text, "crdscope_latency_requests_over_slo", verb_scope_resource=f"{KEY} {CRD}") >= 1

            done = crdscope("doctor", "--duration", "30s", "--json", "--kubeconfig", lab.kubeconfig,
                            "--context", lab.admin_context, timeout=180)
            report = json.loads(done.stdout)
            found = {f["id"]: f for f in report["findings"]}
            assert FINDING in found, (report["findings"], done.stderr)
            assert found[FINDING]["severity"] == "warning" and f"{KEY} requests to {CRD}" in found[FINDING]["title"]
            assert any("latency.requests_over_slo" in e and CRD in e for e in found[FINDING]["evidence"])
            assert done.returncode == report["exit_code"] >= 1
        assert not errors, errors[:3]
        # The cause was real: every read waited for the slow webhook.
        assert took and min(took) >= SLOW_SECONDS, took
        webhook_server.healthy()
        healthy = time.monotonic()
        closed = wait_for(lambda: next((line for line in lines if "finding closed" in line
                                        and f"{KEY} requests" in line), None),
                          timeout=WINDOW_SECONDS + 240, interval=1.0,
                          message=f"the finding closing once the slow reads left the window (so far: {lines[-5:]})")
        closed_after = time.monotonic() - healthy
    finally:
        stop_process(watch)
    assert CRD in closed
    # It closes when the slow reads leave the 5-minute window, not before.
    assert closed_after >= WINDOW_SECONDS - 60, closed_after
    print(f"\n{len(took)} reads of {min(took):.2f}-{max(took):.2f} s; opened {opened_after:.0f} s after the first "
          f"slow read, closed {closed_after:.0f} s after the webhook was healthy\n{opened}\n{closed}")
