"""The monitor's clusters: one :class:`ClusterSession` per watched cluster.

A session is what the single-cluster monitor always held (a session core and its source of samples,
the recording, the loader's control and the lab), one object per cluster so that one app can
watch a fleet.  It is also the typed view a widget has of its cluster: the monitor screen, its
header, its findings strip, the findings screen and every panel are built with one and read only
it (store, clock, thresholds, kubectl, loader, staleness), never the app.  A live session is a
:class:`session.live.LiveCore` (``session.live.open_live_core``); a replay's is the core a
recording feeds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from crdscope.base.settings import Cadences, Thresholds
from crdscope.base.store import ProbeHealth
from crdscope.findings.kubectl import KubectlClient
from crdscope.findings.model import Finding, FindingChange
from crdscope.probes.registry import pacing_of
from crdscope.session.core import SampleSource, SessionStore, WatchCore

if TYPE_CHECKING:
    from crdscope.lab.controlplane import Lab
    from crdscope.session.control import FaultTarget
    from crdscope.session.live import LiveCore, TakenRecorder

    from crdscope.session.loader_control import LoaderHandle

log = logging.getLogger("crdscope.tui")


class ClusterSession:
    """One watched cluster: its session core (and, live, the live core around it), loader control
    and lab; the typed view the header, panels and screens read of their cluster."""

    def __init__(self, core: WatchCore, *, live: LiveCore | None = None, loader: LoaderHandle | None = None,
                 lab: Lab | None = None, clock: Callable[[], float] | None = None,
                 cadences: Cadences | None = None, origin: Callable[[float], str] | None = None,
                 recording: TakenRecorder | None = None, faults: FaultTarget | None = None) -> None:
        if core.source is None:
            raise ValueError("a monitored cluster needs a source of samples")
        self.core = core
        #: Where the samples come from: the live monitor, or a recording's replay.
        self.feed: SampleSource = core.source
        #: The live core (monitor, recording, memory limit) when the cluster is watched live.
        self.live = live
        #: The loader's controller (session.loader_control.LoaderHandle), None in a replay.
        self.loader = loader
        #: A lab.controlplane.Lab when watching a lab: its faults go in the palette.
        self.lab = lab
        self._clock = clock
        #: The probes' cadences (a panel's figures are stale after three cadences without a sample).
        self.cadences = cadences or Cadences()
        self._stale_after: dict[str, float] = {}
        #: Where the samples come from when that is news (an attached viewer: the collector, the
        #: newest sample's age, a reconnection), told the time; the header shows it.
        self.origin = origin
        #: The recording of a cluster that is not live (an attached viewer's ``--record``).
        self._recording = recording
        self._faults = faults

    @property
    def faults(self) -> FaultTarget | None:
        """Where the palette's fault actions go: the lab, or a collector that allows control."""
        return self._faults if self._faults is not None else self.lab

    @property
    def recording(self) -> TakenRecorder | None:
        """Where this cluster is recorded (live: the live core's recording)."""
        return self.live.recording if self.live is not None else self._recording

    @property
    def name(self) -> str:
        """The cluster's name: its context (the ``cluster`` label of the fleet exporter)."""
        return self.core.cluster or self.feed.server

    @property
    def store(self) -> SessionStore:
        return self.core.store

    @property
    def memory_limit(self) -> int | None:
        """The API server's memory limit in bytes when known: the core's facts, by their one
        precedence (``--memory-limit``, else the lab's cap, else the one Prometheus shows)."""
        return self.core.facts.memory_limit_bytes

    @property
    def thresholds(self) -> Thresholds:
        """What the core's findings judge by; panels colour their figures by the same ones."""
        return self.core.thresholds

    @property
    def kubectl(self) -> KubectlClient | None:
        """The local kubectl the findings and the discovery panel judge by (None: not known yet)."""
        return self.core.kubectl

    def crd_counts(self) -> tuple[int, int] | None:
        """CRDs installed and owned by crdscope from the live CRD watch once it has listed (before the
        inventory probe reports); None in a replay or before the first list."""
        return self.live.monitor.crd_counts() if self.live is not None else None

    def stale_after(self, probe: str) -> float:
        """Seconds without a new sample of ``probe`` after which its figures are stale."""
        known = self._stale_after.get(probe)
        if known is None:
            pacing = pacing_of(probe, self.cadences)  # as declared, with config.toml's keys over it
            known = self._stale_after[probe] = 3 * pacing.busy + 5 if pacing is not None else 30.0  # the loader: 30 s
        return known

    def now(self) -> float:
        """The feed's clock: wall time live, recording time in a replay."""
        return self._clock() if self._clock is not None else self.feed.now()

    @property
    def probes_paused(self) -> bool:
        return self.feed.paused

    def probe_health(self) -> dict[str, ProbeHealth]:
        """Per-probe health, counted where the samples are kept (the core's store)."""
        return self.store.health()

    def current_findings(self) -> list[Finding]:
        """Open findings, most severe first."""
        return self.core.open_findings()

    async def run(self) -> None:
        """Run the cluster's source (live: with its memory-limit follower) until it ends or is cancelled."""
        if self.live is not None:
            await self.live.run()
        else:
            await self.core.run()

    def record(self, change: FindingChange) -> None:
        """Record a finding re-judged beyond a sample (the local kubectl learned)."""
        if self.recording is not None:
            self.recording.record(change)

    def close_recorder(self) -> str | None:
        """Close the recording; where it went (None: nothing recorded)."""
        if self.recording is None:
            return None
        return str(self.recording.close())
