"""The API server container's memory limit as Prometheus answers it (answers shaped like /api/v1/query)."""

from __future__ import annotations

import pytest

from crdscope.connection.prometheus import PrometheusSource

GIB = float(1 << 30)


def series(name: str, value: float, **labels: str) -> dict:
    return {"metric": {"__name__": name, "container": "kube-apiserver", **labels}, "value": [1.0, repr(value)]}


def limit_of(container: list[dict]) -> tuple[float | None, str]:
    source = PrometheusSource("http://prometheus.test")
    try:
        reading = source._interpret(1.0, container, [])
    finally:
        source.close()
    value = reading.values.get("memory_limit_bytes")
    return value, reading.sources.get("memory_limit_bytes") or reading.unobservable["memory_limit_bytes"]


def test_kube_state_metrics_memory_limit_is_the_smallest_replica_and_cpu_is_not_memory():
    value, where = limit_of([
        series("kube_pod_container_resource_limits", 8 * GIB, resource="memory", pod="kube-apiserver-a"),
        series("kube_pod_container_resource_limits", 6 * GIB, resource="memory", pod="kube-apiserver-b"),
        series("kube_pod_container_resource_limits", 2.0, resource="cpu", pod="kube-apiserver-a"),
        series("container_spec_memory_limit_bytes", 4 * GIB),
    ])
    assert value == 6 * GIB  # the first replica the kernel would kill
    assert where == 'prometheus: kube_pod_container_resource_limits{container="kube-apiserver"} (smallest of 2 series)'


@pytest.mark.parametrize("unlimited", [0.0, float(2**63 - 4096)], ids=["cadvisor-zero", "cadvisor-max"])
def test_cadvisor_limit_counts_only_when_it_is_a_limit(unlimited):
    value, where = limit_of([series("container_spec_memory_limit_bytes", unlimited),
                             series("container_spec_memory_limit_bytes", 3 * GIB)])
    assert value == 3 * GIB and "container_spec_memory_limit_bytes" in where
    value, where = limit_of([series("container_spec_memory_limit_bytes", unlimited)])
    assert value is None and "no memory limit" in where


def test_kube_state_metrics_last_terminated_oomkilled_names_the_pods_and_feeds_the_restart_ledger():
    source = PrometheusSource("http://prometheus.test")
    try:
        reading = source._interpret(1.0, [
            series("kube_pod_container_status_last_terminated_reason", 1.0, namespace="kube-system",
                   pod="kube-apiserver-a", reason="OOMKilled"),
            series("kube_pod_container_status_last_terminated_reason", 0.0, namespace="kube-system",
                   pod="kube-apiserver-b", reason="OOMKilled"),
            series("kube_pod_container_status_last_terminated_reason", 1.0, namespace="kube-system",
                   pod="kube-apiserver-b", reason="Error"),
            series("kube_pod_container_status_last_terminated_reason", 1.0, namespace="other",
                   pod="kube-apiserver-c", reason="OOMKilled"),
            series("kube_pod_container_status_restarts_total", 4.0, namespace="kube-system", pod="kube-apiserver-a"),
        ], [])
    finally:
        source.close()
    assert reading.oom_killed_pods == ("kube-apiserver-a",)  # only a 1, only OOMKilled, only kube-system
    assert reading.pod_restarts == {"kube-apiserver-a": 4}
