"""The health probe's sample and the records it holds: what every front end reads of it (the probe
that makes it is ``probes/health.py``; readers import the sample from here, never the probe)."""

from __future__ import annotations

from dataclasses import dataclass, field

from crdscope.base.samples import Sample, figure
from crdscope.base.restarts import RestartEvent

RATE_WINDOW = "5m"


SHOWN = ("APF and latency panels show /metrics (the replica that answered each scrape) when it is "
         "readable; these Prometheus figures cover every instance")


@dataclass(frozen=True)
class InstanceFigures:
    """One API server instance as Prometheus scrapes it."""

    instance: str
    rss_bytes: int | None = None
    heap_bytes: int | None = None
    goroutines: int | None = None
    open_fds: int | None = None
    start_time: float | None = None
    #: Changes of its start time within :data:`RESTART_WINDOW`.
    restarts: int | None = None


@dataclass(frozen=True)
class PrometheusFigures:
    """Figures a managed control plane offers only through Prometheus (see the module doc)."""

    instances: tuple[InstanceFigures, ...] = ()
    apf_rejected_total: dict[str, float] = field(default_factory=dict)
    apf_rejected_per_s: dict[str, float] = field(default_factory=dict)
    apf_inqueue: dict[str, float] = field(default_factory=dict)
    latency_p99_seconds: dict[str, float] = field(default_factory=dict)
    #: The range of the rates and quantiles ("" when the quantiles cover each process's life).
    window: str = RATE_WINDOW
    #: figure -> the PromQL it came from.
    queries: dict[str, str] = field(default_factory=dict)
    #: Which figures the monitor shows where /metrics offers them too.
    shown: str = SHOWN


@dataclass(frozen=True)
class ReplicaFigures:
    """One API server replica as last seen: its process, figures, fits and restarts."""

    name: str
    start_time: float
    restarts: int = 0
    #: When this replica last answered a scrape, and how many of its scrapes were read.
    last_seen: float = 0.0
    scrapes: int = 0
    #: True for the replica that answered the newest scrape.
    answering: bool = False
    rss_bytes: int | None = None
    heap_bytes: int | None = None
    goroutines: int | None = None
    open_fds: int | None = None
    max_fds: int | None = None
    mib_per_crd: float | None = None
    r2: float | None = None
    heap_mib_per_crd: float | None = None
    fds_per_crd: float | None = None
    #: Observations behind this replica's memory fit, and at how many CRD counts.
    fit_points: int = 0
    fit_crd_counts: int = 0


