"""API Priority and Fairness as ``/metrics`` and the flowcontrol API show it.

:func:`priority_levels` turns two scrapes of :data:`APF_FAMILIES` into
per-level (and per-flow-schema) current values, counts and rates;
:class:`FlowcontrolNames` maps the UIDs of the ``X-Kubernetes-PF-*`` response
headers to names.  The throttling probe (:mod:`probes.throttling`) puts them in
its sample.
"""

from __future__ import annotations

from crdscope.base.samples.throttling import FlowSchemaActivity, PriorityLevel

import asyncio
import dataclasses
import time
from collections.abc import Collection
from typing import Any

from crdscope.connection.cluster import Cluster
from crdscope.base.errors import ClusterError
from crdscope.connection.metrics import LabelKey, Scrape, buckets, delta_buckets, histogram_quantile, merge_buckets

#: The quantile of the queue wait reported per priority level.
WAIT_QUANTILE = 0.99

REJECTED = "apiserver_flowcontrol_rejected_requests_total"
DISPATCHED = "apiserver_flowcontrol_dispatched_requests_total"
INQUEUE = "apiserver_flowcontrol_current_inqueue_requests"
EXECUTING_REQUESTS = "apiserver_flowcontrol_current_executing_requests"
EXECUTING_SEATS = "apiserver_flowcontrol_current_executing_seats"
NOMINAL_LIMIT = "apiserver_flowcontrol_nominal_limit_seats"
CURRENT_LIMIT = "apiserver_flowcontrol_current_limit_seats"
WAIT = "apiserver_flowcontrol_request_wait_duration_seconds"
APF_FAMILIES = (REJECTED, DISPATCHED, INQUEUE, EXECUTING_REQUESTS, EXECUTING_SEATS,
                NOMINAL_LIMIT, CURRENT_LIMIT, WAIT)


# --------------------------------------------------------------------------- names of UIDs


class FlowcontrolNames:
    """UID -> name of FlowSchemas and PriorityLevelConfigurations, listed rarely.

    The lists are small (a dozen objects); they are fetched at most every
    :attr:`REFRESH_SECONDS`, or sooner (but not more than every
    :attr:`UNKNOWN_REFRESH_SECONDS`) when a header or ``/metrics`` names a flow
    schema or level not seen yet.  What one listing did not find (a deleted
    object, whose metrics the server keeps) does not make the next one sooner.
    """

    BASE = "/apis/flowcontrol.apiserver.k8s.io/v1"
    #: The API's versions, newest first: v1 from Kubernetes 1.29; 1.26-1.28 serve v1beta3
    #: (and v1beta2), older ones v1beta2/v1beta1.  The first that answers is kept.
    VERSIONS = ("v1", "v1beta3", "v1beta2", "v1beta1")
    REFRESH_SECONDS = 300.0
    UNKNOWN_REFRESH_SECONDS = 30.0

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.flow_schemas: dict[str, str] = {}
        self.priority_levels: dict[str, str] = {}
        #: priority level name -> "Queue" | "Reject" | "Exempt"
        self.limit_responses: dict[str, str] = {}
        self.error: str | None = None
        self._fetched_at: float | None = None
        self._not_found: set[str] = set()
        #: The flowcontrol API version the server answered (empty until listed).
        self.api_version = ""

    async def refresh(self, uids: Collection[str] = frozenset(), levels: Collection[str] = frozenset()) -> None:
        """List both kinds again if the cache is old, or if it lacks one of ``uids`` or ``levels`` (names)."""
        now = time.monotonic()
        age = None if self._fetched_at is None else now - self._fetched_at
        wanted = set(uids) | set(levels)
        known = self.flow_schemas.keys() | self.priority_levels.keys() | self.limit_responses.keys()
        unknown = bool(wanted - known - self._not_found)
        if age is not None and age < self.REFRESH_SECONDS and not (
                unknown and age >= self.UNKNOWN_REFRESH_SECONDS):
            return
        self._fetched_at = now
        schemas: Any = None
        listed_levels: Any = None
        version = self.api_version
        for version in [self.api_version] if self.api_version else self.VERSIONS:
            base = self.BASE.rsplit("/", 1)[0] + "/" + version
            schemas, listed_levels = await asyncio.gather(
                self.cluster.get_json(f"{base}/flowschemas"),
                self.cluster.get_json(f"{base}/prioritylevelconfigurations"),
                return_exceptions=True,
            )
            missing = [a for a in (schemas, listed_levels) if isinstance(a, ClusterError) and "answered 404" in str(a)]
            if not missing:
                break
        for answer in (schemas, listed_levels):
            if isinstance(answer, ClusterError):
                self.error = f"flowcontrol API: {answer}"
                return
            if isinstance(answer, BaseException):
                raise answer
        self.api_version = version
        self.error = None
        self.flow_schemas = _uid_names(schemas)
        self.priority_levels = _uid_names(listed_levels)
        self.limit_responses = {
            item["metadata"]["name"]: _limit_response(item.get("spec") or {})
            for item in _items(listed_levels) if item.get("metadata", {}).get("name")
        }
        found = self.flow_schemas.keys() | self.priority_levels.keys() | self.limit_responses.keys()
        self._not_found = wanted - found

    def flow_schema(self, uid: str | None) -> str | None:
        return self.flow_schemas.get(uid) if uid else None

    def priority_level(self, uid: str | None) -> str | None:
        return self.priority_levels.get(uid) if uid else None


