"""The health probe's readers: each source read into typed figures, a reason for each one missing."""

from __future__ import annotations

from crdscope.connection.metrics import Scrape, parse_text
from crdscope.connection.prometheus import PrometheusReading
from crdscope.probes.health_figures import (NEEDS_PROMETHEUS, ContainerFigures, Gauge, missing_of, read_container,
                                            read_etcd_connections, read_process, read_storage, sources_of,
                                            with_prometheus)

MIB = 2**20
SCRAPED = f"""
process_resident_memory_bytes {300 * MIB}
go_goroutines 2400
process_start_time_seconds 1700000000.5
process_open_fds 90
process_max_fds 20000
apiserver_resource_objects{{group="",resource="pods"}} 12
apiserver_resource_objects{{group="example.test",resource="gadgets"}} 0
apiserver_resource_objects{{group="example.test",resource="broken"}} -1
"""
WORKING_SET = 'prometheus: container_memory_working_set_bytes{container="kube-apiserver"}'
LIMIT = 'prometheus: kube_pod_container_resource_limits{container="kube-apiserver"}'


def test_metrics_gives_the_process_gauges_and_names_what_it_lacks():
    process = read_process(parse_text(SCRAPED))
    assert process.rss_bytes == Gauge(300 * MIB) and process.goroutines.whole() == 2400
    assert process.start_time.value == 1700000000.5 and process.max_fds.whole() == 20000
    assert process.heap_bytes == Gauge(missing="/metrics has no go_memstats_heap_inuse_bytes")
    assert missing_of(process.by_field()) == {"heap_bytes": "/metrics has no go_memstats_heap_inuse_bytes"}
    assert sources_of(process.by_field()) == {}  # every figure from the server's own /metrics
    forbidden = read_process(Scrape(timestamp=1.0, error="forbidden (403)", status=403))
    assert set(missing_of(forbidden.by_field()).values()) == {"forbidden (403)"}
    assert len(missing_of(forbidden.by_field())) == 6


def test_storage_counts_objects_per_resource_and_leaves_out_what_the_server_failed_to_count():
    storage = read_storage(parse_text(SCRAPED))
    assert storage.objects == {"pods": 12, "gadgets.example.test": 0}
    assert storage.size_bytes is None and storage.objects_missing == ""
    assert "apiserver_storage_size_bytes" in storage.size_missing
    empty = read_storage(parse_text("go_goroutines 1\n"))
    assert empty.objects == {} and "apiserver_resource_objects" in empty.objects_missing


def test_prometheus_fills_what_metrics_could_not_give_and_the_working_set_stands_in_for_rss():
    forbidden = read_process(Scrape(timestamp=1.0, error="forbidden (403)", status=403))
    reading = PrometheusReading(
        timestamp=1.0,
        values={"working_set_bytes": 280 * MIB, "memory_limit_bytes": 2048 * MIB, "heap_bytes": 120 * MIB},
        sources={"working_set_bytes": WORKING_SET, "memory_limit_bytes": LIMIT,
                 "heap_bytes": 'prometheus: go_memstats_heap_inuse_bytes{job=~"apiserver"}'},
        unobservable={"goroutines": "Prometheus has no go_goroutines", "pod_restarts": "no kube-state-metrics"})
    container = read_container(reading)
    process = with_prometheus(forbidden, reading, container)
    assert process.rss_bytes == Gauge(280 * MIB, WORKING_SET)  # the closest a managed cluster shows
    assert process.heap_bytes.value == 120 * MIB and process.heap_bytes.source.startswith("prometheus: go_memstats")
    assert process.goroutines == Gauge(missing="forbidden (403); Prometheus has no go_goroutines")
    assert container.memory_limit_bytes == Gauge(2048 * MIB, LIMIT)
    sources = sources_of(process.by_field(), container.by_field())
    assert sources["rss_bytes"] == sources["working_set_bytes"] == WORKING_SET and sources["memory_limit_bytes"] == LIMIT
    assert missing_of(container.by_field()) == {"pod_restarts": "no kube-state-metrics"}
    # /metrics' own figure wins over Prometheus' for the same meaning.
    scraped = with_prometheus(read_process(parse_text(SCRAPED)), reading, container)
    assert scraped.rss_bytes == Gauge(300 * MIB)


def test_without_prometheus_the_container_is_unobservable_and_the_process_unchanged():
    assert read_container(None) == ContainerFigures()
    assert set(missing_of(ContainerFigures().by_field()).values()) == {NEEDS_PROMETHEUS}
    process = read_process(parse_text(SCRAPED))
    assert with_prometheus(process, None, read_container(None)) is process


async def test_etcd_connections_are_counted_only_where_the_lab_gave_its_counter():
    assert "on a lab only" in (await read_etcd_connections(None)).missing
    assert (await read_etcd_connections(lambda: None)).missing == "the lab's API server process is not running"
    assert (await read_etcd_connections(lambda: 7)).whole() == 7
