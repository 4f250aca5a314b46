"""When each CRD reached each publication stage: the bookkeeping behind the OpenAPI probe.

Stages, and which clock each one uses:

- ``created``: ``metadata.creationTimestamp`` (server clock, truncated to the
  second).  It is the only record of when a CRD was made.
- ``names_accepted``: the NamesAccepted condition's ``lastTransitionTime``.  The
  watch keeps no sub-second time for it, and it follows creation within
  milliseconds: on the same (server) clock as ``created`` its lag is 0 or 1 s of
  truncation, with no client/server clock skew in it.
- ``established``: the watch's ``seen_established`` (sub-second, local clock, at
  most one pause of ``CRDWatch.coalesce`` late) when the watch saw the transition
  happen; the condition time when the CRD was already Established at the first
  list (the monitor started later).  The later stages are observed on the local
  clock too, so their order is comparable.
- ``discovery``: the end of the first aggregated-discovery fetch that showed the
  CRD's resource in every served group-version (resolution: the probe cadence), and
  never before ``established``: the server lists only Established CRDs, and the watch
  that reads an install's events in bursts (``CRDWatch.coalesce``) may report the
  transition up to one pause after a fetch already showed it.
- ``openapi_v3``: the end of the first ``/openapi/v3`` index fetch, started after
  the CRD was Established, in which every served group-version's hash differs from
  its hash before (or the path appeared).  The server publishes a CRD's schema
  only once it is Established; a hash change caused by another CRD of the same
  group-version established moments before can mark this one a little early.
  The watch reports Established late when its events queue up (a big batch, a
  busy client), and the server may publish the schema before that report: then
  no fetch started after ``established`` ever shows a change.  A CRD left so
  for ``CONTENT_CHECK_AFTER`` seconds is settled by the group-version document
  itself (``/openapi/v3/apis/<group>/<version>?hash=...``, fetched once per
  hash): when its resource is in the document, the stage is timed at the later
  of ``established`` and the fetch that first showed that hash.  On servers before
  1.27 the index is not read while CRDs change (``probes.openapi``): there the stage is
  the end of the first ``/metrics`` scrape listing the CRD's versions in the server's
  ``apiextensions_openapi_v3_regeneration_count`` series.

A stage seen already reached at the first observation ("before monitoring")
has no time: it counts as reached but stays out of the lag figures.  Lags are
measured from ``created``, so they include up to one second of truncation.
"""

from __future__ import annotations

from crdscope.base.samples.openapi import LagStats

from dataclasses import dataclass, field
from typing import Literal

from crdscope.connection.crdwatch import CRDRecord
from crdscope.base.samples import percentile

#: A publication stage, in pipeline order (also the keys of ``OpenAPISample.lag_seconds``).
Stage = Literal["names_accepted", "established", "discovery", "openapi_v3"]
STAGES: tuple[Stage, ...] = ("names_accepted", "established", "discovery", "openapi_v3")
#: Hash changes kept per group-version (enough to place every pending CRD).
HISTORY_PER_GROUP_VERSION = 64
#: Seconds an Established CRD waits for a hash change before its group-version document is read.
CONTENT_CHECK_AFTER = 5.0
#: Group-version documents remembered (path, hash) -> resources in it.
CONTENTS_KEPT = 256


def lag_stats(values: list[float]) -> LagStats:
    """p50/p95/max of ``values`` (None for no values)."""
    if not values:
        return LagStats()
    return LagStats(p50=percentile(values, 50), p95=percentile(values, 95), max=max(values), count=len(values))


@dataclass
class Stages:
    """The stage times of one CRD (None: not reached, or reached before monitoring)."""

    name: str
    created: float
    names_accepted: float | None = None
    established: float | None = None
    discovery: float | None = None
    openapi_v3: float | None = None
    #: Reached, but before we could time it.
    discovery_untimed: bool = False
    openapi_untimed: bool = False

    @property
    def in_discovery(self) -> bool:
        return self.discovery is not None or self.discovery_untimed

    @property
    def in_openapi(self) -> bool:
        return self.openapi_v3 is not None or self.openapi_untimed


@dataclass
class IndexChange:
    """A group-version's hash as first observed by one index fetch (hash None: path gone)."""

    started: float
    received: float
    hash: str | None


