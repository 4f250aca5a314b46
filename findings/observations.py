"""What the checks read: a view over the sample store (typed reads), the thresholds, and what the caller knows.

The samples live in the one :class:`~crdscope.base.store.SampleStore` a front end shares with
the findings engine (or one of the engine's own); checks read them by class, as in
``obs.good(HealthSample)``, so a type checker sees every field a check reads.
"""

from __future__ import annotations

import dataclasses

from crdscope.base.facts import ClusterFacts
from crdscope.base.samples import Sample
from crdscope.base.settings import Thresholds
from crdscope.base.store import SampleStore, SampleT
from crdscope.base.samples.health import HealthSample
from crdscope.base.samples.version import VersionSample

from .kubectl import KubectlClient, KubectlMeasurement

#: Good health samples the growth and crash-loop figures look back over (about 15 minutes at the
#: default 10 s cadence).
HEALTH_HISTORY = 90


@dataclasses.dataclass
class Observations:
    """The samples the engine judges (a view over ``store``), the thresholds, and extra knowledge."""

    thresholds: Thresholds = dataclasses.field(default_factory=Thresholds)
    #: Where the samples are kept: the front end's own store when it shares one, else a new one.
    store: SampleStore = dataclasses.field(default_factory=SampleStore)
    #: Extra knowledge set by the caller: the local kubectl (None: not known) ...
    kubectl: KubectlClient | None = None
    #: ... that kubectl's cold discovery timed for real (``doctor`` sets it) ...
    kubectl_measured: KubectlMeasurement | None = None
    #: ... and what the session knows beyond the samples (its core's): the memory limit, by one
    #: precedence, among them.
    facts: ClusterFacts = dataclasses.field(default_factory=ClusterFacts)
    #: The time the checks judge at (the newest sample's, or what :meth:`FindingsEngine.evaluate` is given).
    now: float = 0.0

    def add(self, sample: Sample) -> None:
        """Keep a sample in the store and move :attr:`now` up to its time."""
        self.store.add(sample)
        self.now = max(self.now, sample.timestamp)

    def latest(self, kind: type[SampleT]) -> SampleT | None:
        """The newest sample of ``kind``'s probe, good or failed."""
        return self.store.latest_of(kind)

    def good(self, kind: type[SampleT]) -> SampleT | None:
        """The latest good sample of ``kind``'s probe: a failed one has default figures, not
        observations, so a finding stands until a good sample says otherwise."""
        return self.store.good(kind)

    def newest_health_with(self, figure: str) -> HealthSample | None:
        """The newest good health sample that has ``figure`` (else the newest good one).

        A good sample can lack a figure (a fresh process answers /readyz before it serves /metrics):
        that does not say the figure changed, so a finding judged on it stands until one that has it.
        """
        for sample in reversed(self.store.good_history_of(HealthSample)):
            if getattr(sample, figure) is not None:
                return sample
        return self.good(HealthSample)

    def health_history(self) -> list[HealthSample]:
        """The last :data:`HEALTH_HISTORY` good health samples, oldest first."""
        return self.store.good_history_of(HealthSample)[-HEALTH_HISTORY:]


def fmt_seconds(value: float | None) -> str:
    """``0.42 s``, ``19.1 s``; a dash for None."""
    if value is None:
        return "-"
    return f"{value:.2f} s" if value < 10 else f"{value:.1f} s"


#: The minor the cost model assumes when the server's version is unknown (the newest calibrated).
DEFAULT_MINOR = "1.37"


def kubernetes_minor(obs: Observations) -> str:
    """The server's ``major.minor`` from the latest good version sample, else :data:`DEFAULT_MINOR`."""
    version = obs.good(VersionSample)
    if version is not None and version.major and version.minor:
        return f"{version.major}.{version.minor.rstrip('+')}"
    return DEFAULT_MINOR


def fmt_count(value: float | int | None) -> str:
    """``1,950``; a dash for None."""
    return "-" if value is None else f"{value:,.0f}"
