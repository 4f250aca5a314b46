"""What a probe is, and what a probe's factory is built from: the contract between the monitor and
its probes, below both (the registry, the scheduler and every probe module import it; it imports
none of them).

Every member the scheduler and the monitor use is declared on :class:`Probe`; :class:`ProbeBase`
gives each optional one its default (the habit of harlequin's adapter: optional behaviour declared
on the base), so a probe writes only what it has to say:

* ``name`` and ``pacing`` (class attributes: its cadences and request budget, :class:`Pacing`);
* ``async def run() -> Sample``;
* optionally ``deadline`` (seconds a run may take), ``busy`` (a property: True keeps it on its busy
  cadence while all is quiet), ``dating`` (a property: True runs it on its pacing's ``outage``
  cadence, while it dates an outage to the second) and ``async def aclose()`` (what it holds beyond
  the shared client).

The scheduler sets ``cadence`` (the wait before the next run) from the pacing before each wait;
``config.toml``'s ``[cadences]`` and ``[budgets]`` override a declared pacing
(:func:`paced`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from crdscope.base.samples import Sample

if TYPE_CHECKING:
    from crdscope.base.facts import ClusterFacts
    from crdscope.base.settings import Cadences, RequestBudgets, Settings
    from crdscope.connection.cluster import Cluster
    from crdscope.connection.crdwatch import CRDWatch
    from crdscope.connection.metrics import MetricsSource

    from .shared import SharedState

#: A probe run that has not finished after this long ends as an error sample.  httpx's timeouts
#: bound each read, not a whole answer: a server trickling a byte a second would hold a probe
#: (and, through it, the panel's freshness) forever.  A probe may declare its own ``deadline``.
DEFAULT_DEADLINE_SECONDS = 120.0


@dataclasses.dataclass(frozen=True)
class Pacing:
    """How often a probe runs and what it may cost the server, as the probe declares it.

    ``busy``: seconds from the end of one run to the start of the next while CRDs change (and
    always, without ``idle``); ``idle``: the cadence once no CRD changed for ``cadences.settle``
    seconds (a CRD change brings ``busy`` back at once); ``budget``: requests per minute, averaged
    over five minutes, that the footprint probe holds it to (None: it sends no request of its own);
    ``outage``: the cadence while the probe is ``dating`` (the server away: each run then costs the
    server at most a cheap check, which the probe paces itself; None: no such cadence).
    """

    busy: float
    idle: float | None = None
    budget: float | None = None
    outage: float | None = None

    def cadence(self, quiet: bool, dating: bool = False) -> float:
        """The wait before the next run: the outage cadence while dating, the idle one while all is
        quiet, else the busy one."""
        if dating and self.outage is not None:
            return self.outage
        return max(self.busy, self.idle) if quiet and self.idle is not None else self.busy


class Probe(Protocol):
    """What the scheduler runs and the monitor closes (every member; :class:`ProbeBase` has the defaults)."""

    name: str
    #: The declared cadences and budget (config.toml may override them: :func:`paced`).
    pacing: Pacing
    #: Seconds from the end of one run to the start of the next, set by the scheduler from the pacing.
    cadence: float
    #: Seconds a run may take before it ends as an error sample.
    deadline: float

    @property
    def busy(self) -> bool:
        """True while the probe has work pending (it stays on its busy cadence while all is quiet)."""

    @property
    def dating(self) -> bool:
        """True while the probe dates an outage (it runs on its pacing's ``outage`` cadence)."""

    async def run(self) -> Sample:
        """Observe once and return a sample; expected failures return a sample with ``error``."""

    async def aclose(self) -> None:
        """Close what the probe holds beyond the shared client (a connection, a task)."""


class ProbeBase:
    """The defaults of :class:`Probe`: derive from it and declare ``name`` and ``pacing``.

    ``cadence`` starts at the declared busy cadence (one-shot forms run without a scheduler).
    """

    name: str
    pacing: Pacing
    deadline: float = DEFAULT_DEADLINE_SECONDS
    _cadence: float | None = None

    @property
    def cadence(self) -> float:
        return self._cadence if self._cadence is not None else self.pacing.busy

    @cadence.setter
    def cadence(self, seconds: float) -> None:
        self._cadence = seconds

    @property
    def busy(self) -> bool:
        return False

    @property
    def dating(self) -> bool:
        return False

    async def run(self) -> Sample:
        raise NotImplementedError

    async def aclose(self) -> None:
        return None


class ProbeParts(Protocol):
    """What a probe's ``make_probe(parts)`` reads: one monitor's cluster, settings, shared sources
    and the session's facts (:class:`probes.monitor.Monitor` is one)."""

    cluster: Cluster
    settings: Settings
    metrics: MetricsSource
    crds: CRDWatch
    #: What probes hand each other (the discovery view, the CRDs in use, the guard's holds).
    shared: SharedState
    #: What the session knows beyond the samples (memory limit, the lab's hooks, viewers, the
    #: loader's limiter, the guard's verdict): read, never written, by probes.
    facts: ClusterFacts
    #: Probe name -> its latest sample (where the samples are kept; a monitor keeps none).
    latest: Mapping[str, Sample]

    def quiet(self) -> bool:
        """True once nothing changed for a while (probes with an idle cadence slow down)."""

    def pacing(self, name: str) -> Pacing | None:
        """Probe ``name``'s pacing as the monitor runs it (its declaration, config.toml's overrides)."""

    def budget_of(self, part: str) -> float | None:
        """Requests per minute allowed to one part of the monitor (a probe, ``metrics``,
        ``crd-watch``); None: not budgeted."""


def paced(name: str, declared: Pacing, cadences: Cadences, budgets: RequestBudgets | None = None) -> Pacing:
    """``declared`` with what ``config.toml`` sets for probe ``name``: ``[cadences] <name>`` and
    ``<name>_idle``, ``[budgets] <name>`` (the keys of :class:`base.settings.Cadences` and
    :class:`base.settings.RequestBudgets`; an unset key leaves the declaration)."""
    set_cadences = cadences.overrides()
    set_budgets = budgets.overrides() if budgets is not None else {}
    idle = set_cadences.get(f"{name}_idle", declared.idle) if declared.idle is not None else None
    return Pacing(busy=set_cadences.get(name, declared.busy), idle=idle,
                  budget=set_budgets.get(name, declared.budget), outage=declared.outage)
