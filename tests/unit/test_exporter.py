"""The exporter's collector: metric names, labels for nested figures, unobservable left out.

The exposition is read back with prometheus_client's own parser (the reference reader).
"""

from __future__ import annotations

import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from crdscope.base.version import __version__
from crdscope.base.samples.throttling import PriorityLevel, Responses429, ThrottlingSample
from crdscope.base.errors import ConfigError
from crdscope.base.samples.health import HealthSample
from crdscope.base.samples.latency import Canary, LatencySample
from crdscope.base.samples.openapi import LagStats, OpenAPISample
from crdscope.session.core import SessionStore, WatchCore
from crdscope.session.exporter import MetricsServer, SampleCollector
from crdscope.session.recorder import ClusterInfo


def scrape(collector: SampleCollector) -> dict[tuple[str, tuple], float]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def without_cluster(series: dict[tuple[str, tuple], float], cluster: str) -> dict[tuple[str, tuple], float]:
    """The series of one cluster, its ``cluster`` label taken off (every series must carry it)."""
    assert all(("cluster", cluster) in labels for _, labels in series), series
    return {(name, tuple(kv for kv in labels if kv[0] != "cluster")): value for (name, labels), value in series.items()}


def serving(info: ClusterInfo | None = None) -> tuple[SampleCollector, WatchCore]:
    """A collector serving one cluster's core (its samples given to the store the core keeps)."""
    core = WatchCore(None, store=SessionStore(), cluster=info.context if info is not None else "")
    collector = SampleCollector()
    collector.watch(core, info)
    return collector, core


def test_figures_and_labels():
    collector, core = serving(ClusterInfo(server="https://10.0.0.1:6443", context="prod", kubernetes_version="v1.37.2"))
    core.store.add(HealthSample(timestamp=5.0, rss_bytes=300 << 20, ready=True, restarts=None, crds=12))
    core.store.add(ThrottlingSample(timestamp=6.0, priority_levels=(
        PriorityLevel(name="workload-low", inqueue=3, rejected_per_s=1.5, rejected_by_reason={"queue-full": 4}),
        PriorityLevel(name="exempt", rejected_per_s=None)), responses_429=Responses429(total=7)))
    core.store.add(LatencySample(timestamp=7.0, p99_by_verb={"GET": 0.25, "LIST": 1.5},
                            canaries={"version": Canary(seconds=0.01, status=200)}, slo_breaches=("LIST cluster",)))
    core.store.add(OpenAPISample(timestamp=8.0, backlog=4, lag_seconds={"established": LagStats(p50=1.0, p95=2.0, max=3.0)}))
    series = without_cluster(scrape(collector), "prod")
    assert series[("crdscope_health_rss_bytes", ())] == 300 << 20
    assert series[("crdscope_health_ready", ())] == 1.0
    assert ("crdscope_health_restarts_total", ()) not in series  # unobservable is absent, not 0
    assert series[("crdscope_throttling_priority_levels_inqueue", (("priority_level", "workload-low"),))] == 3
    assert series[("crdscope_throttling_priority_levels_rejected_per_second", (("priority_level", "workload-low"),))] == 1.5
    assert ("crdscope_throttling_priority_levels_rejected_per_second", (("priority_level", "exempt"),)) not in series
    assert series[("crdscope_throttling_priority_levels_rejected_by_reason",
                   (("priority_level", "workload-low"), ("reason", "queue-full")))] == 4
    assert series[("crdscope_throttling_responses_429_total", ())] == 7
    assert series[("crdscope_latency_p99_by_verb", (("verb", "LIST"),))] == 1.5
    assert series[("crdscope_latency_canaries_status", (("canary", "version"),))] == 200
    assert series[("crdscope_openapi_lag_seconds_p95", (("stage", "established"),))] == 2.0
    assert series[("crdscope_openapi_backlog", ())] == 4
    assert series[("crdscope_probe_up", (("probe", "health"),))] == 1.0
    assert series[("crdscope_probe_last_sample_timestamp_seconds", (("probe", "openapi"),))] == 8.0
    assert series[("crdscope_info", (("context", "prod"), ("kubernetes_version", "v1.37.2"),
                                     ("server", "https://10.0.0.1:6443"), ("version", __version__)))] == 1.0


