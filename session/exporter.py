"""``--serve-metrics [HOST]:PORT``: the probes' latest figures in Prometheus text format.

A custom ``prometheus_client`` collector reads the latest sample of each probe
at scrape time (nothing is copied per sample), so a fleet of clusters is watched
by one existing Prometheus rather than by many terminals.

Naming: every numeric field of a sample becomes the gauge ``crdscope_<probe>_<field>``
(bools are 0/1; ``None`` - unobservable - is left out rather than exported as 0).
Nested figures become labels where they name something:

* ``dict[str, number]``: one series per key, e.g. ``crdscope_latency_p99_by_verb{verb="GET"}``
  (the label is what follows ``by_``, or a per-field name, else ``key``);
* ``dict[str, record]``: ``crdscope_openapi_lag_seconds_p95{stage="established"}``;
* ``tuple[record, ...]`` with a name: ``crdscope_throttling_priority_levels_rejected_per_s{priority_level="workload-low"}``;
* a nested record: ``crdscope_<probe>_<field>_<subfield>``.

Also ``crdscope_probe_up{probe}`` (1 when the latest sample succeeded),
``crdscope_probe_last_sample_timestamp_seconds{probe}`` and ``crdscope_info`` (server, context,
Kubernetes version, crdscope version).  While a probe is down its figures are not
exported (a stale figure would look current); ``crdscope_probe_up`` says why.
"""

from __future__ import annotations

import re
import threading
from typing import Any
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from crdscope.probes import __version__
from crdscope.probes.errors import ConfigError
from crdscope.probes.samples import Sample

from .recorder import ClusterInfo
from .values import finite_number, is_record, names_of, read_field

PREFIX = "crdscope"
#: Label names for nested figures where the field name does not say it.
LABELS = {
    ("throttling", "priority_levels"): "priority_level",
    ("throttling", "flow_schemas"): "flow_schema",
    ("latency", "canaries"): "canary",
    ("openapi", "lag_seconds"): "stage",
    ("discovery", "client_models"): "model",
    ("discovery", "slowest"): "group_version",
    ("inventory", "installing"): "owner",
    ("health", "storage_objects_top"): "resource",
    ("health", "pod_restarts"): "pod",
    ("latency", "p99_by_verb_scope"): "verb_scope",
    ("latency", "requests_by_verb_scope"): "verb_scope",
    ("latency", "slo_seconds"): "verb_scope",
}
#: Fields left out: one series per CRD group-version (unbounded cardinality) or per-run detail.
EXCLUDED = {("openapi", "group_versions"), ("discovery", "failed_group_versions")}
#: Fields of a record that name it (first found wins) when records come as a tuple.
NAME_FIELDS = ("name", "group_version", "verb", "resource", "stage", "key")
MAX_DEPTH = 3
_UNSAFE = re.compile(r"[^a-zA-Z0-9_]")


def metric_name(*parts: str) -> str:
    """``crdscope_<parts joined by _>`` with anything Prometheus rejects replaced by ``_``."""
    return _UNSAFE.sub("_", "_".join((PREFIX, *parts)))


def label_for(probe: str, field: str) -> str:
    """The label that names the entries of a nested field."""
    if (probe, field) in LABELS:
        return LABELS[(probe, field)]
    if field.startswith("by_"):
        return _UNSAFE.sub("_", field[3:])
    if "_by_" in field:
        return _UNSAFE.sub("_", field.rsplit("_by_", 1)[1])
    return "key"


def flatten(probe: str, sample: Sample) -> Iterator[tuple[str, dict[str, str], float]]:
    """Every exported series of a sample: (metric name, labels, value)."""
    for field in names_of(sample):
        if field in ("timestamp", "error") or (probe, field) in EXCLUDED:
            continue
        yield from _flatten(probe, field, (field,), read_field(sample, field), {}, 0)


