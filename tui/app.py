"""The crdscope monitor: a thin Textual App around a feed of samples.

The app holds one session core (:class:`session.core.WatchCore`: the sample store,
the findings engine, the events detector, the local kubectl) and the recorder; the
screens and panels render what is in the core's store.  Everything that talks to a
cluster runs in the app's event loop as a worker (the feed, loader actions), so
a key press is never stuck behind the network.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any
from collections.abc import Awaitable, Callable

from textual.app import App
from textual.binding import Binding

from crdscope.findings.engine import FindingsEngine
from crdscope.findings.kubectl import KubectlClient
from crdscope.findings.model import Finding
from crdscope.base.errors import ConfigError
from crdscope.probes.footprint import FootprintSample
from crdscope.base.logs import log_path, write_traceback
from crdscope.base.paths import data_dir
from crdscope.base.samples import Sample
from crdscope.base.store import ProbeHealth
from crdscope.base.settings import Settings
from crdscope.session.core import SessionStore, WatchCore
from crdscope.themes import DEFAULT_THEME, THEME_NAMES, THEMES, role_defaults

from .commands import CrdscopeCommands
from .feeds import Feed
from .frozen_heap import SETTLE_EVERY_SECONDS, FrozenHeap
from .messages import SampleArrived
from .screens.help import HelpScreen
from .screens.monitor import MonitorScreen

log = logging.getLogger("crdscope.tui")

def check_theme(name: str) -> str:
    """``name`` if it is a crdscope theme, else a one-line :class:`ConfigError`."""
    if name not in THEME_NAMES:
        raise ConfigError(f"unknown theme '{name}' (one of: {', '.join(THEME_NAMES)})")
    return name


class CrdscopeApp(App[None]):
    """Header, panels, keys and palette over one feed (live monitor or replay)."""

    CSS_PATH = "monitor.tcss"
    TITLE = "crdscope"
    COMMANDS = App.COMMANDS | {CrdscopeCommands}
    BINDINGS = [
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
        Binding("p", "toggle_pause", "Pause"),
        Binding("l", "loader", "Loader"),
        Binding("t", "next_theme", "Theme"),
        Binding("s", "screenshot", "Shot"),
        Binding("e", "estimate", "Estimate"),
        Binding("f", "findings", "Findings"),
    ]

    def __init__(self, feed: Feed, *, settings: Settings | None = None, theme: str | None = None,
                 loader: Any = None, lab: Any = None, recorder: Any = None, detector: Any = None,
                 clock: Callable[[], float] | None = None, layout: str | None = None,
                 mode_label: str = "", memory_limit: int | None = None,
                 follow_memory_limit: Callable[[Callable[[int | None], None]], Awaitable[None]] | None = None,
                 kubectl: KubectlClient | None | bool = True) -> None:
        super().__init__()
        self.feed = feed
        self.settings = settings or Settings()
        #: The session core: samples reach it through :meth:`sink` (as messages), not as a feed sink.
        self.core = WatchCore(feed, thresholds=self.settings.thresholds, memory_limit=memory_limit,
                              cluster=str(getattr(feed, "context", "") or ""), subscribe=False)
        if detector is not None:
            self.core.detector = detector
        #: True: find the kubectl on PATH once mounted; a client: that one; None/False: none.
        self._kubectl = kubectl
        if isinstance(kubectl, KubectlClient):
            self.core.know_kubectl(kubectl)
        #: The loader's controller (tui.loader_control.LoaderControl), None in a replay.
        self.loader = loader
        #: A lab.controlplane.Lab when watching a lab: its faults go in the palette.
        self.lab = lab
        self.recorder = recorder
        #: Runs until cancelled, telling :meth:`set_memory_limit` each new limit (a lab's cap resized live).
        self._follow_memory_limit = follow_memory_limit
        self._clock = clock
        self.mode_label = mode_label
        self._layout = layout
        self.screenshots: list[str] = []
        self.heap = FrozenHeap()
        for candidate in THEMES:
            self.register_theme(candidate)
        self.theme = check_theme(theme or self.settings.ui.theme or DEFAULT_THEME)

    # -- wiring ------------------------------------------------------------------------
    def get_theme_variable_defaults(self) -> dict[str, str]:
        # Textual's own themes lack crdscope's roles: borrow them so every theme renders.
        return role_defaults()

    # -- the core's parts, as the widgets and tests name them ---------------------------
    @property
    def store(self) -> SessionStore:
        """The core's sample store (the panels are views over it)."""
        return self.core.store

    @property
    def findings(self) -> FindingsEngine:
        """The core's findings engine."""
        return self.core.findings

    @findings.setter
    def findings(self, engine: FindingsEngine) -> None:
        self.core.findings = engine

    @property
    def detector(self) -> Any:
        return self.core.detector

    @property
    def memory_limit(self) -> int | None:
        """The API server's memory limit in bytes when known (``--memory-limit``, the lab's cap)."""
        return self.core.memory_limit

    @property
    def kubectl(self) -> KubectlClient | None:
        """The local kubectl the findings and the discovery panel judge by (None: not known)."""
        return self.core.kubectl

    def on_mount(self) -> None:
        self.push_screen(MonitorScreen(self.store, layout=self._layout))
        self.feed.add_sink(self.sink)
        reset = getattr(self.feed, "add_reset_listener", None)
        if callable(reset):
            reset(self.reset)
        if self._kubectl is True:
            self.run_worker(self._learn_kubectl(), name="kubectl", group="kubectl", exit_on_error=False)
        if self.loader is not None and hasattr(self.loader, "add_sink"):
            self.loader.add_sink(self.sink)
        self.run_worker(self._run_feed(), name="feed", group="feed", exit_on_error=False)
        self.set_interval(SETTLE_EVERY_SECONDS, self.heap.settle)
        if self._follow_memory_limit is not None:
            self.run_worker(self._follow_memory_limit(self.set_memory_limit), name="memory-limit",
                            group="memory-limit", exit_on_error=False)

    def on_unmount(self) -> None:
        self.heap.thaw()

    async def _learn_kubectl(self) -> None:
        """Find the local kubectl (a process, in a thread), then judge again with it known."""
        if await self.core.learn_local_kubectl() is None:
            return
        changes = self.core.evaluate(self.core.findings.observations.now)
        for change in changes:
            self._record(change)
        screen = self.monitor_screen
        if screen is not None:
            screen.probe_changed("discovery")  # the cache line judges by this kubectl's TTL
            if changes:
                screen.findings_changed()

    async def _run_feed(self) -> None:
        try:
            await self.feed.run()
        except Exception as exc:
            log.exception("the feed stopped")
            self.notify(f"monitor stopped: {type(exc).__name__}: {exc} (details in {self.log_path()})",
                        severity="error", timeout=30)

    def sink(self, sample: Sample) -> None:
        """Hand a sample to the UI (safe from any thread or task)."""
        self.post_message(SampleArrived(sample))

    def on_sample_arrived(self, message: SampleArrived) -> None:
        self.take(message.sample)

    def take(self, sample: Sample) -> None:
        """Hand a sample to the core, record it with what it caused, and tell the panels."""
        taken = self.core.take(sample)
        self._record(sample)
        for change in taken.changes:
            self._record(change)
        screen = self.monitor_screen
        if screen is not None:
            screen.probe_changed(sample.probe)
            if taken.changes:
                screen.findings_changed()
        self.heap.first_samples_in(self.store, self.call_after_refresh)
        for event in taken.events:
            self._record(event)
        if taken.events and screen is not None:
            screen.probe_changed("events")

    def current_findings(self) -> list[Finding]:
        """Open findings, most severe first (the header and the findings strip read them)."""
        return self.findings.current()

    def _record(self, item: Any) -> None:
        if self.recorder is None:
            return
        try:
            self.recorder(item)
        except Exception:
            log.exception("recording failed; recording stops")
            self.recorder = None
            self.notify("recording failed and stopped (details in the log)", severity="error")

    def set_memory_limit(self, limit: int | None) -> None:
        """The API server's memory limit changed (``crdscope lab limit``): findings and panels use the new one."""
        self.core.set_memory_limit(limit)
        screen = self.monitor_screen
        if screen is not None:
            for panel in screen.panels():
                panel.changed()

    def reset(self) -> None:
        """Forget every sample and event (a replay seeking backwards)."""
        self.core.reset()
        screen = self.monitor_screen
        if screen is not None:
            for panel in screen.panels():
                panel.changed()

    # -- state the widgets read ------------------------------------------------------
    @property
    def monitor_screen(self) -> MonitorScreen | None:
        for screen in self.screen_stack:
            if isinstance(screen, MonitorScreen):
                return screen
        return None

    def now(self) -> float:
        """The feed's clock: wall time live, recording time in a replay."""
        if self._clock is not None:
            return self._clock()
        return self.feed.now()

    @property
    def probes_paused(self) -> bool:
        return self.feed.paused

    def probe_health(self) -> dict[str, ProbeHealth]:
        """Per-probe health: the scheduler's when the feed has one, else from the samples seen."""
        health = getattr(self.feed, "health", None)
        found = health() if callable(health) else None
        return found if found else self.store.health()

    # -- actions -----------------------------------------------------------------------
    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.store.last_good_of(FootprintSample)))

    def action_toggle_pause(self) -> None:
        """Pause or resume the probes (runs in flight finish)."""
        if self.probes_paused:
            self.feed.resume()
            self.notify("probes resumed")
        else:
            self.feed.pause()
            self.notify("probes paused: press p to resume")
        self._refresh_everything()

    def _theme_setter(self, name: str) -> Callable[[], None]:
        return lambda: self.action_set_theme(name)

    def action_next_theme(self) -> None:
        names = list(THEME_NAMES)
        following = names[(names.index(self.theme) + 1) % len(names)] if self.theme in names else names[0]
        self.action_set_theme(following)

    def action_set_theme(self, name: str) -> None:
        self.theme = check_theme(name)
        self.notify(f"theme: {name}", timeout=2)

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        """Save an SVG of the screen (in the data directory unless ``path`` says where)."""
        directory = Path(path) if path else data_dir() / "screenshots"
        try:
            directory.mkdir(parents=True, exist_ok=True)
            saved = self.save_screenshot(filename, path=str(directory))
        except OSError as exc:
            self.notify(f"cannot save a screenshot in {directory}: {exc.strerror}", severity="error")
            return
        self.screenshots.append(saved)
        self.notify(f"screenshot saved: {saved}", timeout=6)

    def action_estimate(self) -> None:
        """What installing a source would cost the watched API server (the cost model)."""
        from .screens.estimate import EstimateScreen

        self.push_screen(EstimateScreen(self.store))

    def action_findings(self) -> None:
        """Every open finding, with the selected one's evidence, cause and remedy."""
        from .screens.findings import FindingsScreen

        if not isinstance(self.screen, FindingsScreen):
            self.push_screen(FindingsScreen())

    def action_loader(self) -> None:
        """The loader's menu (start, pause, resume, stop, clean)."""
        from .loader_actions import open_loader_menu

        open_loader_menu(self)

    def _refresh_everything(self) -> None:
        screen = self.monitor_screen
        if screen is not None:
            screen.refresh_header()
            for panel in screen.panels():
                panel.refresh_status()

    def palette_commands(self) -> list[tuple[str, str, Callable[[], Any]]]:
        """Every action for the command palette: (name, help, callback)."""
        from .loader_actions import loader_commands

        commands: list[tuple[str, str, Callable[[], Any]]] = [
            ("Help: keys and panels", "the help screen (?)", self.action_help),
            ("Probes: pause" if not self.probes_paused else "Probes: resume",
             "stop or restart probe runs (p)", self.action_toggle_pause),
            ("Screenshot: save SVG", f"into {data_dir() / 'screenshots'} (s)", self.action_screenshot),
            ("Theme: next", "cycle the crdscope themes (t)", self.action_next_theme),
            ("Estimate: what would SOURCE cost", "the cost model against this cluster (e)", self.action_estimate),
            ("Findings: evidence, cause, remedy", "every open finding in full (f)", self.action_findings),
            ("Quit", "leave crdscope (q)", self.action_quit),
        ]
        commands += [(f"Theme: {name}", "colour theme", self._theme_setter(name)) for name in THEME_NAMES]
        commands += loader_commands(self)
        if self.lab is not None:
            from .lab_faults import fault_commands

            commands += fault_commands(self)
        return commands

    # -- errors: one line on screen, the traceback in the log --------------------------
    def log_path(self) -> str:
        return str(log_path())

    def _handle_exception(self, error: Exception) -> None:
        # Textual would print a traceback on exit: write it to the log file instead and
        # leave one line (see _fatal_error).  Private hook; Textual >= 0.80 has it.
        where = write_traceback(error)
        self._crash_line = f"crdscope: internal error: {type(error).__name__}: {error} (details in {where})"
        super()._handle_exception(error)

    def _fatal_error(self) -> None:
        from rich.text import Text

        self.bell()
        self._exit_renderables.append(Text(" ".join(getattr(self, "_crash_line", "crdscope: internal error").split())))
        self._close_messages_no_wait()
