"""Replay controls: the monitor on a recording, with play/pause, speed, step and seek.

:class:`ReplayApp` is the monitor app (:class:`tui.app.CrdscopeApp`) given a
:class:`session.replay.ReplayFeed` instead of the live monitor: every panel
behaves as it did live, because it receives the same samples.  It adds the
:class:`ReplayBar` (where the replay is, how fast, the keys) above the footer,
and the replay's keys and palette entries:

``space``/``p`` play/pause · ``+``/``-`` speed x2 / ÷2 · ``.`` one sample ·
``]``/``[`` one minute forward/back · ``g`` seek to a time (``HH:MM[:SS]``,
``+90s``, ``-5m``, ``50%``) · ``home``/``end``.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from .format import escape
from textual.screen import ModalScreen
from textual.widgets import Footer, Input, Static

from crdscope.base.errors import ConfigError

from .app import CrdscopeApp
from .host import PaletteCommand

if TYPE_CHECKING:
    from crdscope.base.settings import Settings
    from crdscope.session.replay import Recording, ReplayFeed

SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0)
SEEK_STEP_SECONDS = 60.0
#: The keys, as the bar shows them (markup-escaped: "[/]" would close a tag).
KEYS = escape("space play · +/- speed · . step · [/] ±1m · g seek")
SHORT_KEYS = escape("␣ play +- speed . step g seek")
#: Below this width the bar is compact (80 columns must show it all).
WIDE = 100


def speed_label(speed: float) -> str:
    return "max" if math.isinf(speed) else f"{speed:g}x"


class ReplayBar(Static):
    """One line: state, speed, replay time against the recording's span, and the keys."""

    DEFAULT_CSS = """
    ReplayBar {
        height: 1;
        padding: 0 1;
        background: $panel;
        color: $foreground;
    }
    """

    def __init__(self, feed: ReplayFeed) -> None:
        super().__init__("", id="replay-bar", markup=True)
        self.feed = feed

    def on_mount(self) -> None:
        self.set_interval(0.25, self.redraw)
        self.redraw()

    def redraw(self) -> None:
        self.update(self.markup())

    def markup(self) -> str:
        feed = self.feed
        start, end = feed.start, feed.end
        if start is None or end is None:
            return "[$probe-idle]empty recording[/]"
        if feed.at_end:
            state = "[$probe-idle]■ end[/]"
        elif feed.paused:
            state = "[$probe-warn b]⏸ paused[/]"
        else:
            state = "[$probe-ok b]▶ playing[/]"
        span = max(end - start, 1e-9)
        done = min(1.0, max(0.0, (feed.now() - start) / span))
        width = 20 if self.size.width >= WIDE else 10
        filled = int(round(done * width))
        bar = "█" * filled + "░" * (width - filled)
        now = time.strftime("%H:%M:%S", time.localtime(feed.now()))
        last = time.strftime("%H:%M:%S", time.localtime(end))
        damage = feed.recording.damage
        warning = f" [$probe-fail]damaged at line {damage.line}[/]" if damage is not None else ""
        keys = KEYS if self.size.width >= WIDE else SHORT_KEYS
        return (f"{state} {speed_label(feed.speed)} {now}/{last} {bar} {done * 100:3.0f}%{warning}  "
                f"[dim]{keys}[/]")