def _flatten(probe: str, field: str, parts: tuple[str, ...], value: Any, labels: dict[str, str],
             depth: int) -> Iterator[tuple[str, dict[str, str], float]]:
    as_number = finite_number(value)
    if as_number is not None:
        yield metric_name(probe, *parts), labels, as_number
        return
    if depth >= MAX_DEPTH:
        return
    if isinstance(value, dict):
        # A dict field is a keyed collection (``dict[str, T]``): its keys are data (verbs,
        # stages, owners), never figure names, since nested records are dataclasses.
        label = label_for(probe, field)
        for key, inner in value.items():
            yield from _flatten(probe, field, parts, inner, {**labels, label: str(key)}, depth + 1)
    elif is_record(value):
        for name in names_of(value):
            yield from _flatten(probe, name, (*parts, name), read_field(value, name), labels, depth + 1)
    elif isinstance(value, (list, tuple)) and value and all(is_record(v) for v in value):
        label = LABELS.get((probe, field)) or _singular(field)
        for item in value:
            key = next((str(read_field(item, n)) for n in NAME_FIELDS
                        if isinstance(read_field(item, n), str)), None)
            if key is None:
                return  # records with no name cannot be told apart
            for name in names_of(item):
                if name in NAME_FIELDS and isinstance(read_field(item, name), str):
                    continue
                yield from _flatten(probe, name, (*parts, name), read_field(item, name),
                                    {**labels, label: key}, depth + 1)


def _singular(field: str) -> str:
    name = _UNSAFE.sub("_", field)
    return name[:-1] if name.endswith("s") and len(name) > 1 else name


class SampleCollector(Collector):
    """Keeps the latest sample of each probe (a monitor sink) and exposes it at scrape time."""

    def __init__(self, cluster: ClusterInfo | None = None) -> None:
        self.cluster = cluster
        self.latest: dict[str, Sample] = {}
        self._lock = threading.Lock()

    def __call__(self, sample: Sample) -> None:
        """The monitor sink: remember this sample as its probe's latest."""
        with self._lock:
            self.latest[type(sample).probe] = sample

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            latest = dict(self.latest)
        families: dict[str, GaugeMetricFamily] = {}
        label_names: dict[str, tuple[str, ...]] = {}
        up = GaugeMetricFamily(metric_name("probe_up"), "1 when the probe's latest run succeeded",
                               labels=["probe"])
        stamp = GaugeMetricFamily(metric_name("probe_last_sample_timestamp_seconds"),
                                  "Unix time of the probe's latest sample", labels=["probe"])
        for probe, sample in sorted(latest.items()):
            up.add_metric([probe], 0.0 if sample.error else 1.0)
            stamp.add_metric([probe], float(sample.timestamp))
            if sample.error:
                continue
            for name, labels, value in flatten(probe, sample):
                family = families.get(name)
                if family is None:
                    family = GaugeMetricFamily(name, f"crdscope {probe} probe figure", labels=list(labels))
                    families[name] = family
                    label_names[name] = tuple(labels)
                if tuple(labels) != label_names[name]:
                    continue  # a shape Prometheus cannot hold in one family
                family.add_metric(list(labels.values()), value)
        yield up
        yield stamp
        if self.cluster is not None:
            info = GaugeMetricFamily(metric_name("info"), "The watched cluster and crdscope's version",
                                     labels=["server", "context", "kubernetes_version", "version"])
            data = self.cluster.to_json()
            info.add_metric([data["server"], data["context"], data["kubernetes_version"], __version__], 1.0)
            yield info
        yield from families.values()


def parse_listen(text: str) -> tuple[str, int]:
    """``[HOST]:PORT`` -> (host, port); an empty host listens on every interface, like ``:9100``."""
    value = text.strip()
    host, separator, port_text = value.rpartition(":")
    if not separator:
        host, port_text = "", value
    host = host.strip("[]")
    try:
        port = int(port_text)
    except ValueError:
        raise ConfigError(f"--serve-metrics '{text}' is not [HOST]:PORT (e.g. :9100 or 127.0.0.1:9100)") from None
    if not 0 <= port <= 65535:
        raise ConfigError(f"--serve-metrics '{text}': port {port} is out of range")
    return host or "0.0.0.0", port


class MetricsServer:
    """The HTTP endpoint (a daemon thread of prometheus_client) serving one collector."""

    def __init__(self, collector: SampleCollector, host: str, port: int) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)
        try:
            self._server, self._thread = start_http_server(port, addr=host, registry=self.registry)
        except OSError as exc:
            raise ConfigError(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}") from None
        self.host = host
        self.port = int(self._server.server_address[1])

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        """Stop serving (idempotent)."""
        self._server.shutdown()
        self._server.server_close()
