"""The CRD inventory: how many CRDs, in which state, installed by whom, how fast.

Everything comes from the shared :class:`~connection.crdwatch.CRDWatch` (one list +
watch, never per-CRD requests), plus, where Crossplane is installed, its install
chain (:mod:`base.crossplane`, read by :mod:`connection.crossplane_read` on its own
cadence): Providers, their revisions, ManagedResourceDefinitions by
``spec.state`` and ManagedResourceActivationPolicies.

Definitions (what the panel and ``--json`` mean):

- ``per_minute``: CRDs whose ``creationTimestamp`` falls in the last
  ``window_seconds`` (60 s, sliding), scaled to a minute.  CRDs deleted since
  are not counted; creation timestamps have one-second resolution.
- An owner is who installed a CRD: its controller ownerReference (else its first
  one), Crossplane's package labels, crdscope's label, or "other".  A Crossplane
  CRD's controller is a ProviderRevision: it is counted under the revision's
  Provider (``Provider/<name>``) once the chain is read, and under
  ``ProviderRevision/<name>`` where no Provider claims the revision or the
  revisions cannot be read.
- An owner is *still installing* when it has a CRD created in the window or a
  CRD not yet Established (and not Terminating).
- Its ETA: with an expected count (what the owner's active ProviderRevision
  lists in ``status.objectRefs``: its CRDs, and its MRDs that are Active), the
  CRDs still to reach Established divided by the owner's Established rate (its
  creation rate while nothing was Established yet); without one, only the
  current backlog (created, not yet Established) can be timed, so the ETA is
  ``eta_basis="backlog"`` (more CRDs may follow).  No rate, no ETA: the reason
  is in ``eta_note``.
"""

from __future__ import annotations

from crdscope.base.samples.inventory import EtaBasis, InventorySample, MRDCounts, OwnerInstall, WINDOW_SECONDS

import asyncio
import dataclasses
import logging
from typing import TYPE_CHECKING
import time
from collections.abc import Iterable, Mapping

from crdscope.connection.cluster import Cluster
from crdscope.connection.crdwatch import CRDRecord, CRDWatch
from crdscope.base.crossplane import CrossplaneObjects, build_chain, expected_crds, owner_aliases
from crdscope.connection.crossplane_read import ChainReader, read_objects

from .probe import Pacing, ProbeBase

if TYPE_CHECKING:
    from .probe import ProbeParts

log = logging.getLogger("crdscope.inventory")


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
    elif expected is not None:
        note = f"all {expected} expected CRDs are Established"
    else:
        note = "every CRD so far is Established; how many more will come is unknown"
    return OwnerInstall(crds=len(live), established=established, backlog=backlog, per_minute=per_minute,
                        established_per_minute=established_rate, expected=expected,
                        eta_seconds=eta, eta_basis=basis, eta_note=note)


def summarize(records: Iterable[CRDRecord], now: float | None = None, *, window: float = WINDOW_SECONDS,
              expected: Mapping[str, int] | None = None,
              aliases: Mapping[str, str] | None = None) -> InventorySample:
    """An inventory sample (without Crossplane's chain) from CRD records at time ``now``.

    ``aliases`` maps owners as the CRD watch names them to the owner shown (a revision to its
    Provider); ``expected`` is keyed by the owner shown.
    """
    now = time.time() if now is None else now
    records = list(records)
    aliases = aliases or {}
    by_state = {"Established": 0, "NamesAccepted": 0, "Terminating": 0, "Pending": 0}
    by_owner: dict[str, list[CRDRecord]] = {}
    for record in records:
        by_state[record.state] += 1
        by_owner.setdefault(aliases.get(record.owner, record.owner), []).append(record)
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
        served_versions=sum(r.served for r in records),
        crd_schema_bytes=sum(r.schema_bytes for r in records),
    )


# --------------------------------------------------------------------------- Crossplane


