"""The discovery probe's sample and the records it holds: what every front end reads of it (the probe
that makes it is ``probes/discovery.py``; readers import the sample from here, never the probe)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from crdscope.base.samples import Sample, figure

#: How a discovery answer came: aggregated discovery in one of its versions, or plain (legacy) JSON.
DiscoveryFormat = Literal["v2", "v2beta1", "legacy"]


#: How a discovery run asked: aggregated discovery (two requests), or the legacy walk (one per group-version).
DiscoveryMode = Literal["aggregated", "legacy"]


@dataclass(frozen=True)
class ClientModel:
    """One client model's replay of a measured walk (a nested sample field).

    ``seconds`` is the walk's wall time behind that limiter; ``waited_seconds``
    the wall time during which at least one request was held by the limiter
    (what kubectl's "Waited for ... due to client-side throttling" lines add up
    to on the clock; never more than ``seconds``).
    """

    name: str
    qps: float
    burst: int
    seconds: float
    waited_seconds: float


#: kubectl trusts cached discovery for six hours (kubernetes PR 107141).
CACHE_TTL_SECONDS = 6 * 3600.0


@dataclass(frozen=True)
class KubectlCache:
    """kubectl's discovery cache for one server (a nested sample field)."""

    path: str
    present: bool = False
    files: int = 0
    bytes: int = 0
    #: age of ``servergroups.json`` (when it passes the TTL kubectl fetches discovery again)
    age_seconds: float | None = None
    oldest_seconds: float | None = None
    ttl_seconds: float = CACHE_TTL_SECONDS
    expired: bool | None = None
    #: wall time to read and JSON-parse every cached file, as kubectl does on a warm start
    read_seconds: float | None = None
    unreadable_files: int = 0


@dataclass(frozen=True)
class KubectlTiming:
    """``kubectl api-resources`` timed by the clock, cold then warm (a nested sample field)."""

    cold_seconds: float | None = None
    warm_seconds: float | None = None
    #: ``--cached``: discovery served from the disk cache alone
    cached_seconds: float | None = None
    resources: int | None = None
    #: "Waited for ... due to client-side throttling" lines kubectl printed (cold run)
    throttling_messages: int = 0
    error: str | None = None


@dataclass(frozen=True)
class GroupVersionLatency:
    """One group-version's GET in the legacy walk."""

    group_version: str
    seconds: float


@dataclass(frozen=True, kw_only=True)
class DiscoverySample(Sample):
    """One discovery run.

    ``group_versions`` and ``resources`` count as ``kubectl api-versions`` and
    ``kubectl api-resources`` do (see :mod:`connection.discovery_docs`).  ``requests``,
    ``bytes`` (decoded bodies), ``wire_bytes`` and ``seconds`` describe this run's
    discovery in ``mode``; a legacy walk made alongside an aggregated run is in
    ``walk_*``.  Latencies, ``slowest`` and ``client_models`` come from the latest
    legacy walk (``walk_timestamp``); without one they are empty and ``unobservable``
    says why.  ``appeared``/``vanished`` compare with the previous run (the first
    run is the baseline: nothing changed).
    """

    probe = "discovery"
    short_name = "disc"

    server: str = ""
    #: "" in a failed sample.
    mode: DiscoveryMode | Literal[""] = ""
    format: DiscoveryFormat | Literal[""] = ""
    fallback_reason: str | None = None
    group_versions: int = 0
    resources: int = 0
    stale_group_versions: tuple[str, ...] = ()
    failed_group_versions: dict[str, str] = figure(default_factory=dict, exported=False)
    requests: int = 0
    bytes: int = 0
    wire_bytes: int = 0
    seconds: float = 0.0
    not_modified: int = figure(0, metric="not_modified_in_run")
    not_modified_total: int = figure(0, counter=True)
    changed: bool = False
    appeared: tuple[str, ...] = ()
    vanished: tuple[str, ...] = ()
    #: A full GET of /api and /apis without ETag (what a new client pays), every
    #: ``cadences.discovery_legacy`` seconds; ``seconds`` above is mostly a conditional GET answered 304.
    cold_seconds: float | None = None
    cold_bytes: int | None = None
    cold_timestamp: float | None = None
    walk_timestamp: float | None = None
    walk_requests: int | None = None
    walk_bytes: int | None = None
    walk_seconds: float | None = None
    gv_p50_seconds: float | None = None
    gv_p95_seconds: float | None = None
    gv_max_seconds: float | None = None
    slowest: tuple[GroupVersionLatency, ...] = figure((), label="group_version")
    client_models: tuple[ClientModel, ...] = figure((), label="model")
    kubectl_cache: KubectlCache | None = None
    kubectl: KubectlTiming | None = None
    unobservable: dict[str, str] = field(default_factory=dict)
