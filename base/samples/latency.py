"""The latency probe's sample and the records it holds: what every front end reads of it (the probe
that makes it is ``probes/latency.py``; readers import the sample from here, never the probe)."""

from __future__ import annotations

from dataclasses import dataclass, field

from crdscope.base.samples import Sample, figure

@dataclass(frozen=True)
class Canary:
    """One canary request now, and its rolling percentiles over the window."""

    path: str = ""
    seconds: float | None = None
    status: int | None = None
    error: str | None = None
    slo_seconds: float | None = None
    p50_seconds: float | None = None
    p99_seconds: float | None = None
    count: int = figure(0, metric="requests")


@dataclass(frozen=True, kw_only=True)
class LatencySample(Sample):
    """Canary times and the server's p99 per verb and scope against the SLOs."""

    probe = "latency"
    short_name = "lat"

    server: str = ""
    canaries: dict[str, Canary] = figure(default_factory=dict, label="canary")
    #: The custom resource the ``list_cr`` canary lists (``plural.group``).
    cr_resource: str = ""
    #: The histogram family read, and the seconds between the two scrapes compared.
    server_family: str = ""
    window_seconds: float | None = None
    p99_by_verb: dict[str, float] = field(default_factory=dict)
    #: Keys are "VERB scope", e.g. "LIST cluster".
    p99_by_verb_scope: dict[str, float] = figure(default_factory=dict, label="verb_scope")
    requests_by_verb_scope: dict[str, int] = figure(default_factory=dict, label="verb_scope")
    slo_seconds: dict[str, float] = figure(default_factory=dict, label="verb_scope")
    slo_breaches: tuple[str, ...] = ()
    #: For each breach, the resources with the most requests over its SLO in the window:
    #: "VERB scope resource" (``GET resource widgets.example.io``) -> those requests.
    requests_over_slo: dict[str, int] = figure(default_factory=dict, label="verb_scope_resource")
    canary_slo_breaches: tuple[str, ...] = ()
    #: The API server process whose histograms the p99s come from (behind a balancer, one replica's).
    process_start_time_seconds: float | None = None
    unobservable: dict[str, str] = field(default_factory=dict)
