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
again and the slow reads have left the window.  The window is config.toml's ``cadences.latency_window``
(30 s here instead of the SLOs' 5 minutes, the latency probe every 5 s): the close is timed against it,
so the test takes about a minute and a half instead of seven.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from typing import Any

import pytest

from bench.common import scrape_metrics, stop_process
from tests.e2e.test_rules_prometheus import free_port, probes_up
from tests.e2e.test_webhooks import CRD, OTHER_VERSION, collect, reading, widgets  # noqa: F401 - a fixture
from tests.faults.helpers import spawn
from tests.helpers import wait_for

pytestmark = pytest.mark.lab

#: How slow the webhook is: past the GET SLO's 1 s, well inside the API server's 30 s timeout.
SLOW_SECONDS = 1.5
KEY = "GET resource"
#: The window the p99s span and the latency probe's cadence (config.toml), for a test of a minute and a half.
WINDOW = 30.0
CADENCE = 5.0
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


def config_env(tmp_path) -> dict[str, str]:
    """A config.toml with the short window and the latency probe every 5 s: the env to use it."""
    home = tmp_path / "config"
    (home / "crdscope").mkdir(parents=True)
    (home / "crdscope" / "config.toml").write_text(
        f"[cadences]\nlatency = {CADENCE:g}\nlatency_idle = {CADENCE:g}\nlatency_window = {WINDOW:g}\n")
    return {"XDG_CONFIG_HOME": str(home)}


def first(lines: list[str], *parts: str) -> str | None:
    return next((line for line in lines if all(part in line for part in parts)), None)


@pytest.mark.usefixtures("widgets")  # the converted CRD, its three objects; deleted after
def test_a_slow_conversion_webhook_breaches_the_get_slo_on_every_front_end(lab, webhook_server, tmp_path):
    env = config_env(tmp_path)
    port = free_port()
    watch = spawn("watch", "--headless", "--duration", "10m", "--serve-metrics", f"127.0.0.1:{port}",
                  "--kubeconfig", lab.kubeconfig, "--context", lab.admin_context, env=env, stderr=subprocess.DEVNULL)
    lines = collect(watch.stdout)
    doctor: subprocess.Popen | None = None
    try:
        wait_for(lambda: "latency" in probes_up(scrape_metrics(port)), timeout=60,
                 message="the exporter's latency figures")
        assert first(lines, "finding opened", f"{KEY} requests") is None, lines
        webhook_server.slow(SLOW_SECONDS)
        took, read_one = timed_reads_of_one_widget()
        with reading(lab, read_one) as errors:
            started = time.monotonic()
            # doctor watches meanwhile, with the same config.toml: its window fills with slow reads too.
            doctor = spawn("doctor", "--duration", f"{WINDOW:g}s", "--json", "--kubeconfig", lab.kubeconfig,
                           "--context", lab.admin_context, env=env)
            opened = wait_for(lambda: first(lines, "finding opened", f"{KEY} requests"), timeout=60,
                              message=f"the headless line (so far: {lines[-5:]})")
            opened_after = time.monotonic() - started
            assert "warning" in opened and f"{KEY} requests to {CRD}" in opened and "over the 1 s SLO" in opened

            text = wait_for(lambda: (t := scrape_metrics(port)) and f'finding="{FINDING}"' in t and t, timeout=30,
                            message="the exporter's finding series")
            assert value(text, "crdscope_finding_open", finding=FINDING, severity="warning") == 1.0
            assert value(text, "crdscope_latency_p99_by_verb_scope", verb_scope=KEY) > 1.0
            assert value(text, "crdscope_latency_requests_over_slo", verb_scope_resource=f"{KEY} {CRD}") >= 1

            out, err = doctor.communicate(timeout=WINDOW + 90)
        assert not errors, errors[:3]
        report = json.loads(out)
        found = {f["id"]: f for f in report["findings"]}
        assert FINDING in found, (report["findings"], err)
        assert found[FINDING]["severity"] == "warning" and f"{KEY} requests to {CRD}" in found[FINDING]["title"]
        assert any("latency.requests_over_slo" in e and CRD in e for e in found[FINDING]["evidence"])
        assert doctor.returncode == report["exit_code"] >= 1
        # The cause was real: every read waited for the slow webhook.
        assert took and min(took) >= SLOW_SECONDS, took
        webhook_server.healthy()
        healthy = time.monotonic()
        assert read_one(lab).returncode == 0 and took[-1] < SLOW_SECONDS, took[-3:]  # fast again
        closed = wait_for(lambda: first(lines, "finding closed", f"{KEY} requests"),
                          timeout=WINDOW + 4 * CADENCE + 30, interval=0.5,
                          message=f"the finding closing once the slow reads left the window (so far: {lines[-5:]})")
        closed_after = time.monotonic() - healthy
    finally:
        if doctor is not None and doctor.poll() is None:
            stop_process(doctor)
        stop_process(watch)
    assert CRD in closed
    # It closes when the slow reads leave the window, not before (the last one ended as the webhook healed).
    assert closed_after >= WINDOW - CADENCE, closed_after
    print(f"\n{len(took)} reads of {min(took[:-1]):.2f}-{max(took[:-1]):.2f} s (then {took[-1]:.2f} s); opened "
          f"{opened_after:.0f} s after the first slow read, closed {closed_after:.0f} s after the webhook was healthy"
          f"\n{opened}\n{closed}")
