"""Several recordings replayed on one clock, each into its own core: a fleet's replay in step.

One :class:`session.replay.ReplayFeed` plays the samples of every recording merged in the order they
were taken; each sample goes to the core of the recording it came from, through that recording's
:class:`ReplayPort` (the core's source of samples).  Whatever the speed, the clusters' samples
arrive in the order they were taken, pausing or changing speed acts on all of them, and a note a
narrator recorded (:mod:`session.notes`) is told between the two samples it was said between (before
the first sample taken after it), so a narrated session replays its lines where they were said.
``crdscope demo --replay`` plays the fleet demo so (:mod:`tui.fleet_replay`).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence

from crdscope.base.facts import ClusterFacts, limit_at
from crdscope.base.samples import Sample, Sink, deliver
from crdscope.base.settings import Thresholds

from .core import SessionStore, WatchCore
from .notes import Note
from .recorder import ClusterInfo
from .replay import Recording, ReplayFeed


class ReplayPort:
    """One recording's share of a :class:`FleetReplay`: the source of samples of its core."""

    def __init__(self, fleet: FleetReplay, recording: Recording) -> None:
        self.fleet = fleet
        self.recording = recording
        self.sinks: list[Sink] = []

    def add_sink(self, sink: Sink) -> None:
        self.sinks.append(sink)

    async def run(self) -> None:
        """Play the fleet (the first port run plays it; the others wait for its end)."""
        await self.fleet.play()

    def pause(self) -> None:
        self.fleet.feed.pause()

    def resume(self) -> None:
        self.fleet.feed.resume()

    @property
    def paused(self) -> bool:
        return self.fleet.feed.paused

    def now(self) -> float:
        """The fleet's replay clock: every port tells the same time."""
        return self.fleet.feed.now()

    @property
    def context(self) -> str:
        return self.recording.cluster.context

    @property
    def server(self) -> str:
        return self.recording.cluster.server


class FleetReplay:
    """``recordings`` on one clock at ``speed`` (as :class:`ReplayFeed` takes it: 1 real time, 0 as
    fast as the cores take them); ``note_listeners`` hear each recorded note in its place."""

    def __init__(self, recordings: Sequence[Recording], *, speed: float = 1.0) -> None:
        if not recordings:
            raise ValueError("a fleet replay needs at least one recording")
        self.ports = [ReplayPort(self, recording) for recording in recordings]
        merged = sorted(((sample.timestamp, index, sample) for index, recording in enumerate(recordings)
                         for sample in recording.samples), key=lambda item: (item[0], item[1]))
        self._owners = [self.ports[index] for _, index, _ in merged]
        first = recordings[0]
        together = Recording(path=first.path, header=first.header, cluster=ClusterInfo(server="", context="fleet"),
                             samples=[sample for _, _, sample in merged], events=[], damage=None,
                             ended=all(r.ended for r in recordings), parts=[p for r in recordings for p in r.parts])
        self.feed = ReplayFeed(together, speed=speed)
        self.feed.add_sink(self._route)
        self.notes = sorted((note for r in recordings for note in r.notes), key=lambda note: note.timestamp)
        self.note_listeners: list[Callable[[Note], None]] = []
        #: Listeners called once every sample and note was told.
        self.end_listeners: list[Callable[[], None]] = []
        self._told = 0
        self._playing: asyncio.Future[None] | None = None

    def cores(self, thresholds: Thresholds | None = None) -> list[WatchCore]:
        """One core per recording (in the order given), named after its context, each judging its samples
        by the memory limit its recording carried at their time (as ``session.replay.replay_core``)."""
        cores = []
        for port in self.ports:
            facts = ClusterFacts()
            if port.recording.limits:  # before the core's own sink: each sample judged by the limit of its time
                port.add_sink(_limit_follower(port.recording, facts))
            cores.append(WatchCore(port, store=SessionStore(), thresholds=thresholds, cluster=port.context,
                                   facts=facts))
        return cores

    async def play(self) -> None:
        """Play every recording to its end (once: a second caller waits for the same end; cancelling a
        caller, as an app does when it quits, stops the play)."""
        if self._playing is None:
            self._playing = asyncio.ensure_future(self._play())
        await self._playing

    async def _play(self) -> None:
        await self.feed.run()
        self._tell_notes(until=math.inf)
        for listener in list(self.end_listeners):
            listener()

    async def _route(self, sample: Sample) -> None:
        self._tell_notes(until=sample.timestamp)
        await deliver(self._owners[self.feed.position - 1].sinks, sample)

    def _tell_notes(self, until: float) -> None:
        """Every note said before ``until`` (a sample's time) not told yet, in order."""
        while self._told < len(self.notes) and self.notes[self._told].timestamp < until:
            note = self.notes[self._told]
            self._told += 1
            for listener in list(self.note_listeners):
                listener(note)


def _limit_follower(recording: Recording, facts: ClusterFacts) -> Callable[[Sample], None]:
    """A sink giving ``facts`` the memory limit ``recording`` carried at each sample's time."""

    def follow(sample: Sample) -> None:
        facts.give_limit(limit_at(recording.limits, sample.timestamp))

    return follow
