"""The throttling probe's sample and the records it holds: what every front end reads of it (the probe
that makes it is ``probes/throttling.py``; readers import the sample from here, never the probe)."""

from __future__ import annotations

from dataclasses import dataclass, field

from crdscope.base.samples import Sample, figure
from .discovery import ClientModel

@dataclass(frozen=True)
class PriorityLevel:
    """One APF priority level: current values, and counts/rates between the two scrapes.

    A level the server has never routed a request to has no per-level series;
    its counts and gauges are then 0 (the server exports the family for other
    levels).  ``wait_p99_seconds`` is None when no request waited in the window.
    """

    name: str
    #: "Queue", "Reject" or "Exempt" (from the flowcontrol API; None when it cannot be listed)
    limit_response: str | None = None
    inqueue: int = 0
    executing_requests: int = 0
    executing_seats: int = 0
    #: seats the level may use now (nominal plus borrowed, minus lent)
    limit_seats: int | None = None
    nominal_limit_seats: int | None = None
    #: the server's counter since it started
    rejected_total: int = figure(0, counter=True)
    rejected: int | None = figure(None, metric="rejected_in_interval")
    rejected_per_s: float | None = None
    #: rejections in the window by reason (queue-full, concurrency-limit, time-out)
    rejected_by_reason: dict[str, int] = field(default_factory=dict)
    dispatched: int | None = None
    dispatched_per_s: float | None = None
    wait_p99_seconds: float | None = None


@dataclass(frozen=True)
class FlowSchemaActivity:
    """A flow schema that queued, executed, dispatched or rejected something in the window."""

    name: str
    priority_level: str
    inqueue: int = 0
    executing_seats: int = 0
    rejected: int = 0
    rejected_per_s: float = 0.0
    dispatched: int = 0
    dispatched_per_s: float = 0.0


@dataclass(frozen=True)
class Response429:
    """A 429 one of crdscope's requests received."""

    timestamp: float
    method: str
    path: str
    retry_after_seconds: float | None
    flow_schema: str | None
    priority_level: str | None


@dataclass(frozen=True)
class Responses429:
    """Every 429 crdscope's requests to this cluster received."""

    total: int = figure(0, counter=True)
    since_last_run: int = 0
    #: the latest ones, oldest first
    recent: tuple[Response429, ...] = ()


@dataclass(frozen=True)
class OwnFlow:
    """A (flow schema, priority level) the server put crdscope's own requests in."""

    flow_schema: str | None
    priority_level: str | None
    flow_schema_uid: str
    priority_level_uid: str
    responses: int


@dataclass(frozen=True)
class ClientLimiter:
    """crdscope's own client-side token bucket (the loader's)."""

    qps: float
    burst: int
    acquired: int
    #: acquires that had to wait for a token
    throttled: int
    waited_seconds: float
    #: waiting time added since the previous run
    waited_seconds_since_last_run: float | None = None


@dataclass(frozen=True, kw_only=True)
class ThrottlingSample(Sample):
    """Server-side APF and client-side limits, as a person waiting on kubectl lives them."""

    probe = "throttling"
    short_name = "apf"

    server: str = ""
    #: seconds between the two scrapes the counts and rates come from (None: one scrape only)
    interval_seconds: float | None = None
    priority_levels: tuple[PriorityLevel, ...] = figure((), label="priority_level")
    flow_schemas: tuple[FlowSchemaActivity, ...] = figure((), label="flow_schema")
    rejected_per_s: float | None = None
    responses_429: Responses429 = Responses429()
    own_flows: tuple[OwnFlow, ...] = ()
    client_limiter: ClientLimiter | None = None
    client_models: tuple[ClientModel, ...] = ()
    scrape_bytes: int = 0
    scrape_seconds: float = 0.0
    #: The flowcontrol.apiserver.k8s.io version the names came from (v1 from 1.29, v1beta3 on 1.26-1.28).
    flowcontrol_api: str = ""
    #: The API server process the APF figures and rates come from (behind a balancer, one replica's;
    #: rates compare two scrapes of that process only).  None when the scrape does not say.
    process_start_time_seconds: float | None = None
    #: figure -> why it could not be observed
    unobservable: dict[str, str] = field(default_factory=dict)
