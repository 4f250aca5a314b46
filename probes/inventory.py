"""The CRD inventory: how many CRDs, in which state, installed by whom, how fast.

Everything comes from the shared :class:`~probes.crdwatch.CRDWatch` (one list +
watch, never per-CRD requests), plus two small reads where Crossplane is
installed: a ProviderRevision's ``status.objectRefs`` (how many CRDs the
revision installs, for an ETA) and Crossplane v2's ManagedResourceDefinitions
by ``spec.state``, read as a server-side Table (name and printer columns only:
an MRD embeds a whole CRD schema, its full list would be megabytes).

Definitions (what the panel and ``--json`` mean):

- ``per_minute``: CRDs whose ``creationTimestamp`` falls in the last
  ``window_seconds`` (60 s, sliding), scaled to a minute.  CRDs deleted since
  are not counted; creation timestamps have one-second resolution.
- An owner is *still installing* when it has a CRD created in the window or a
  CRD not yet Established (and not Terminating).
- Its ETA: with an expected count (a ProviderRevision's objectRefs), the CRDs
  still to reach Established divided by the owner's Established rate (its
  creation rate while nothing was Established yet); without one, only the
  current backlog (created, not yet Established) can be timed, so the ETA is
  ``eta_basis="backlog"`` (more CRDs may follow).  No rate, no ETA: the reason
  is in ``eta_note``.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING, Literal
import time
from collections.abc import Iterable

from .cluster import Cluster, explain, status_message
from .crdwatch import CRDRecord, CRDWatch
from .samples import Sample
from .transport import TRANSPORT_ERRORS

if TYPE_CHECKING:
    from .monitor import Monitor

#: Sliding window of the creation and Established rates.
WINDOW_SECONDS = 60.0
MRD_CRD = "managedresourcedefinitions.apiextensions.crossplane.io"
PROVIDER_REVISION_CRD = "providerrevisions.pkg.crossplane.io"
#: MRDs and ProviderRevisions are re-read at most this often (they change with installs, slowly).
CROSSPLANE_REFRESH_SECONDS = 15.0
TABLE_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
TABLE_PAGE = 500


#: What an install ETA counts to: the CRDs an owner will install, or only those created so far.
EtaBasis = Literal["expected", "backlog", ""]


@dataclasses.dataclass(frozen=True, kw_only=True)
class OwnerInstall:
    """One owner that is still installing CRDs."""

    crds: int = 0
    established: int = 0
    #: Created, not yet Established, not Terminating.
    backlog: int = 0
    per_minute: float = 0.0
    established_per_minute: float = 0.0
    #: CRDs the owner will install, when known (a ProviderRevision's objectRefs).
    expected: int | None = None
    eta_seconds: float | None = None
    #: "expected" (all of the expected CRDs), "backlog" (only those created so far) or "".
    eta_basis: EtaBasis = ""
    eta_note: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class MRDCounts:
    """Crossplane v2 ManagedResourceDefinitions by ``spec.state``."""

    #: The ManagedResourceDefinition API exists on this cluster.
    present: bool = False
    version: str = ""
    total: int | None = None
    active: int | None = None
    inactive: int | None = None
    #: Why the counts are missing (API absent, 403, ...); None when observed.
    unobservable: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class InventorySample(Sample):
    """Counts of the cluster's CRDs by state and owner, and install rates."""

    probe = "inventory"

    crds: int = 0
    established: int = 0
    #: Established, NamesAccepted, Terminating, Pending (= names not yet accepted).
    by_state: dict[str, int] = dataclasses.field(default_factory=dict)
    by_owner: dict[str, int] = dataclasses.field(default_factory=dict)
    per_minute: float = 0.0
    window_seconds: float = WINDOW_SECONDS
    installing: dict[str, OwnerInstall] = dataclasses.field(default_factory=dict)
    crdscope_owned: int = 0
    mrds: MRDCounts = dataclasses.field(default_factory=MRDCounts)
    #: False while the shared watch is reconnecting (the counts are then the last known).
    watch_connected: bool = False


# --------------------------------------------------------------------------- pure bookkeeping


def _rate(stamps: Iterable[float | None], now: float, window: float) -> float:
    count = sum(1 for stamp in stamps if stamp is not None and now - window <= stamp <= now + 1.0)
    return count * 60.0 / window