def test_a_failed_probe_is_down_and_its_stale_figures_are_gone():
    collector, core = serving()
    core.store.add(HealthSample(timestamp=1.0, rss_bytes=1000))
    core.store.add(HealthSample(timestamp=2.0, error="connection refused", rss_bytes=1000, down=True, down_seconds=12.0,
                           restarts=4, restarts_by_source={"lab supervisor": 4}))
    series = scrape(collector)
    assert series[("crdscope_probe_up", (("probe", "health"),))] == 0.0
    exported = {name for name, _ in series if name.startswith("crdscope_health_")}
    # only what the failed sample knows of the failure itself: down, for how long, restarts so far
    assert "crdscope_health_rss_bytes" not in exported
    assert series[("crdscope_health_down", ())] == 1.0 and series[("crdscope_health_down_seconds", ())] == 12.0
    assert series[("crdscope_health_restarts_total", ())] == 4.0
    assert series[("crdscope_health_restarts_by_source_total", (("source", "lab supervisor"),))] == 4.0
    assert all(name.split("crdscope_health_")[1].startswith(("down", "restarts", "ready", "live", "oom_kills",
                                                               "outages", "apiservers", "memory_limit",
                                                               "lease_restarts"))
               for name in exported)


def test_the_endpoint_serves_and_closes():
    collector, core = serving()
    core.store.add(HealthSample(timestamp=1.0, crds=3))
    server = MetricsServer(collector, "127.0.0.1", 0)
    try:
        text = httpx.get(server.url, timeout=5).text
        assert "crdscope_health_crds 3.0" in text
    finally:
        server.close()
    with pytest.raises(httpx.TransportError):
        httpx.get(server.url, timeout=2)


def test_a_port_in_use_is_a_config_error():
    first = MetricsServer(SampleCollector(), "127.0.0.1", 0)
    try:
        with pytest.raises(ConfigError, match="cannot serve metrics on 127.0.0.1"):
            MetricsServer(SampleCollector(), "127.0.0.1", first.port)
    finally:
        first.close()


def test_counters_are_counters_units_are_spelled_out_and_findings_are_series():
    from crdscope.findings.model import Finding, Severity
    from crdscope.base.samples.discovery import DiscoverySample

    finding = Finding("apf-rejecting:workload-low", Severity.CRITICAL, "t", (), "c", "r", since=1.0)
    collector, core = serving()
    core.findings.open[finding.id] = finding
    core.store.add(DiscoverySample(timestamp=1.0, not_modified=2, not_modified_total=9))
    core.store.add(HealthSample(timestamp=5.0, restarts=1, storage_objects_total=40))
    core.store.add(ThrottlingSample(timestamp=6.0, rejected_per_s=0.5, responses_429=Responses429(total=7), priority_levels=(
        PriorityLevel(name="workload-low", rejected=3, rejected_total=11, rejected_per_s=1.5),)))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    types = {f.name: f.type for f in text_string_to_metric_families(generate_latest(registry).decode())}
    series = scrape(collector)
    for counter in ("crdscope_discovery_not_modified", "crdscope_health_restarts",
                    "crdscope_throttling_responses_429", "crdscope_throttling_priority_levels_rejected"):
        assert types[counter] == "counter", counter
    assert series[("crdscope_discovery_not_modified_total", ())] == 9
    assert series[("crdscope_discovery_not_modified_in_run", ())] == 2
    assert series[("crdscope_health_storage_objects", ())] == 40
    assert series[("crdscope_throttling_rejected_per_second", ())] == 0.5
    assert series[("crdscope_throttling_priority_levels_rejected_in_interval", (("priority_level", "workload-low"),))] == 3
    assert not any(name.endswith("_per_s") for name, _ in series)
    assert series[("crdscope_findings", (("severity", "critical"),))] == 1
    assert series[("crdscope_findings", (("severity", "warning"),))] == 0
    assert series[("crdscope_finding_open", (("accepted", "false"), ("finding", "apf-rejecting:workload-low"),
                                             ("kind", "apf-rejecting"), ("severity", "critical")))] == 1


