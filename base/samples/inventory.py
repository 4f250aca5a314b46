"""The inventory probe's sample and the records it holds: what every front end reads of it (the probe
that makes it is ``probes/inventory.py``; readers import the sample from here, never the probe)."""

from __future__ import annotations

import dataclasses
from typing import Literal

from crdscope.base.samples import Sample, figure
from crdscope.base.crossplane import CrossplaneChain

#: Sliding window of the creation and Established rates.
WINDOW_SECONDS = 60.0


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
    short_name = "inv"

    crds: int = 0
    established: int = 0
    #: Established, NamesAccepted, Terminating, Pending (= names not yet accepted).
    by_state: dict[str, int] = dataclasses.field(default_factory=dict)
    by_owner: dict[str, int] = dataclasses.field(default_factory=dict)
    per_minute: float = 0.0
    window_seconds: float = WINDOW_SECONDS
    installing: dict[str, OwnerInstall] = figure(default_factory=dict, label="owner")
    crdscope_owned: int = 0
    #: Versions served, summed over every CRD (at least one each; None: not counted, a recording made
    #: before it was): the most etcd connections its custom resources can hold (one per served version
    #: of each kind in use), and with ``crds`` and ``crd_schema_bytes`` what the cost model prices the
    #: cluster's own CRDs by (the crash loop's memory limit).
    served_versions: int | None = None
    #: The bytes of every CRD's served schemas as the server sends them (0: not counted).
    crd_schema_bytes: int = 0
    mrds: MRDCounts = dataclasses.field(default_factory=MRDCounts)
    #: The Crossplane install chain (Providers, revisions, MRDs, CRDs, MRAPs), as last read.
    crossplane: CrossplaneChain = dataclasses.field(default_factory=CrossplaneChain)
    #: False while the shared watch is reconnecting (the counts are then the last known).
    watch_connected: bool = False
