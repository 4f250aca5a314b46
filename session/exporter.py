"""``--serve-metrics [HOST]:PORT``: the probes' latest figures in Prometheus text format.

A custom ``prometheus_client`` collector reads the latest sample of each probe from the
session core's store (``session.core.WatchCore.store``) at scrape time (nothing is copied
per sample), so a fleet of clusters is watched
by one existing Prometheus rather than by many terminals.

Naming: every numeric field of a sample becomes the gauge ``crdscope_<probe>_<field>``
(bools are 0/1; ``None`` - unobservable - is left out rather than exported as 0).
Nested figures become labels where they name something:

* ``dict[str, number]``: one series per key, e.g. ``crdscope_latency_p99_by_verb{verb="GET"}``
  (the label is what follows ``by_``, or a per-field name, else ``key``);
* ``dict[str, record]``: ``crdscope_openapi_lag_seconds_p95{stage="established"}``;
* ``tuple[record, ...]`` with a name:
  ``crdscope_throttling_priority_levels_rejected_per_second{priority_level="workload-low"}``;
* a nested record: ``crdscope_<probe>_<field>_<subfield>``.

Names pass ``promtool check metrics``: figures that only count up are counters (``COUNTERS``,
``..._total``), abbreviated units are spelled out (``per_s`` -> ``per_second``) and gauges whose
field names end like another type's series are renamed (``GAUGE_RENAMES``).

Every series carries ``cluster`` (the watched context's name): one exporter may serve a fleet
(``watch --headless --context A --context B``), and a Prometheus scraping several exporters
needs no relabelling to tell the clusters apart.

Also ``crdscope_probe_up{probe}`` (1 when the latest sample succeeded),
``crdscope_probe_last_sample_timestamp_seconds{probe}`` and ``crdscope_info`` (server, context,
Kubernetes version, crdscope version).  While a probe is down its figures are not
exported (a stale figure would look current); ``crdscope_probe_up`` says why.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from typing import TYPE_CHECKING, Any
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from crdscope.findings.model import Finding, Severity
from crdscope.base.version import __version__
from crdscope.base.errors import ConfigError
from crdscope.base.samples import Sample
from crdscope.base.store import SampleStore

from .recorder import ClusterInfo

if TYPE_CHECKING:
    from .core import WatchCore
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
    ("health", "restarts_by_source"): "source",
    ("health", "lease_restarts"): "host",
    ("latency", "p99_by_verb_scope"): "verb_scope",
    ("latency", "requests_by_verb_scope"): "verb_scope",
    ("footprint", "per_minute"): "origin",
    ("footprint", "held_back"): "feature",
    ("latency", "slo_seconds"): "verb_scope",
}
#: Fields left out: one series per CRD group-version (unbounded cardinality) or per-run detail.
EXCLUDED = {("openapi", "group_versions"), ("discovery", "failed_group_versions"),
            ("health", "restart_events")}
#: Fields of a record that name it (first found wins) when records come as a tuple.
NAME_FIELDS = ("name", "group_version", "verb", "resource", "stage", "key")
MAX_DEPTH = 3
_UNSAFE = re.compile(r"[^a-zA-Z0-9_]")
#: Figures that only ever count up: exposed as counters, the family name without ``_total``
#: (the text format adds it).  Listed in README.md (exporter renames).
COUNTERS = {
    "crdscope_discovery_not_modified_total": "crdscope_discovery_not_modified",
    "crdscope_throttling_priority_levels_rejected_total": "crdscope_throttling_priority_levels_rejected",
    "crdscope_throttling_responses_429_total": "crdscope_throttling_responses_429",
    "crdscope_health_restarts": "crdscope_health_restarts",
    "crdscope_health_restarts_by_source": "crdscope_health_restarts_by_source",
    "crdscope_health_lease_restarts": "crdscope_health_lease_restarts",
    "crdscope_health_oom_kills": "crdscope_health_oom_kills",
    "crdscope_responsiveness_heartbeats": "crdscope_responsiveness_heartbeats",
    # What the monitor itself sent the server since it started (issue 24): counts only grow.
    "crdscope_footprint_requests_total": "crdscope_footprint_requests",
    "crdscope_footprint_bytes_total": "crdscope_footprint_bytes",
    "crdscope_footprint_loader_requests_total": "crdscope_footprint_loader_requests",
    "crdscope_footprint_loader_bytes_total": "crdscope_footprint_loader_bytes",
    "crdscope_footprint_by_path_requests": "crdscope_footprint_path_requests",
    "crdscope_footprint_by_path_bytes": "crdscope_footprint_path_bytes",
    "crdscope_footprint_by_origin_requests": "crdscope_footprint_origin_requests",
    "crdscope_footprint_by_origin_bytes": "crdscope_footprint_origin_bytes",
    "crdscope_footprint_legacy_walks": "crdscope_footprint_legacy_walks",
}
#: Gauges whose field names read as counters or histograms to Prometheus (``_total``, ``_count``)
#: or clash with a counter above.
GAUGE_RENAMES = {
    "crdscope_health_storage_objects_total": "crdscope_health_storage_objects",
    "crdscope_latency_canaries_count": "crdscope_latency_canaries_requests",
    "crdscope_openapi_lag_seconds_count": "crdscope_openapi_lag_observations",
    "crdscope_throttling_priority_levels_rejected": "crdscope_throttling_priority_levels_rejected_in_interval",
    "crdscope_discovery_not_modified": "crdscope_discovery_not_modified_in_run",
}
#: Abbreviated units spelled out (promtool: "metric names should not contain abbreviated units").
_PER_S = re.compile(r"_per_s(?=_|$)")


def metric_name(*parts: str) -> str:
    """``crdscope_<parts joined by _>`` with anything Prometheus rejects replaced by ``_``, units
    spelled out (``per_s`` -> ``per_second``) and names that read as another metric type renamed."""
    name = _PER_S.sub("_per_second", _UNSAFE.sub("_", "_".join((PREFIX, *parts))))
    return GAUGE_RENAMES.get(name, name)


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


@dataclasses.dataclass
class Exported:
    """One cluster the collector serves: its store, its open findings and what it is."""

    #: The ``cluster`` label of its series (the context name); "" leaves the label out.
    cluster: str
    store: SampleStore
    findings: Callable[[], list[Finding]]
    info: ClusterInfo | None = None


class SampleCollector(Collector):
    """Exposes the latest sample of each probe of every watched cluster at scrape time.

    Each cluster is a session core (``watch(core)``), read at each scrape: nothing is copied per
    sample.  Every series carries a ``cluster`` label, the core's cluster name (the context), so
    one exporter serves a fleet and rules group by ``cluster`` as the Kubernetes mixins do.  Each
    core's open findings add ``crdscope_findings{severity}`` and
    ``crdscope_finding_open{finding,kind,severity}``.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: The watched clusters, in the order they were added.
        self._watched: list[Exported] = []

    def watch(self, core: WatchCore, info: ClusterInfo | None = None) -> None:
        """Serve ``core``'s samples and open findings (its store is read at each scrape), labelled
        with its cluster name; ``info`` adds its ``crdscope_info``."""
        with self._lock:
            name = core.cluster or (info.context if info is not None else "")
            self._watched.append(Exported(name, core.store, core.open_findings, info))

    def clusters(self) -> list[Exported]:
        """What is served: the watched cores."""
        with self._lock:
            return list(self._watched)

    def latest(self, exported: Exported) -> dict[str, Sample]:
        """Probe name -> its latest sample in one cluster's store, read now (scrapes run in a thread)."""
        store = exported.store
        with self._lock:
            found = {name: store.latest(name) for name in list(store.health())}
        return {name: sample for name, sample in found.items() if sample is not None}

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        families: dict[str, GaugeMetricFamily | CounterMetricFamily] = {}
        label_names: dict[str, tuple[str, ...]] = {}

        def family_of(name: str, help_text: str, labels: tuple[str, ...],
                      kind: type[GaugeMetricFamily] | type[CounterMetricFamily] = GaugeMetricFamily
                      ) -> GaugeMetricFamily | CounterMetricFamily | None:
            family = families.get(name)
            if family is None:
                family = families[name] = kind(name, help_text, labels=list(labels))
                label_names[name] = labels
            # A shape Prometheus cannot hold in one family is left out.
            return family if labels == label_names[name] else None

        for exported in self.clusters():
            head = {"cluster": exported.cluster} if exported.cluster else {}
            for probe, sample in sorted(self.latest(exported).items()):
                labels = (*head, "probe")
                for name, help_text, value in (
                        ("probe_up", "1 when the probe's latest run succeeded", 0.0 if sample.error else 1.0),
                        ("probe_last_sample_timestamp_seconds", "Unix time of the probe's latest sample",
                         float(sample.timestamp))):
                    found = family_of(metric_name(name), help_text, labels)
                    if found is not None:
                        found.add_metric([*head.values(), probe], value)
                # A failed sample's figures are defaults, except what it says of the failure itself
                # (restarts, down for how long): a crash loop is exported while the server is away.
                valid = tuple(metric_name(probe, f) for f in type(sample).VALID_ON_ERROR) if sample.error else None
                for name, series_labels, value in flatten(probe, sample):
                    if valid is not None and not name.startswith(valid):
                        continue
                    name = COUNTERS.get(name, name)
                    every = {**head, **series_labels}
                    found = family_of(name, f"crdscope {probe} probe figure", tuple(every),
                                      CounterMetricFamily if name in _COUNTER_NAMES else GaugeMetricFamily)
                    if found is not None:
                        found.add_metric(list(every.values()), value)
            if exported.info is not None:
                found = family_of(metric_name("info"), "The watched cluster and crdscope's version",
                                  (*head, "server", "context", "kubernetes_version", "version"))
                if found is not None:
                    data = exported.info.to_json()
                    found.add_metric([*head.values(), data["server"], data["context"], data["kubernetes_version"],
                                      __version__], 1.0)
            findings_series(exported.findings(), head, family_of)
        yield from families.values()


_COUNTER_NAMES = frozenset(COUNTERS.values())


def findings_series(findings: list[Finding], head: dict[str, str],
                    family_of: Callable[..., GaugeMetricFamily | CounterMetricFamily | None]) -> None:
    """One cluster's open findings per severity, and one series per open finding."""
    by_severity = family_of(metric_name("findings"), "Open crdscope findings by severity", (*head, "severity"))
    for severity in Severity:
        if by_severity is not None:
            by_severity.add_metric([*head.values(), severity.value],
                                   float(sum(1 for f in findings if f.severity is severity)))
    each = family_of(metric_name("finding_open"), "1 for each open crdscope finding",
                     (*head, "finding", "kind", "severity"))
    for finding in findings:
        if each is not None:
            each.add_metric([*head.values(), finding.id, finding.kind, finding.severity.value], 1.0)


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