def _items(listing: Any) -> list[dict[str, Any]]:
    items = listing.get("items") if isinstance(listing, dict) else None
    return [item for item in items or [] if isinstance(item, dict)]


def _uid_names(listing: Any) -> dict[str, str]:
    return {item["metadata"]["uid"]: item["metadata"]["name"] for item in _items(listing)
            if item.get("metadata", {}).get("uid") and item["metadata"].get("name")}


def _limit_response(spec: dict[str, Any]) -> str:
    if spec.get("type") == "Exempt":
        return "Exempt"
    return str(((spec.get("limited") or {}).get("limitResponse") or {}).get("type") or "Queue")


# --------------------------------------------------------------------------- server side


def _counter_delta(newer: float, older: float | None) -> float:
    """Increase of a counter; a lower value means the server restarted (counted from 0)."""
    if older is None:
        return newer
    return newer if newer < older else newer - older


def _rate(count: float | None, interval: float | None) -> float | None:
    if count is None or not interval:
        return None
    return count / interval


def level_names(scrape: Scrape) -> set[str]:
    """Every priority level the APF families of ``scrape`` name."""
    names: set[str] = set()
    for family in APF_FAMILIES:
        suffix = "_bucket" if family == WAIT else ""
        names.update(labels.get("priority_level", "") for labels, _ in scrape.series(family + suffix))
    names.discard("")
    return names


@dataclasses.dataclass(frozen=True)
class _Counts:
    """The APF families of two scrapes, grouped (``older`` None: windows and rates are None)."""

    interval: float | None
    rejected_now: dict[tuple[str, ...], float]
    rejected_window: dict[tuple[str, ...], float] | None
    dispatched_now: dict[tuple[str, ...], float]
    dispatched_window: dict[tuple[str, ...], float] | None
    inqueue: dict[tuple[str, ...], float]
    executing_requests: dict[tuple[str, ...], float]
    executing_seats: dict[tuple[str, ...], float]
    nominal: dict[tuple[str, ...], float]
    current: dict[tuple[str, ...], float]
    waits_now: dict[LabelKey, list[tuple[float, float]]]
    waits_before: dict[LabelKey, list[tuple[float, float]]] | None


def _counts(newer: Scrape, older: Scrape | None) -> _Counts:
    """Group the APF families of ``newer`` and, where ``older`` is a scrape before it, their windows."""
    interval = newer.timestamp - older.timestamp if older is not None else None
    if interval is not None and interval <= 0:
        older, interval = None, None
    rejected_now = newer.by(REJECTED, "priority_level", "flow_schema", "reason")
    dispatched_now = newer.by(DISPATCHED, "priority_level", "flow_schema")
    return _Counts(
        interval=interval,
        rejected_now=rejected_now,
        rejected_window=_window(rejected_now, older.by(REJECTED, "priority_level", "flow_schema", "reason")
                                if older is not None else None),
        dispatched_now=dispatched_now,
        dispatched_window=_window(dispatched_now, older.by(DISPATCHED, "priority_level", "flow_schema")
                                  if older is not None else None),
        inqueue=newer.by(INQUEUE, "priority_level", "flow_schema"),
        executing_requests=newer.by(EXECUTING_REQUESTS, "priority_level"),
        executing_seats=newer.by(EXECUTING_SEATS, "priority_level", "flow_schema"),
        nominal=newer.by(NOMINAL_LIMIT, "priority_level"),
        current=newer.by(CURRENT_LIMIT, "priority_level"),
        waits_now=buckets(newer, WAIT),
        waits_before=buckets(older, WAIT) if older is not None else None,
    )


