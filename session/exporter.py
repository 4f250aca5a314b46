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

Cardinality stays bounded: no series per CRD or per event (``exported=False``), per-group figures at most
:data:`base.samples.attribution.MAX_GROUPS` groups a cluster (``crdscope_attribution_memory_bytes{group}``:
the costliest 500, the rest under ``group="(other)"``; the AWS provider family has 354 groups).

Names and types come from the samples' field declarations (:class:`base.samples.Figure`): a field
declared ``counter`` is a counter (``..._total``), ``label`` names a nested field's entries,
``metric`` renames a field whose own name reads as another type's series (``count``), and
``exported=False`` leaves out a series per CRD or per event.  Abbreviated units are spelled out
(``per_s`` -> ``per_second``); the names pass ``promtool check metrics``.

Every series carries ``cluster`` (the watched context's name): one exporter may serve a fleet
(``watch --headless --context A --context B``), and a Prometheus scraping several exporters
needs no relabelling to tell the clusters apart.

Findings: ``crdscope_findings{severity}`` counts the open findings that page,
``crdscope_findings_accepted{severity}`` the accepted ones (``[[silence]]``), and
``crdscope_finding_open{finding,kind,severity,accepted}`` is 1 for each open finding
(``accepted="true"`` while an acceptance holds it).  Each acceptance in force for a cluster is
``crdscope_finding_accepted_until_seconds{finding,kind}`` (the time it lapses), which the rules of
``crdscope rules`` read so as not to fire on an accepted kind; it leaves the endpoint as it lapses.

Also ``crdscope_probe_up{probe}`` (1 when the latest sample succeeded),
``crdscope_probe_last_sample_timestamp_seconds{probe}`` and ``crdscope_info`` (server, context,
Kubernetes version, crdscope version).  While a probe is down its figures are not
exported (a stale figure would look current); ``crdscope_probe_up`` says why.
"""

from __future__ import annotations

import dataclasses
import re
import threading
import time
from typing import TYPE_CHECKING, Any
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from crdscope.base.silences import Silence
from crdscope.findings.model import Finding, Severity
from crdscope.base.version import __version__
from crdscope.base.errors import ConfigError
from crdscope.base.facts import ClusterFacts
from crdscope.base.samples import PLAIN, Figure, Sample, figure_of, known_while_down
from crdscope.base.samples.health import HealthSample
from crdscope.base.store import SampleStore

from .recorder import ClusterInfo

if TYPE_CHECKING:
    from .core import WatchCore
from .values import finite_number, is_record, names_of, read_field

PREFIX = "crdscope"
#: Fields of a record that name it (first found wins) when records come as a tuple.
NAME_FIELDS = ("name", "group_version", "verb", "resource", "stage", "key")
MAX_DEPTH = 3
_UNSAFE = re.compile(r"[^a-zA-Z0-9_]")
#: Abbreviated units spelled out (promtool: "metric names should not contain abbreviated units").
_PER_S = re.compile(r"_per_s(?=_|$)")
#: A field name's unit suffix.
_UNIT = re.compile(r"_(seconds|bytes|mib)$")


def metric_name(*parts: str) -> str:
    """``crdscope_<parts joined by _>`` with anything Prometheus rejects replaced by ``_`` and units
    spelled out (``per_s`` -> ``per_second``)."""
    return _PER_S.sub("_per_second", _UNSAFE.sub("_", "_".join((PREFIX, *parts))))


def counter_family(name: str) -> str:
    """A counter's family name: the text format adds ``_total`` itself."""
    return name.removesuffix("_total")


def label_for(field: str, declared: Figure = PLAIN) -> str:
    """The label that names the entries of a nested field: declared, else from its name."""
    if declared.label:
        return declared.label
    if field.startswith("by_"):
        return _UNSAFE.sub("_", field[3:])
    if "_by_" in field:
        return _UNSAFE.sub("_", field.rsplit("_by_", 1)[1])
    return "key"


def flatten(probe: str, sample: Sample) -> Iterator[tuple[str, dict[str, str], float, bool]]:
    """Every exported series of a sample: (metric name, labels, value, is a counter), named and typed
    by the fields' declarations (:class:`base.samples.Figure`).  A failed sample exports only the
    fields declared ``while_down``: its other figures are defaults, not observations."""
    down = known_while_down(type(sample)) if sample.error else None
    for field in names_of(sample):
        if field in ("timestamp", "error") or (down is not None and field not in down):
            continue
        declared = figure_of(sample, field)
        if declared.exported:
            yield from _flatten(field, declared, (probe, declared.metric or field), read_field(sample, field), {}, 0)


def _flatten(field: str, declared: Figure, parts: tuple[str, ...], value: Any, labels: dict[str, str],
             depth: int) -> Iterator[tuple[str, dict[str, str], float, bool]]:
    as_number = finite_number(value)
    if as_number is not None:
        name = metric_name(*parts)
        yield (counter_family(name) if declared.counter else name), labels, as_number, declared.counter
        return
    if depth >= MAX_DEPTH:
        return
    if isinstance(value, dict):
        # A dict field is a keyed collection (``dict[str, T]``): its keys are data (verbs,
        # stages, owners), never figure names, since nested records are dataclasses.
        label = label_for(field, declared)
        for key, inner in value.items():
            yield from _flatten(field, declared, parts, inner, {**labels, label: str(key)}, depth + 1)
    elif is_record(value):
        yield from _record(value, parts, labels, depth)
    elif isinstance(value, (list, tuple)) and value and all(is_record(v) for v in value):
        label = declared.label or _singular(field)
        for item in value:
            key = next((str(read_field(item, n)) for n in NAME_FIELDS
                        if isinstance(read_field(item, n), str)), None)
            if key is None:
                return  # records with no name cannot be told apart
            yield from _record(item, parts, {**labels, label: key}, depth, skip=NAME_FIELDS)


def _record(record: Any, parts: tuple[str, ...], labels: dict[str, str], depth: int,
            skip: tuple[str, ...] = ()) -> Iterator[tuple[str, dict[str, str], float, bool]]:
    """The fields of a nested record (a name field that labels it is not a figure)."""
    for name in names_of(record):
        value = read_field(record, name)
        if name in skip and isinstance(value, str):
            continue
        declared = figure_of(record, name)
        if declared.exported:
            outer = (*parts[:-1], _UNIT.sub("", parts[-1])) if declared.unitless else parts
            yield from _flatten(name, declared, (*outer, declared.metric or name), value, labels, depth + 1)


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
    #: The acceptances in force for it at a given time (``[[silence]]``).
    acceptances: Callable[[float], list[Silence]] = lambda _now: []
    #: The core's facts: ``crdscope_health_memory_limit_bytes`` is their limit.
    facts: ClusterFacts | None = None


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
            self._watched.append(Exported(name, core.store, core.open_findings, info, core.acceptances,
                                          core.facts))

    def clusters(self) -> list[Exported]:
        """What is served: the watched cores."""
        with self._lock:
            return list(self._watched)

    def latest(self, exported: Exported) -> dict[str, Sample]:
        """Probe name -> its latest sample in one cluster's store, read now (scrapes run in a thread)."""
        store = exported.store
        with self._lock:
            found = {name: store.latest(name) for name in list(store.health())}
        return {name: with_known_limit(sample, exported.facts) for name, sample in found.items() if sample is not None}

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
                # A failed sample exports what it says of the failure itself (restarts, down for how
                # long): a crash loop is exported while the server is away.
                for name, series_labels, value, counter in flatten(probe, sample):
                    every = {**head, **series_labels}
                    found = family_of(name, f"crdscope {probe} probe figure", tuple(every),
                                      CounterMetricFamily if counter else GaugeMetricFamily)
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
            acceptances_series(exported.acceptances(time.time()), head, family_of)
        yield from families.values()



def with_known_limit(sample: Sample, facts: ClusterFacts | None) -> Sample:
    """A health sample as exported: its memory limit is the one the session knows (``base.facts``:
    ``--memory-limit``, else the lab's cap, else the one Prometheus shows), not only what Prometheus
    showed the probe."""
    if facts is None or not isinstance(sample, HealthSample):
        return sample
    return dataclasses.replace(sample, memory_limit_bytes=facts.memory_limit_bytes)


def findings_series(findings: list[Finding], head: dict[str, str],
                    family_of: Callable[..., GaugeMetricFamily | CounterMetricFamily | None]) -> None:
    """One cluster's open findings per severity (those that page, and those accepted), and one series
    per open finding."""
    for name, help_text, counted in (
            ("findings", "Open crdscope findings that page, by severity", [f for f in findings if f.pages]),
            ("findings_accepted", "Open crdscope findings accepted ([[silence]]), by severity",
             [f for f in findings if not f.pages])):
        by_severity = family_of(metric_name(name), help_text, (*head, "severity"))
        for severity in Severity:
            if by_severity is not None:
                by_severity.add_metric([*head.values(), severity.value],
                                       float(sum(1 for f in counted if f.severity is severity)))
    each = family_of(metric_name("finding_open"), "1 for each open crdscope finding",
                     (*head, "finding", "kind", "severity", "accepted"))
    for finding in findings:
        if each is not None:
            each.add_metric([*head.values(), finding.id, finding.kind, finding.severity.value,
                             "false" if finding.pages else "true"], 1.0)


def acceptances_series(acceptances: list[Silence], head: dict[str, str],
                       family_of: Callable[..., GaugeMetricFamily | CounterMetricFamily | None]) -> None:
    """One series per acceptance in force: when it lapses (the latest, when several accept the same)."""
    until: dict[str, Silence] = {}
    for silence in acceptances:
        if silence.finding not in until or until[silence.finding].until < silence.until:
            until[silence.finding] = silence
    family = family_of(metric_name("finding_accepted_until_seconds"),
                       "Unix time an acceptance of a finding ([[silence]]) lapses, while it holds",
                       (*head, "finding", "kind"))
    for finding, silence in sorted(until.items()):
        if family is not None:
            family.add_metric([*head.values(), finding, silence.kind], silence.until)


def parse_listen(text: str, *, flag: str = "--serve-metrics", default_host: str = "0.0.0.0",
                 example: str = ":9100 or 127.0.0.1:9100") -> tuple[str, int]:
    """``[HOST]:PORT`` -> (host, port); an empty host is ``default_host`` (every interface for the
    metrics endpoint, like ``:9100``; loopback for ``--serve-view``); errors name ``flag``."""
    value = text.strip()
    host, separator, port_text = value.rpartition(":")
    if not separator:
        host, port_text = "", value
    host = host.strip("[]")
    try:
        port = int(port_text)
    except ValueError:
        raise ConfigError(f"{flag} '{text}' is not [HOST]:PORT (e.g. {example})") from None
    if not 0 <= port <= 65535:
        raise ConfigError(f"{flag} '{text}': port {port} is out of range")
    return host or default_host, port


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