class SeekScreen(ModalScreen[str | None]):
    """Ask where to go; dismisses with the text typed (or None)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, hint: str) -> None:
        super().__init__(classes="dialog-screen")
        self.hint = hint

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static("Seek to", classes="dialog-title")
            yield Static(self.hint, classes="dialog-note", markup=False)
            yield Input(placeholder="HH:MM:SS, +90s, -5m or 50%", id="seek-input")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ReplayApp(CrdscopeApp):
    """The monitor on a recording, with the replay bar and its keys."""

    BINDINGS = [
        *CrdscopeApp.BINDINGS,
        Binding("space", "toggle_pause", "Play/pause"),
        Binding("plus,equals_sign", "faster", "Faster"),
        Binding("minus", "slower", "Slower"),
        Binding("full_stop", "step", "Step"),
        Binding("right_square_bracket", f"seek_by({SEEK_STEP_SECONDS})", "+1m", show=False),
        Binding("left_square_bracket", f"seek_by({-SEEK_STEP_SECONDS})", "-1m", show=False),
        Binding("home", "seek_fraction(0)", "Start", show=False),
        Binding("end", "seek_fraction(1)", "End", show=False),
        Binding("g", "seek_dialog", "Seek"),
    ]

    def __init__(self, feed: ReplayFeed, **options: Any) -> None:
        super().__init__(feed, **options)
        #: The feed as what it is: a replay (speed, step, seek), beyond the Feed interface.
        self.replay = feed

    def on_mount(self) -> None:
        # Textual also runs CrdscopeApp.on_mount (handlers run for every class of the MRO),
        # which pushes the monitor screen: the bar goes on it once it is there.
        self.call_after_refresh(self._mount_bar)

    def _mount_bar(self) -> None:
        screen = self.monitor_screen
        if screen is None or screen.query(ReplayBar):
            return
        footers = screen.query(Footer)
        bar = ReplayBar(self.replay)
        if footers:
            screen.mount(bar, before=footers.first())
        else:
            screen.mount(bar)

    def _redraw_bar(self) -> None:
        screen = self.monitor_screen
        for bar in screen.query(ReplayBar) if screen is not None else ():
            bar.redraw()

    # -- actions ---------------------------------------------------------------------------
    def action_toggle_pause(self) -> None:
        if self.feed.paused:
            self.feed.resume()
        else:
            self.feed.pause()
        self._redraw_bar()
        self._refresh_everything()

    def action_faster(self) -> None:
        self._set_speed(next((s for s in SPEEDS if s > self.replay.speed), math.inf))

    def action_slower(self) -> None:
        current = self.replay.speed
        self._set_speed(next((s for s in reversed(SPEEDS) if s < current), SPEEDS[0]))

    def _set_speed(self, speed: float) -> None:
        self.replay.speed = speed
        self.notify(f"replay speed {speed_label(self.replay.speed)}", timeout=2)
        self._redraw_bar()

    def action_step(self) -> None:
        """One sample forward (pausing first, so that steps are steps)."""
        if not self.feed.paused:
            self.feed.pause()
        self.replay.step()
        self._redraw_bar()

    def action_seek_by(self, seconds: float) -> None:
        self.seek(self.feed.now() + float(seconds))

    def action_seek_fraction(self, fraction: float) -> None:
        start, end = self.replay.start, self.replay.end
        if start is not None and end is not None:
            self.seek(start + float(fraction) * (end - start))

    def action_seek_dialog(self) -> None:
        from crdscope.session.replay import seek_target

        start, end = self.replay.start, self.replay.end
        if start is None or end is None:
            self.notify("nothing to seek in: the recording has no samples", severity="warning")
            return
        hint = (f"The recording runs {time.strftime('%H:%M:%S', time.localtime(start))} - "
                f"{time.strftime('%H:%M:%S', time.localtime(end))}.")

        def answered(text: str | None) -> None:
            if not text:
                return
            try:
                self.seek(seek_target(text, start, end, self.feed.now()))
            except ConfigError as exc:
                self.notify(str(exc), severity="error")

        self.push_screen(SeekScreen(hint), answered)

    def seek(self, timestamp: float) -> None:
        """Jump the replay to ``timestamp`` (panels rebuild from the samples before it)."""
        self.replay.seek(timestamp)
        self.notify(f"seek to {time.strftime('%H:%M:%S', time.localtime(timestamp))}", timeout=2)
        self._redraw_bar()

    def palette_commands(self) -> list[PaletteCommand]:
        commands: list[PaletteCommand] = [
            ("Replay: play/pause", "space", self.action_toggle_pause),
            ("Replay: faster", "double the speed (+)", self.action_faster),
            ("Replay: slower", "halve the speed (-)", self.action_slower),
            ("Replay: step", "one sample forward (.)", self.action_step),
            ("Replay: seek", "to a time, +90s, -5m or 50% (g)", self.action_seek_dialog),
            ("Replay: forward one minute", "(])", lambda: self.action_seek_by(SEEK_STEP_SECONDS)),
            ("Replay: back one minute", "([)", lambda: self.action_seek_by(-SEEK_STEP_SECONDS)),
        ]
        return commands + [c for c in super().palette_commands() if not c[0].startswith("Probes:")]


def build_replay_app(recording: Recording, *, speed: float = 1.0, theme: str | None = None,
                     layout: str | None = None, settings: Settings | None = None) -> ReplayApp:
    """The replay app on a recording (tests drive it with ``run_test``)."""
    from crdscope.base.settings import load_settings
    from crdscope.session.replay import ReplayFeed

    from .app import check_theme

    settings = settings or load_settings()
    theme = check_theme(theme or settings.ui.theme)
    feed = ReplayFeed(recording, speed=speed, hold_at_end=True)
    return ReplayApp(feed, settings=settings, theme=theme, mode_label="REPLAY", layout=layout)


def run_replay_app(recording: Recording, *, speed: float = 1.0, theme: str | None = None) -> None:
    """Open the monitor on a recording and run it until quit."""
    from crdscope.base.logs import NOT_WRITABLE, log_to_file

    where = log_to_file() or NOT_WRITABLE
    app = build_replay_app(recording, speed=speed, theme=theme)
    app.run()
    if app.return_code:
        import click

        click.echo(f"crdscope: the replay stopped on an error (details in {where})", err=True)