@dataclass(frozen=True)
class Outage:
    """A time the server was unreachable or not ready; ``end`` is None while it lasts."""

    start: float
    end: float | None = None
    duration_seconds: float = 0.0
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class HealthSample(Sample):
    """The API server's resources, restarts and availability (None figures: see ``unobservable``)."""

    probe = "health"
    server: str = ""
    rss_bytes: int | None = None
    heap_bytes: int | None = None
    goroutines: int | None = None
    start_time: float | None = None
    open_fds: int | None = None
    max_fds: int | None = None
    #: Lab only: established TCP connections from the API server to etcd (from /proc).
    etcd_connections: int | None = None
    storage_objects_total: int | None = figure(None, metric="storage_objects")
    #: CRDs whose resource has no stored objects (a 0 or no series in the object-count family),
    #: and a few of them by name.
    crds_without_objects: int | None = None
    unused_crd_examples: tuple[str, ...] = ()
    #: CRDs that have objects, by name (at most ``IN_USE_KEPT``; what an activation policy keeps),
    #: empty when object counts are not observable (then ``crds_without_objects`` is None).
    crds_with_objects: tuple[str, ...] = ()
    storage_objects_top: dict[str, int] = figure(default_factory=dict, label="resource")
    storage_size_bytes: int | None = None
    #: Restarts during the watch (``probe health``: as far back as a source knows), counted by
    #: ``restarts_source``, the source that saw the most of them (:mod:`probes.restarts`).
    restarts: int | None = figure(None, counter=True, while_down=True)
    restarts_source: str | None = None
    #: Each source's count: process start time, identity lease, lab supervisor, kube-state-metrics.
    restarts_by_source: dict[str, int] = figure(default_factory=dict, counter=True, label="source", while_down=True)
    #: The latest restarts, oldest first: when, which replica, OOM-killed, uptime, memory at death
    #: (a platform's log reaches back before the watch; the other sources start with it).
    restart_events: tuple[RestartEvent, ...] = figure((), exported=False)
    #: Identity Lease host -> holder changes: restarts of that replica, scraped or not.
    lease_restarts: dict[str, int] = figure(default_factory=dict, counter=True, label="host", while_down=True)
    #: OOM kills during the watch where the platform counts them (the lab's memory groups).
    oom_kills: int | None = figure(None, counter=True, while_down=True)
    #: Prometheus only: API server pods whose container last terminated OOMKilled (kube-state-metrics).
    oom_killed_pods: tuple[str, ...] = ()
    #: How long the server has been down (unreachable or not ready) now; 0 while it serves.
    down_seconds: float = figure(0.0, while_down=True)
    #: The replica that answered this run's scrape ("r1", "r2"...) and every replica seen so far.
    replica: str | None = None
    replicas: tuple[ReplicaFigures, ...] = ()
    #: API servers renewing their identity Lease now, and Lease holders replaced since the start.
    apiservers: int | None = figure(None, while_down=True)
    lease_replacements: int | None = None
    ready: bool | None = figure(None, while_down=True)
    live: bool | None = figure(None, while_down=True)
    #: Checks /readyz names as failing (what makes ``ready`` False), and those /livez names.
    failing_checks: tuple[str, ...] = ()
    failing_live_checks: tuple[str, ...] = ()
    down: bool = figure(False, while_down=True)
    outages: tuple[Outage, ...] = figure((), while_down=True)
    crds: int | None = None
    mib_per_crd: float | None = None
    r2: float | None = None
    heap_mib_per_crd: float | None = None
    heap_r2: float | None = None
    fds_per_crd: float | None = None
    fds_r2: float | None = None
    #: Observations behind the memory fit, and at how many different CRD counts.
    fit_points: int = 0
    fit_crd_counts: int = 0
    #: Crossplane ManagedResourceDefinitions stored (the server's object counts; None: not counted).
    mrds: int | None = None
    #: MiB per CRD with the MRDs' memory taken out, where MRDs arrived while this process ran (None:
    #: no MRD count changed, so ``mib_per_crd`` is the CRDs' own already); how it was found
    #: (``own_share_by``): "fit" (RSS against CRDs and MRDs both) or "mrd-cost" (they grew together:
    #: the MRDs' measured cost, :data:`base.activation.MRD_BYTES` each, is taken out first).
    mib_per_crd_own: float | None = None
    #: MiB per MRD, where the fit could tell MRDs from CRDs.
    mib_per_mrd: float | None = None
    own_share_by: str = ""
    #: Prometheus only: the pod's working set and kube-state-metrics' restart counts per pod.
    working_set_bytes: int | None = None
    #: Prometheus only: the API server container's memory limit (kube-state-metrics or cAdvisor).
    memory_limit_bytes: int | None = figure(None, while_down=True)
    pod_restarts: dict[str, int] = figure(default_factory=dict, label="pod")
    #: Prometheus only: per-instance figures, APF and latency p99 by verb over every instance.
    prometheus: PrometheusFigures | None = None
    #: field -> where a figure came from when not from this server's /metrics.
    sources: dict[str, str] = field(default_factory=dict)
    #: field -> why it has no value.
    unobservable: dict[str, str] = field(default_factory=dict)


#: Two start times closer than this are one process (the gauge is a float of seconds).
START_TIME_TOLERANCE_SECONDS = 0.5


def same_process(a: float, b: float) -> bool:
    """True when two start times name one process."""
    return abs(a - b) <= START_TIME_TOLERANCE_SECONDS


def replica_named(replicas: tuple[ReplicaFigures, ...], start_time: float | None) -> str | None:
    """The name of the replica in ``replicas`` whose process started at ``start_time``, if any."""
    if start_time is None:
        return None
    return next((replica.name for replica in replicas if same_process(replica.start_time, start_time)), None)
