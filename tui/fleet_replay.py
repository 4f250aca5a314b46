"""``crdscope demo --replay``: the fleet demo told again from its recordings, with no lab, no build and no Go.

``crdscope demo`` records each lab (by default) and writes every line it says into the capped lab's
recording as a note (:mod:`session.notes`); the first note names the cast (each lab's name, context,
minor and cap).  The replay plays both recordings on one clock (:class:`session.fleet_replay.FleetReplay`)
into the compare screen, says the story's recorded lines where they were said (the install's stages,
its end), and reads the rest from the replayed samples with the live demo's own narrator
(:class:`tui.demo_story.Narrator`: memory near the cap, the OOM kill, the findings), so every figure
it states is the one its screen shows.

The demo the project ships goes in ``tui/data/fleet-demo/`` (both labs' recordings, ``*.jsonl.xz``:
``synthetic:800`` through Crossplane into a capped 1.26 lab and a 1.37 lab), packaged in the wheel:
``crdscope demo --replay [--speed N]`` plays it from any install, offline, in seconds.  None is there
yet (it is to be recorded with the lab's Crossplane v2.4.2 and the cap sized for it: bench/results/
demo-cap-20261207/README.md); until then ``--replay`` says so in one line and ``--recording`` plays one's own.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crdscope.base.errors import ConfigError
from crdscope.base.samples.health import HealthSample
from crdscope.session.core import Taken
from crdscope.session.notes import Note, NoteKind

from .app import CrdscopeApp
from .demo_story import DemoLab, Narrator

if TYPE_CHECKING:
    from crdscope.base.settings import Settings
    from crdscope.session.fleet_replay import FleetReplay
    from crdscope.session.replay import Recording

log = logging.getLogger("crdscope.tui.demo")

#: The demo the project ships (two recordings and how they were made).
SHIPPED_DIR = Path(__file__).with_name("data") / "fleet-demo"
#: A demo of about 15 minutes told in about half a minute.
DEFAULT_SPEED = 30.0
#: Seconds a line stays on screen in a replay (it goes faster than the live demo's half minute).
NOTE_SECONDS = 10.0
END_SECONDS = 600.0


@dataclass
class DemoRecording:
    """A recorded demo: its recordings in the story's order (the capped lab first) and its labs."""

    recordings: list[Recording]
    labs: list[DemoLab]


def shipped_recordings() -> list[Path]:
    """The recordings of the demo the project ships."""
    return sorted(SHIPPED_DIR.glob("*.jsonl.xz"))


def read_demo(paths: Sequence[str | Path]) -> DemoRecording:
    """The recordings of one ``crdscope demo`` (its labs as its first note names them), or a one-line
    :class:`ConfigError`: a file that is no recording, a recording of no demo, a lab without its recording."""
    from crdscope.session.replay import read_recording

    if not paths:
        raise ConfigError(f"no recording of the demo in {SHIPPED_DIR} (this crdscope was installed without it)")
    recordings = [read_recording(path) for path in paths]
    for recording in recordings:
        if recording.damage is not None:
            log.warning("%s", recording.damage.message())
    cast = next((note.cast for r in recordings for note in r.notes if note.cast), ())
    if not cast:
        raise ConfigError(f"{', '.join(str(p) for p in paths)}: no recording of `crdscope demo` "
                          "(no narration in it): `crdscope replay FILE` plays any recording")
    by_context = {r.cluster.context: r for r in recordings}
    missing = [member.name for member in cast if member.context not in by_context]
    if missing:
        raise ConfigError(f"the demo's {' and '.join(missing)} has no recording among "
                          f"{', '.join(str(p) for p in paths)}: give every lab's recording")
    return DemoRecording([by_context[m.context] for m in cast],
                         [DemoLab(m.name, m.kubernetes, m.memory_limit) for m in cast])


class FleetReplayApp(CrdscopeApp):
    """The compare screen on a recorded demo's labs, telling its story again (``narration`` keeps every
    line said, in order; ``replayed`` turns True once the recordings were played to their end)."""

    def __init__(self, *args: Any, fleet: FleetReplay, labs: list[DemoLab], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.replay = fleet
        self.narration: list[str] = []
        self.replayed = False
        self.narrator = Narrator(list(zip(labs, self.sessions, strict=True)), self._tell)
        fleet.note_listeners.append(self._note)
        fleet.end_listeners.append(self._played)

    @property
    def ended(self) -> bool:
        """True once the story's end was told."""
        return self.narrator.ended

    def on_mount(self) -> None:  # after the app's own (Textual calls each class's handler)
        for session in self.sessions:  # as live: the story follows each health sample taken
            session.core.add_listener(self._taken)

    def _taken(self, taken: Taken) -> None:
        if isinstance(taken.sample, HealthSample):
            self.narrator.follow()

    def say(self, line: str, severity: str = "information") -> None:
        """One line of the story, on screen."""
        self.narration.append(line)
        timeout = END_SECONDS if self.ended else NOTE_SECONDS
        self.notify(line, title="demo (replay)", severity=severity, timeout=timeout)  # type: ignore[arg-type]

    def _tell(self, line: str, severity: str, kind: NoteKind) -> None:
        self.say(line, severity)

    def _note(self, note: Note) -> None:
        """A recorded line in its place: the story's said again, its end told with the replayed findings;
        a line of figures is read again from the replayed samples (the narrator's), a live-only one dropped."""
        if note.kind == "story":
            self.say(note.line, note.severity)
        elif note.kind == "end":
            self.narrator.end(note.line)

    def _played(self) -> None:
        self.replayed = True
        self.say("the recording ends here: q quits (a replay: no lab was started, nothing was built)")


def build_fleet_replay_app(paths: Sequence[str | Path] | None = None, *, speed: float = DEFAULT_SPEED,
                           theme: str | None = None, layout: str | None = None,
                           settings: Settings | None = None) -> FleetReplayApp:
    """The replay of a recorded demo (default: the shipped one), opening on the compare screen (tests
    drive it with ``run_test``)."""
    from crdscope.base.settings import load_settings
    from crdscope.session.fleet_replay import FleetReplay

    from .app import check_theme
    from .replay_bar import speed_label
    from .sessions import ClusterSession

    demo = read_demo(list(paths) if paths is not None else shipped_recordings())
    settings = settings or load_settings()
    fleet = FleetReplay(demo.recordings, speed=speed)
    sessions = [ClusterSession(core, cadences=settings.cadences) for core in fleet.cores(settings.thresholds)]
    return FleetReplayApp(settings=settings, theme=check_theme(theme or settings.ui.theme), layout=layout,
                          sessions=sessions, compare=True, kubectl=None,
                          mode_label=f"REPLAY {speed_label(fleet.feed.speed)}", fleet=fleet, labs=demo.labs)


def open_fleet_replay(paths: Sequence[str | Path] | None = None, *, speed: float = DEFAULT_SPEED,
                      theme: str | None = None) -> None:
    """``crdscope demo --replay``: the recorded demo told again until quit."""
    import click

    from crdscope.base.logs import NOT_WRITABLE, log_to_file

    where = log_to_file() or NOT_WRITABLE
    app = build_fleet_replay_app(paths, speed=speed, theme=theme)
    app.run()
    if app.return_code:
        click.echo(f"crdscope: the replay stopped on an error (details in {where})", err=True)