def mrd_counts(objects: CrossplaneObjects) -> MRDCounts:
    """ManagedResourceDefinitions by ``spec.state`` from a chain read (or why they are missing)."""
    if objects.mrds is None:
        reason = objects.unobservable.get("mrds")
        if reason is None or not objects.mrds_version:
            return MRDCounts(unobservable="no ManagedResourceDefinition API (Crossplane v2) on this cluster")
        return MRDCounts(present=True, version=objects.mrds_version, unobservable=reason)
    states = [row.state for row in objects.mrds]
    return MRDCounts(present=True, version=objects.mrds_version, total=len(states),
                     active=states.count("Active"), inactive=states.count("Inactive"))


def with_crossplane(records: list[CRDRecord], now: float, objects: CrossplaneObjects,
                    in_use: frozenset[str] | None = None) -> InventorySample:
    """The inventory of ``records`` with Crossplane's chain joined in: CRDs counted under their
    Provider, ETAs against what the revisions list, and the chain itself."""
    aliases = owner_aliases(objects)
    sample = summarize(records, now, expected=expected_crds(objects), aliases=aliases)
    counts: dict[str, tuple[int, int]] = {}
    for record in records:
        if record.terminating:
            continue
        owner = aliases.get(record.owner, record.owner)
        live, established = counts.get(owner, (0, 0))
        counts[owner] = (live + 1, established + (record.established is not None))
    return dataclasses.replace(sample, mrds=mrd_counts(objects),
                               crossplane=build_chain(objects, counts, sample.installing, in_use))


# --------------------------------------------------------------------------- one-shot and probe


async def once(cluster: Cluster, **_options: object) -> InventorySample:
    """List CRDs once (a CRDWatch's list, no watch), read the Crossplane chain, and summarize."""
    watch = CRDWatch(cluster)
    error = await watch.sync_once()
    if error:
        return InventorySample(error=error)
    objects = await read_objects(cluster, watch.crds)
    return dataclasses.replace(with_crossplane(list(watch.crds.values()), time.time(), objects),
                               watch_connected=False)


class InventoryProbe(ProbeBase):
    """Reads the monitor's shared CRD watch every run; the Crossplane chain on its own cadence
    (``cadences.crossplane`` after a CRD change, ``crossplane_idle`` otherwise), in a task of its
    own: a slow chain read holds a run for at most one cadence, never the CRD counts for longer."""

    name = "inventory"
    #: No request of its own for the counts (the shared CRD watch); the Crossplane chain's reads
    #: (``cadences.crossplane``): 8/min during an install, 10 past 2,000 MRDs.
    pacing = Pacing(busy=2.0, budget=10.0)

    def __init__(self, monitor: ProbeParts) -> None:
        self.monitor = monitor
        cadences = monitor.settings.cadences
        self.chain = ChainReader(monitor.cluster, cadences.crossplane, cadences.crossplane_idle)
        self._reading: asyncio.Task[None] | None = None

    async def run(self) -> InventorySample:
        watch: CRDWatch = self.monitor.crds
        not_synced = await watch.wait_synced(max(1.0, self.cadence))
        if not_synced:
            return InventorySample(error=not_synced)
        now = time.time()
        if (self._reading is None or self._reading.done()) and self.chain.due(watch.crds, watch.status.events, now):
            # The task inherits this run's request origin (the footprint counts it as inventory's).
            self._reading = asyncio.create_task(self._read_chain(watch, now), name="crossplane-chain")
        if self._reading is not None and not self._reading.done():
            await asyncio.wait({self._reading}, timeout=max(0.5, self.cadence))
        records = list(watch.crds.values())
        sample = with_crossplane(records, time.time(), self.chain.objects, self.monitor.shared.crds_in_use)
        return dataclasses.replace(sample, watch_connected=watch.status.connected)

    async def _read_chain(self, watch: CRDWatch, now: float) -> None:
        try:
            await self.chain.refresh(watch.crds, watch.status.events, now)
        except Exception:  # a bug here must not stop the CRD counts: logged, the last read kept
            log.exception("reading Crossplane's install chain failed")

    async def aclose(self) -> None:
        """Stop a chain read in flight (the monitor closes its probes on its way out)."""
        if self._reading is not None:
            self._reading.cancel()
            await asyncio.gather(self._reading, return_exceptions=True)


def make_probe(parts: ProbeParts) -> InventoryProbe:
    """The inventory probe on the monitor's shared CRD watch."""
    return InventoryProbe(parts)