@dataclass
class GroupVersionHistory:
    """What the index fetches showed for one ``apis/<group>/<version>`` path."""

    #: The path was in the first index fetch (its first appearance is unknown).
    initial: bool
    changes: list[IndexChange] = field(default_factory=list)

    @property
    def current(self) -> str | None:
        return self.changes[-1].hash if self.changes else None

    @property
    def first_seen(self) -> float | None:
        """When the path first appeared (None when it was there at the first fetch)."""
        if self.initial:
            return None
        return next((c.received for c in self.changes if c.hash is not None), None)

    @property
    def hash_changed(self) -> float | None:
        """When the current hash was first seen (None when unchanged since the first fetch)."""
        if len(self.changes) == 1 and self.initial:
            return None
        return self.changes[-1].received if self.changes else None


def established_time(record: CRDRecord) -> float | None:
    """The ``established`` stage time of a record (see the module docstring)."""
    if record.established is None:
        return None
    if record.established_live and record.seen_established is not None:
        return record.seen_established
    return record.established


class PublicationTracker:
    """Stage times per CRD, fed with CRD records and discovery/index observations."""

    def __init__(self) -> None:
        self.stages: dict[str, Stages] = {}  # by uid
        self.index: dict[str, GroupVersionHistory] = {}
        self.index_fetches = 0
        self.first_index_started: float | None = None
        #: (group, version, plural) -> when it appeared in discovery (None: in the first fetch).
        self.discovery_appeared: dict[tuple[str, str, str], float | None] = {}
        self.discovery_fetches = 0
        #: ("apis/<group>/<version>", hash) -> the resources its document lists.
        self.contents: dict[tuple[str, str], frozenset[str]] = {}
        #: CRD versions placed by a group-version document rather than by a hash change.
        self.placed_by_content = 0
        #: CRDs placed by the server's regeneration series rather than by the index.
        self.placed_by_regeneration = 0

    # -- CRDs ------------------------------------------------------------------------
    def update_crds(self, records: dict[str, CRDRecord]) -> None:
        """Follow the current CRDs: new ones start, deleted ones are forgotten."""
        current = {record.uid: record for record in records.values()}
        for uid in [uid for uid in self.stages if uid not in current]:
            del self.stages[uid]
        for uid, record in current.items():
            stages = self.stages.get(uid)
            if stages is None:
                stages = self.stages[uid] = Stages(name=record.name, created=record.created)
            stages.names_accepted = record.names_accepted
            stages.established = established_time(record)

    # -- discovery -------------------------------------------------------------------
    def observe_discovery(self, received: float, visible: set[tuple[str, str, str]],
                          records: dict[str, CRDRecord]) -> None:
        """One aggregated-discovery fetch (received at ``received``) listing ``visible`` resources."""
        first = self.discovery_fetches == 0
        self.discovery_fetches += 1
        for key in [k for k in self.discovery_appeared if k not in visible]:
            del self.discovery_appeared[key]
        for key in visible:
            if key not in self.discovery_appeared:
                self.discovery_appeared[key] = None if first else received
        for record in records.values():
            stages = self.stages.get(record.uid)
            if stages is None or stages.in_discovery or not record.served_versions:
                continue
            if stages.established is None:
                # The server lists a CRD only once it is Established: a watch that has not said so
                # yet is behind (it reads an install's events in bursts), and the stage waits for it.
                continue
            keys = [(record.group, version, record.plural) for version in record.served_versions]
            if not all(key in self.discovery_appeared for key in keys):
                continue
            seen = [self.discovery_appeared[key] for key in keys]
            times = [t for t in seen if t is not None]
            if len(times) < len(seen) or max(times) < record.created - 1.0:
                # Visible before we looked, or the resource belongs to an earlier CRD of the same name.
                stages.discovery_untimed = True
            else:
                # Never before Established: a watch that reads in bursts reports it up to a pause late.
                stages.discovery = max(*times, stages.established)

    # -- /openapi/v3 -----------------------------------------------------------------------
    def observe_index(self, started: float, received: float, hashes: dict[str, str]) -> None:
        """One ``/openapi/v3`` index fetch: ``apis/<group>/<version>`` path -> hash."""
        first = self.index_fetches == 0
        self.index_fetches += 1
        if first:
            self.first_index_started = started
        for path, history in self.index.items():
            if path not in hashes and history.current is not None:
                history.changes.append(IndexChange(started, received, None))
        for path, digest in hashes.items():
            known = self.index.get(path)
            history = known if known is not None else self.index.setdefault(path, GroupVersionHistory(initial=first))
            if history.current != digest:
                history.changes.append(IndexChange(started, received, digest))
                del history.changes[:-HISTORY_PER_GROUP_VERSION]

    def place_openapi(self, records: dict[str, CRDRecord]) -> None:
        """Decide, for every Established CRD not yet published, whether the index now shows it."""
        if self.first_index_started is None:
            return
        for record in records.values():
            stages = self.stages.get(record.uid)
            if stages is None or stages.in_openapi or stages.established is None or not record.served_versions:
                continue
            times: list[float] = []
            untimed = False
            for version in record.served_versions:
                history = self.index.get(f"apis/{record.group}/{version}")
                if history is None or history.current is None:
                    break
                if stages.established < self.first_index_started and history.initial:
                    untimed = True  # published, for all we know, before the first fetch
                    continue
                change = next((c for c in history.changes if c.started > stages.established and c.hash), None)
                if change is not None:
                    times.append(change.received)
                    continue
                change = self._shown_by_content(f"apis/{record.group}/{version}", history, record.plural)
                if change is None:
                    break
                self.placed_by_content += 1
                times.append(max(change.received, stages.established))
            else:
                if untimed:
                    stages.openapi_untimed = True
                else:
                    stages.openapi_v3 = max(times)

    def observe_regenerations(self, at: float, published: set[tuple[str, str]],
                              records: dict[str, CRDRecord]) -> None:
        """The server's own list of the CRD versions its OpenAPI v3 controller published, read at ``at``
        (servers before 1.27, whose index is read only once CRDs settle: see ``probes.openapi``).

        A CRD the watch saw become Established, with every served version listed, reached
        ``openapi_v3`` by ``at`` (resolution: the scrape cadence).  CRDs Established before
        monitoring are left to the index (untimed), as are CRDs not yet listed.
        """
        for record in records.values():
            stages = self.stages.get(record.uid)
            if (stages is None or stages.in_openapi or stages.established is None or not record.established_live
                    or not record.served_versions):
                continue
            if all((record.name, version) in published for version in record.served_versions):
                stages.openapi_v3 = max(at, stages.established)
                self.placed_by_regeneration += 1

    def _shown_by_content(self, path: str, history: GroupVersionHistory, plural: str) -> IndexChange | None:
        """The change that brought the current hash, when that hash's document lists ``plural``."""
        current = history.changes[-1]
        resources = self.contents.get((path, current.hash or ""))
        return current if resources is not None and plural in resources else None

    def content_wanted(self, records: dict[str, CRDRecord], now: float,
                       after: float = CONTENT_CHECK_AFTER) -> list[tuple[str, str]]:
        """(path, hash) documents that would settle CRDs Established ``after`` seconds ago with no change since."""
        wanted: list[tuple[str, str]] = []
        for record in records.values():
            stages = self.stages.get(record.uid)
            if (stages is None or stages.in_openapi or stages.established is None or record.terminating
                    or now - stages.established < after):
                continue
            for version in record.served_versions:
                path = f"apis/{record.group}/{version}"
                history = self.index.get(path)
                if history is None or not history.changes or history.current is None:
                    continue
                key = (path, history.current)
                if key not in self.contents and key not in wanted:
                    wanted.append(key)
        return wanted

    def observe_content(self, path: str, digest: str, resources: frozenset[str]) -> None:
        """What one group-version document (``path`` at hash ``digest``) lists."""
        self.contents[(path, digest)] = resources
        while len(self.contents) > CONTENTS_KEPT:
            del self.contents[next(iter(self.contents))]

    # -- results -----------------------------------------------------------------------------
    def lag_seconds(self) -> dict[str, LagStats]:
        """Per stage, p50/p95/max of (stage time - created) over the timed CRDs."""
        values: dict[Stage, list[float]] = {stage: [] for stage in STAGES}
        for stages in self.stages.values():
            for stage in STAGES:
                when = getattr(stages, stage)
                if when is not None:
                    values[stage].append(max(0.0, when - stages.created))
        return {stage: lag_stats(found) for stage, found in values.items()}

    def backlog(self, records: dict[str, CRDRecord]) -> list[tuple[str, float]]:
        """(name, Established time) of Established, not Terminating CRDs missing from the v3 index."""
        pending = []
        for record in records.values():
            stages = self.stages.get(record.uid)
            if (stages is not None and stages.established is not None and not record.terminating
                    and not stages.in_openapi):
                pending.append((record.name, stages.established))
        return sorted(pending, key=lambda item: item[1])
