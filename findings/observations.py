"""What the checks read: the latest sample of each probe, a short history, the thresholds."""

from __future__ import annotations

import dataclasses
from collections import deque
from typing import Any

from crdscope.base.samples import Sample
from crdscope.base.settings import Thresholds

#: Health samples kept for growth figures (about 15 minutes at the default 10 s cadence).
HEALTH_HISTORY = 90


@dataclasses.dataclass
class Observations:
    """The samples the engine has seen, by probe: the latest one and the latest good one."""

    thresholds: Thresholds = dataclasses.field(default_factory=Thresholds)
    #: probe name -> its latest sample (typed Any: each check knows which sample class it reads).
    latest: dict[str, Any] = dataclasses.field(default_factory=dict)
    last_good: dict[str, Any] = dataclasses.field(default_factory=dict)
    health_history: deque[Any] = dataclasses.field(default_factory=lambda: deque(maxlen=HEALTH_HISTORY))
    #: Extra knowledge set by the caller: the local kubectl (findings.kubectl.KubectlClient),
    #: a memory limit in bytes, a cost model... (None: not known).
    kubectl: Any = None
    #: That kubectl's cold discovery timed for real (findings.kubectl.KubectlMeasurement; doctor sets it).
    kubectl_measured: Any = None
    memory_limit_bytes: int | None = None
    now: float = 0.0

    def add(self, sample: Sample) -> None:
        """Remember a sample as its probe's latest (and latest good)."""
        probe = type(sample).probe
        self.latest[probe] = sample
        if sample.error is None:
            self.last_good[probe] = sample
            if probe == "health":
                self.health_history.append(sample)
        self.now = max(self.now, sample.timestamp)

    def good(self, probe: str) -> Any:
        """The latest good sample of ``probe``: a failed one has default figures, not observations,
        so a finding stands until a good sample says otherwise."""
        return self.last_good.get(probe)


def fmt_seconds(value: float | None) -> str:
    """``0.42 s``, ``19.1 s``; a dash for None."""
    if value is None:
        return "-"
    return f"{value:.2f} s" if value < 10 else f"{value:.1f} s"


#: The minor the cost model assumes when the server's version is unknown (the newest calibrated).
DEFAULT_MINOR = "1.37"


def kubernetes_minor(obs: Observations) -> str:
    """The server's ``major.minor`` from the latest good version sample, else :data:`DEFAULT_MINOR`."""
    from crdscope.probes.version import VersionSample

    version = obs.good("version")
    if isinstance(version, VersionSample) and version.major and version.minor:
        return f"{version.major}.{version.minor.rstrip('+')}"
    return DEFAULT_MINOR


def fmt_count(value: float | int | None) -> str:
    """``1,950``; a dash for None."""
    return "-" if value is None else f"{value:,.0f}"
