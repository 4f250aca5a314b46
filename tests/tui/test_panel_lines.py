"""What the TUI now shows that doctor and the headless watch knew: the cold discovery figure, the
kubectl cache judged by the local kubectl's own TTL, and readyz and outages per replica."""

from __future__ import annotations

from crdscope.findings.kubectl import KubectlClient
from crdscope.base.samples.discovery import DiscoverySample, KubectlCache
from crdscope.base.samples.health import HealthSample, ReplicaFigures
from crdscope.base.restarts import RestartEvent
from crdscope.tui.panels.discovery import cache_line, summary_text
from crdscope.tui.panels.health import replica_lines

NOW = 1_800_000_000.0


def test_the_cold_figure_stands_beside_the_periodic_one():
    sample = DiscoverySample(timestamp=NOW, mode="aggregated", format="v2", group_versions=400,
                             seconds=0.02, cold_seconds=1.4, not_modified_total=12)
    text = summary_text(sample, NOW)
    assert "periodic [b]20ms[/b]" in text and "cold [b]1.40s[/b]" in text
    assert "cold" not in summary_text(DiscoverySample(timestamp=NOW, mode="aggregated", seconds=0.02), NOW)


def test_the_kubectl_cache_is_judged_by_the_local_kubectls_ttl():
    cache = KubectlCache(path="/home/u/.kube/cache/discovery/x", present=True, files=24, bytes=27_000,
                         age_seconds=11 * 60, ttl_seconds=6 * 3600, expired=False, read_seconds=0.001)
    sample = DiscoverySample(timestamp=NOW, kubectl_cache=cache)
    old = cache_line(sample, KubectlClient("/usr/bin/kubectl", "v1.23.17", 1, 23))
    assert "[$probe-warn]age 11m00s/10m00s TTL of v1.23.17[/]" in old  # 11 minutes: past 1.23's 10
    new = cache_line(sample, KubectlClient("/usr/bin/kubectl", "v1.32.4", 1, 32))
    assert "[$probe-ok]age 11m00s/6h00m TTL of v1.32.4[/]" in new
    assert "[$probe-ok]age 11m00s/6h00m TTL[/]" in cache_line(sample)  # no kubectl known: the probe's


def test_each_replica_has_its_readyz_and_outages():
    replicas = (ReplicaFigures("r1", NOW - 900, restarts=2, last_seen=NOW - 5),
                ReplicaFigures("r2", NOW - 800, last_seen=NOW - 2, answering=True))
    deaths = (RestartEvent(at=NOW - 600, source="start-time", replica="r1"),
              RestartEvent(at=NOW - 120, source="start-time", replica="r1", oom_killed=True))
    history = [HealthSample(timestamp=NOW - 20, replica="r1", ready=False),
               HealthSample(timestamp=NOW - 10, replica="r2", ready=True),
               HealthSample(timestamp=NOW - 5, error="connection refused")]
    latest = HealthSample(timestamp=NOW - 2, replica="r2", ready=True, replicas=replicas, restart_events=deaths,
                          apiservers=2)
    lines = replica_lines(latest, NOW, [*history, latest]).splitlines()
    r1 = lines[lines.index(next(line for line in lines if "r1" in line)) + 1]
    r2 = lines[lines.index(next(line for line in lines if "r2" in line)) + 1]
    assert "ready [$probe-fail]✗[/]" in r1 and "outages [b]2[/b]" in r1 and "2m00s ago, OOM-killed" in r1
    assert "ready [$probe-ok]✓[/]" in r2 and "outages [b]0[/b]" in r2


def test_the_webhooks_line_names_what_a_failing_conversion_webhook_leaves_unreadable():
    from crdscope.base.samples.webhooks import AdmissionWebhook, ConversionWebhook, WebhooksSample
    from crdscope.tui.panels.health import webhooks_line

    url = "https://127.0.0.1:9443/convert"
    assert webhooks_line(None) == "" and webhooks_line(WebhooksSample(timestamp=NOW)) == ""  # no line
    calm = WebhooksSample(timestamp=NOW, conversion_crds=2,
                          conversion_webhooks=(ConversionWebhook(url, crds=2, p99_seconds=0.004),),
                          admission_webhooks=(AdmissionWebhook("v.example.io", p99_seconds=1.5),))
    line = webhooks_line(calm)
    assert "conversion [b]1[/b] p99 4ms (2 CRDs)" in line, line
    assert "[$probe-warn]admission [b]1[/b] p99 1.50s[/]" in line  # over the findings' slow limit
    failing = WebhooksSample(timestamp=NOW, conversion_webhooks=(ConversionWebhook(url, crds=5, failing=True),),
                             affected_crds=tuple(f"k{i}.aws.test" for i in range(5)), affected_crd_count=5)
    line = webhooks_line(failing)
    assert line.startswith("[$probe-fail]conversion webhook failing: [b]https://127.0.0.1:9443/convert[/b]")
    assert "5 CRDs unreadable in other versions (k0.aws.test, k1.aws.test, k2.aws.test…)" in line