def owner_install(records: list[CRDRecord], now: float, window: float = WINDOW_SECONDS,
                  expected: int | None = None) -> OwnerInstall | None:
    """The install progress of one owner's CRDs, or None when it is not installing."""
    live = [r for r in records if not r.terminating]
    backlog = sum(1 for r in live if r.established is None)
    per_minute = _rate((r.created for r in records), now, window)
    if backlog == 0 and per_minute == 0 and not (expected and expected > len(live)):
        return None
    established = sum(1 for r in live if r.established is not None)
    established_rate = _rate((r.established for r in live), now, window)
    eta = None
    basis: EtaBasis = ""
    note = ""
    if expected is not None and expected > established:
        rate = established_rate or per_minute
        if rate > 0:
            eta, basis = (expected - established) / rate * 60.0, "expected"
        else:
            note = f"no CRD created or Established in the last {window:.0f}s"
    elif backlog:
        if established_rate > 0:
            eta, basis = backlog / established_rate * 60.0, "backlog"
        else:
            note = f"{backlog} not Established and none Established in the last {window:.0f}s"
    else:
        note = "every CRD so far is Established; how many more will come is unknown"
    return OwnerInstall(crds=len(live), established=established, backlog=backlog, per_minute=per_minute,
                        established_per_minute=established_rate, expected=expected,
                        eta_seconds=eta, eta_basis=basis, eta_note=note)


def summarize(records: Iterable[CRDRecord], now: float | None = None, *, window: float = WINDOW_SECONDS,
              expected: dict[str, int] | None = None) -> InventorySample:
    """An inventory sample (without MRDs) from CRD records at time ``now``."""
    now = time.time() if now is None else now
    records = list(records)
    by_state = {"Established": 0, "NamesAccepted": 0, "Terminating": 0, "Pending": 0}
    by_owner: dict[str, list[CRDRecord]] = {}
    for record in records:
        by_state[record.state] += 1
        by_owner.setdefault(record.owner, []).append(record)
    installing = {}
    for owner, owned in sorted(by_owner.items()):
        progress = owner_install(owned, now, window, (expected or {}).get(owner))
        if progress is not None:
            installing[owner] = progress
    return InventorySample(
        timestamp=now,
        crds=len(records),
        established=sum(1 for r in records if r.established is not None),
        by_state=by_state,
        by_owner={owner: len(owned) for owner, owned in sorted(by_owner.items(), key=lambda kv: (-len(kv[1]), kv[0]))},
        per_minute=_rate((r.created for r in records), now, window),
        window_seconds=window,
        installing=installing,
        crdscope_owned=sum(1 for r in records if r.managed_by_crdscope),
    )


# --------------------------------------------------------------------------- Crossplane reads


def _served_version(record: CRDRecord) -> str:
    """Any served version will do for reading: the storage one when served."""
    if record.storage_version in record.served_versions:
        return record.storage_version
    return record.served_versions[0] if record.served_versions else ""


async def read_mrds(cluster: Cluster, crds: dict[str, CRDRecord]) -> MRDCounts:
    """ManagedResourceDefinitions by state, as a Table (paginated); absent API -> not present."""
    record = crds.get(MRD_CRD)
    if record is None or record.established is None:
        return MRDCounts(unobservable="no ManagedResourceDefinition API (Crossplane v2) on this cluster")
    version = _served_version(record)
    path = f"/apis/{record.group}/{version}/{record.plural}"
    counts = {"Active": 0, "Inactive": 0}
    total = 0
    token = None
    try:
        while True:
            params: dict[str, str | int] = {"limit": TABLE_PAGE, "includeObject": "None"}
            if token:
                params["continue"] = token
            response = await cluster.client.get(path, params=params, headers={"Accept": TABLE_ACCEPT})
            if response.status_code != 200:
                return MRDCounts(present=True, version=version,
                                 unobservable=f"list {record.plural} answered {response.status_code}: "
                                              f"{status_message(response)}")
            table = response.json()
            columns = [str(c.get("name", "")).upper() for c in table.get("columnDefinitions") or []]
            state_column = columns.index("STATE") if "STATE" in columns else None
            for row in table.get("rows") or []:
                total += 1
                cells = row.get("cells") or []
                if state_column is not None and state_column < len(cells) and cells[state_column] in counts:
                    counts[cells[state_column]] += 1
            token = (table.get("metadata") or {}).get("continue") or None
            if not token:
                break
    except TRANSPORT_ERRORS as exc:
        return MRDCounts(present=True, version=version, unobservable=explain(exc, cluster.server))
    except ValueError:
        return MRDCounts(present=True, version=version, unobservable=f"list {record.plural}: not a Table answer")
    return MRDCounts(present=True, version=version, total=total, active=counts["Active"],
                     inactive=counts["Inactive"])