def priority_levels(newer: Scrape, older: Scrape | None, limit_responses: dict[str, str]
                    ) -> tuple[tuple[PriorityLevel, ...], tuple[FlowSchemaActivity, ...]]:
    """Priority levels and active flow schemas from two scrapes (``older`` None: current values only).

    A series missing from ``older`` counts from 0: the server creates a series
    on its first observation.  The server keeps the series of a deleted level
    until it restarts: a level that ``limit_responses`` (the configured levels,
    when they could be listed) lacks is left out unless it is still busy.
    """
    counts = _counts(newer, older)
    levels = (_level(name, counts, limit_responses) for name in sorted(level_names(newer)))
    return tuple(level for level in levels if level is not None), _flow_schemas(counts)


def _level(name: str, counts: _Counts, limit_responses: dict[str, str]) -> PriorityLevel | None:
    """One priority level's figures; None for a deleted level (only its stale series remain)."""
    by_reason: dict[str, int] = {}
    for (level, _, reason), count in (counts.rejected_window or {}).items():
        if level == name and count:
            by_reason[reason] = by_reason.get(reason, 0) + int(count)
    rejected = sum(by_reason.values()) if counts.rejected_window is not None else None
    dispatched = (int(sum(c for (level, _), c in counts.dispatched_window.items() if level == name))
                  if counts.dispatched_window is not None else None)
    waiting, seats = _sum_level(counts.inqueue, name), _sum_level(counts.executing_seats, name)
    if limit_responses and name not in limit_responses and not (rejected or dispatched or waiting or seats):
        return None
    windowed = counts.waits_before is not None
    return PriorityLevel(
        name=name,
        limit_response=limit_responses.get(name),
        inqueue=int(waiting),
        executing_requests=int(counts.executing_requests.get((name,), 0)),
        executing_seats=int(seats),
        limit_seats=_int_or_none(counts.current.get((name,))),
        nominal_limit_seats=_int_or_none(counts.nominal.get((name,))),
        rejected_total=int(_sum_level(counts.rejected_now, name)),
        rejected=rejected,
        rejected_per_s=_rate(rejected, counts.interval),
        rejected_by_reason=by_reason,
        dispatched=dispatched,
        dispatched_per_s=_rate(dispatched, counts.interval),
        wait_p99_seconds=_wait_quantile(counts.waits_now, counts.waits_before, name) if windowed else None,
    )


def _flow_schemas(counts: _Counts) -> tuple[FlowSchemaActivity, ...]:
    """The flow schemas where something happened (rejected, dispatched, waiting or executing)."""
    schemas: list[FlowSchemaActivity] = []
    for level, schema in sorted({k[:2] for k in counts.rejected_now} | set(counts.dispatched_now)
                                | set(counts.inqueue) | set(counts.executing_seats)):
        rejected = sum(c for k, c in (counts.rejected_window or {}).items() if k[:2] == (level, schema))
        dispatched = (counts.dispatched_window or {}).get((level, schema), 0.0)
        waiting = counts.inqueue.get((level, schema), 0.0)
        seats = counts.executing_seats.get((level, schema), 0.0)
        if rejected or dispatched or waiting or seats:
            schemas.append(FlowSchemaActivity(
                name=schema, priority_level=level, inqueue=int(waiting), executing_seats=int(seats),
                rejected=int(rejected), rejected_per_s=_rate(rejected, counts.interval) or 0.0,
                dispatched=int(dispatched), dispatched_per_s=_rate(dispatched, counts.interval) or 0.0,
            ))
    return tuple(schemas)


def _window(now: dict[tuple[str, ...], float], before: dict[tuple[str, ...], float] | None
            ) -> dict[tuple[str, ...], float] | None:
    if before is None:
        return None
    return {key: _counter_delta(value, before.get(key, 0.0)) for key, value in now.items()}


def _sum_level(grouped: dict[tuple[str, ...], float], level: str) -> float:
    return sum(value for key, value in grouped.items() if key[0] == level)


def _int_or_none(value: float | None) -> int | None:
    return None if value is None else int(value)


def _wait_quantile(now: dict[LabelKey, list[tuple[float, float]]],
                   before: dict[LabelKey, list[tuple[float, float]]] | None, level: str) -> float | None:
    """The queue-wait quantile of one level's requests between the scrapes (executed or not)."""
    deltas = [delta_buckets(series, (before or {}).get(key))
              for key, series in now.items() if dict(key).get("priority_level") == level]
    return histogram_quantile(WAIT_QUANTILE, merge_buckets(deltas)) if deltas else None