def test_a_fleet_labels_every_series_with_its_cluster():
    from crdscope.findings.model import Finding, Severity

    cores = {name: WatchCore(None, store=SessionStore(), cluster=name) for name in ("lab-a", "lab-b")}
    collector = SampleCollector()
    for name, core in cores.items():
        collector.watch(core, ClusterInfo(server=f"https://{name}:6443", context=name, kubernetes_version="v1.37.2"))
    cores["lab-a"].take(HealthSample(timestamp=1.0, crds=3, rss_bytes=100 << 20))
    cores["lab-b"].take(HealthSample(timestamp=2.0, crds=7, error="connection refused", down=True))
    cores["lab-b"].findings.open["apf-rejecting:x"] = Finding("apf-rejecting:x", Severity.WARNING, "t", (), "c", "r",
                                                             since=1.0)
    series = scrape(collector)
    assert series[("crdscope_health_crds", (("cluster", "lab-a"),))] == 3
    assert ("crdscope_health_crds", (("cluster", "lab-b"),)) not in series  # down: its figures are not current
    assert series[("crdscope_probe_up", (("cluster", "lab-a"), ("probe", "health")))] == 1.0
    assert series[("crdscope_probe_up", (("cluster", "lab-b"), ("probe", "health")))] == 0.0
    assert series[("crdscope_health_down", (("cluster", "lab-b"),))] == 1.0
    assert series[("crdscope_findings", (("cluster", "lab-b"), ("severity", "warning")))] == 1
    assert series[("crdscope_findings", (("cluster", "lab-a"), ("severity", "warning")))] == 0
    assert {dict(labels)["cluster"] for name, labels in series if name == "crdscope_info"} == {"lab-a", "lab-b"}
    assert all(dict(labels).get("cluster") in ("lab-a", "lab-b") for _, labels in series)


def test_a_samples_declarations_name_and_type_its_series():
    """Counter, label, metric name, unitless, exported and known-while-down come from the fields."""
    import dataclasses

    from crdscope.base.samples import Sample, figure
    from crdscope.session.exporter import flatten

    @dataclasses.dataclass(frozen=True)
    class Stats:
        p95: float = 0.0
        count: int = figure(0, metric="observations", unitless=True)

    @dataclasses.dataclass(frozen=True)
    class DeclaredSample(Sample):
        probe = "declared"

        sent_total: int = figure(0, counter=True, while_down=True)
        waits: dict[str, float] = figure(default_factory=dict, label="verb")
        count: int = figure(0, metric="requests")
        per_crd: tuple[str, ...] = figure((), exported=False)
        lag_seconds: dict[str, Stats] = figure(default_factory=dict, label="stage")
        plain: float = 1.0

    sample = DeclaredSample(sent_total=7, waits={"GET": 0.5}, count=3, per_crd=("a",),
                            lag_seconds={"established": Stats(p95=2.0, count=4)})
    series = {(name, tuple(labels.items()), counter): value for name, labels, value, counter in flatten("declared", sample)}
    assert series == {
        ("crdscope_declared_sent", (), True): 7.0,
        ("crdscope_declared_waits", (("verb", "GET"),), False): 0.5,
        ("crdscope_declared_requests", (), False): 3.0,
        ("crdscope_declared_lag_seconds_p95", (("stage", "established"),), False): 2.0,
        ("crdscope_declared_lag_observations", (("stage", "established"),), False): 4.0,
        ("crdscope_declared_plain", (), False): 1.0,
    }
    failed = DeclaredSample(error="refused", sent_total=9)
    assert [(name, value) for name, _, value, _ in flatten("declared", failed)] == [("crdscope_declared_sent", 9.0)]