#: A ProviderRevision that cannot be read (gone, or not JSON): no expected count for its owner.
_UNREADABLE_REVISION: tuple[type[Exception], ...] = (*TRANSPORT_ERRORS, ValueError)


async def read_expected(cluster: Cluster, crds: dict[str, CRDRecord], owners: Iterable[str]) -> dict[str, int]:
    """CRDs each ``ProviderRevision/<name>`` owner lists in ``status.objectRefs`` (when it lists any)."""
    record = crds.get(PROVIDER_REVISION_CRD)
    revisions = [o for o in owners if o.startswith("ProviderRevision/")]
    if record is None or not revisions:
        return {}
    base = f"/apis/{record.group}/{_served_version(record)}/{record.plural}"
    expected: dict[str, int] = {}
    for owner in revisions:
        try:
            response = await cluster.client.get(f"{base}/{owner.partition('/')[2]}")
            if response.status_code != 200:
                continue  # a revision we cannot read: no expected count, the backlog ETA remains
            refs = (response.json().get("status") or {}).get("objectRefs") or []
        except _UNREADABLE_REVISION:
            continue
        count = sum(1 for ref in refs if ref.get("kind") == "CustomResourceDefinition")
        if count:
            expected[owner] = count
    return expected


# --------------------------------------------------------------------------- one-shot and probe


def _installing_owners(records: Iterable[CRDRecord], now: float) -> set[str]:
    return {r.owner for r in records if (r.established is None and not r.terminating)
            or now - WINDOW_SECONDS <= r.created}


async def once(cluster: Cluster, **_options: object) -> InventorySample:
    """List CRDs once (a CRDWatch's list, no watch) and summarize them."""
    watch = CRDWatch(cluster)
    error = await watch.sync_once()
    if error:
        return InventorySample(error=error)
    now = time.time()
    records = list(watch.crds.values())
    expected, mrds = await asyncio.gather(read_expected(cluster, watch.crds, _installing_owners(records, now)),
                                          read_mrds(cluster, watch.crds))
    sample = summarize(records, now, expected=expected)
    return dataclasses.replace(sample, mrds=mrds, watch_connected=False)


class InventoryProbe:
    """Reads the monitor's shared CRD watch; re-reads Crossplane objects at most every 15 s."""

    name = "inventory"

    def __init__(self, monitor: Monitor) -> None:
        self.monitor = monitor
        self.cadence = monitor.settings.cadences.inventory
        self._mrds = MRDCounts()
        self._expected: dict[str, int] = {}
        self._crossplane_read_at = 0.0
        self._crossplane_events = -1

    async def run(self) -> InventorySample:
        watch: CRDWatch = self.monitor.crds
        not_synced = await watch.wait_synced(max(1.0, self.cadence))
        if not_synced:
            return InventorySample(error=not_synced)
        now = time.time()
        records = list(watch.crds.values())
        await self._refresh_crossplane(watch, records, now)
        sample = summarize(records, now, expected=self._expected)
        return dataclasses.replace(sample, mrds=self._mrds, watch_connected=watch.status.connected)

    async def _refresh_crossplane(self, watch: CRDWatch, records: list[CRDRecord], now: float) -> None:
        # After a CRD change (activating an MRD creates a CRD) but not more often than the refresh
        # period; without a change, still every few periods (an MRD's state may change alone).
        age = now - self._crossplane_read_at
        changed = watch.status.events != self._crossplane_events
        if age < CROSSPLANE_REFRESH_SECONDS or (not changed and age < 4 * CROSSPLANE_REFRESH_SECONDS):
            return
        self._crossplane_events = watch.status.events
        self._crossplane_read_at = now
        cluster = self.monitor.cluster
        self._expected, self._mrds = await asyncio.gather(
            read_expected(cluster, watch.crds, _installing_owners(records, now)),
            read_mrds(cluster, watch.crds))


def make_probe(monitor: Monitor) -> InventoryProbe:
    """The inventory probe on the monitor's shared CRD watch."""
    return InventoryProbe(monitor)
