"""The crdscope monitor: a thin Textual App around its clusters' session cores.

The app holds one :class:`tui.sessions.ClusterSession` per watched cluster (its session core
(:class:`session.core.WatchCore`: the sample store, the findings engine, the events detector, the
local kubectl) and its source: live, the :class:`session.live.LiveCore` that
``session.live.open_live_core`` opened, with its recording; else a recording's replay; plus the
loader and the lab); ``app.session`` is the one the monitor screen shows, and the screens and panels
render what is in its store.  What each sample caused (:class:`session.core.Taken`) reaches the
screens as a :class:`tui.messages.SampleTaken`.  Several clusters open on the fleet screen
(``screens/fleet.py``).  Everything that talks to a cluster runs in the app's event loop as a worker
(the sources, loader actions), so a key press is never stuck behind the network.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING
from collections.abc import Callable, Sequence

from textual.binding import Binding

from crdscope.findings.kubectl import KubectlClient
from crdscope.base.errors import ConfigError
from crdscope.base.samples.footprint import FootprintSample
from crdscope.base.logs import log_path, write_traceback
from crdscope.base.paths import data_dir
from crdscope.base.settings import Settings
from crdscope.session.core import SampleSource, SessionStore, Taken, WatchCore
from crdscope.session.replay import ReplayFeed, replay_core
from crdscope.themes import DEFAULT_THEME, THEME_NAMES, THEMES, role_defaults

from .commands import CrdscopeCommands
from .frozen_heap import HOLD_COLLECTIONS_SECONDS, SETTLE_EVERY_SECONDS, FrozenHeap
from .host import MonitorHost, PaletteCommand
from .messages import SampleTaken
from .sessions import ClusterSession
from .screens.help import HelpScreen
from .screens.monitor import MonitorScreen
from .screens.throttled import ThrottledScreen

if TYPE_CHECKING:
    from crdscope.session.recorder import Recorder


log = logging.getLogger("crdscope.tui")

def check_theme(name: str) -> str:
    """``name`` if it is a crdscope theme, else a one-line :class:`ConfigError`."""
    if name not in THEME_NAMES:
        raise ConfigError(f"unknown theme '{name}' (one of: {', '.join(THEME_NAMES)})")
    return name


class CrdscopeApp(MonitorHost):
    """Header, panels, keys and palette over one feed (live monitor or replay)."""

    CSS_PATH = "monitor.tcss"
    TITLE = "crdscope"
    COMMANDS = MonitorHost.COMMANDS | {CrdscopeCommands}
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

    def __init__(self, feed: SampleSource | None = None, *, settings: Settings | None = None,
                 theme: str | None = None, clock: Callable[[], float] | None = None, layout: str | None = None,
                 mode_label: str = "", kubectl: KubectlClient | None | bool = True,
                 sessions: Sequence[ClusterSession] = (), compare: bool = False) -> None:
        super().__init__()
        self.settings = settings or Settings()
        if feed is not None:  # one cluster that is no live one: a recording's replay, or test samples
            core = (replay_core(feed, self.settings.thresholds) if isinstance(feed, ReplayFeed)
                    else WatchCore(feed, store=SessionStore(), thresholds=self.settings.thresholds,
                                   cluster=feed.context))
            sessions = [ClusterSession(core, clock=clock, cadences=self.settings.cadences)]
        if not sessions:
            raise ValueError("the monitor needs a feed or at least one cluster session")
        #: Every watched cluster, in the order given (a fleet when several).
        self.sessions: list[ClusterSession] = list(sessions)
        #: The cluster the monitor screen shows (and the header, panels and palette read).
        self.session = self.sessions[0]
        if isinstance(kubectl, KubectlClient):
            for each in self.sessions:
                each.core.know_kubectl(kubectl)
        #: True: find the kubectl on PATH once mounted; a client: that one; None/False: none.
        self._kubectl = kubectl
        #: Open on the compare screen (two clusters) rather than the fleet.
        self._compare = compare
        self.mode_label = mode_label
        #: The one line left on the terminal should the app crash (the traceback goes to the log).
        self._crash_line = "crdscope: internal error"
        self._layout = layout
        self.screenshots: list[str] = []
        self.heap = FrozenHeap(may_freeze=self._only_home_screens)
        self._home_screens = 1
        for candidate in THEMES:
            self.register_theme(candidate)
        self.theme = check_theme(theme or self.settings.ui.theme or DEFAULT_THEME)

    # -- wiring ------------------------------------------------------------------------
    def get_theme_variable_defaults(self) -> dict[str, str]:
        # Textual's own themes lack crdscope's roles: borrow them so every theme renders.
        return role_defaults()

    # -- the current session's parts, as the widgets and tests name them ------------------
    @property
    def fleet(self) -> bool:
        """True when the monitor watches several clusters."""
        return len(self.sessions) > 1

    @property
    def feed(self) -> SampleSource:
        """The current cluster's source of samples (the live monitor, or a replay)."""
        return self.session.feed

    @property
    def core(self) -> WatchCore:
        """The current cluster's session core."""
        return self.session.core

    @property
    def store(self) -> SessionStore:
        """The core's sample store (the panels are views over it)."""
        return self.core.store

    def _only_home_screens(self) -> bool:
        """No screen that will be dismissed is up: only those the app opened on (the monitor, or the
        fleet and the compare screen a two-cluster fleet opens over it)."""
        return len(self.screen_stack) <= self._home_screens

    def on_mount(self) -> None:
        if not self.fleet:
            self.push_screen(MonitorScreen(self.session, layout=self._layout))
        else:
            from .screens.compare import CompareScreen
            from .screens.fleet import FleetScreen

            self.push_screen(FleetScreen())
            if self._compare and len(self.sessions) == 2:
                self.push_screen(CompareScreen())
        self._home_screens = len(self.screen_stack)
        for each in self.sessions:
            self._wire(each)
        if self._kubectl is True:
            self.run_worker(self._learn_kubectl(), name="kubectl", group="kubectl", exit_on_error=False)
        self.set_interval(SETTLE_EVERY_SECONDS, self.heap.settle)

    def _wire(self, session: ClusterSession) -> None:
        """What each sample of ``session`` caused reaches the screens (as a message); run its source."""
        def taken(taken: Taken) -> None:
            self.post_message(SampleTaken(taken, session))

        session.core.add_listener(taken)
        session.core.reset_listeners.append(lambda: self._redraw_panels(session))
        if session.live is not None:
            session.live.limit_listeners.append(lambda _limit: self._redraw_panels(session))
        if session.recording is not None:
            session.recording.on_failure = self._recording_failed
        self.run_worker(self._run_feed(session), name=f"feed {session.name}", group="feed", exit_on_error=False)

    def on_unmount(self) -> None:
        self.heap.thaw()

    async def _learn_kubectl(self) -> None:
        """Find the local kubectl (a process, in a thread), then judge again with it known."""
        client = await self.sessions[0].core.learn_local_kubectl()
        if client is None:
            return
        for session in self.sessions:
            session.core.know_kubectl(client)
            changes = session.core.evaluate(session.core.findings.observations.now)
            for change in changes:
                session.record(change)
            screen = self.monitor_screen_of(session)
            if screen is not None:
                screen.probe_changed("discovery")  # the cache line judges by this kubectl's TTL
                screen.findings_changed()

    async def _run_feed(self, session: ClusterSession) -> None:
        try:
            await session.run()
        except Exception as exc:
            log.exception("the feed of %s stopped", session.name)
            which = f" of {session.name}" if self.fleet else ""
            self.notify(f"monitor{which} stopped: {type(exc).__name__}: {exc} (details in {self.log_path()})",
                        severity="error", timeout=30)

    def on_sample_taken(self, message: SampleTaken) -> None:
        """Tell the screens that show the sample's cluster what it changed."""
        session, taken = message.session, message.taken
        screen = self.monitor_screen_of(session)
        if screen is not None:
            screen.sample_taken(taken)
        self.heap.first_samples_in(session.store, self.call_after_refresh)
        for shown in self.screen_stack:
            if isinstance(shown, ThrottledScreen):  # the fleet and compare screens: throttled redraws
                shown.cluster_changed(session)

    def _recording_failed(self, recorder: Recorder, exc: Exception) -> None:
        log.error("recording to %s failed; recording stops", recorder.path, exc_info=exc)
        self.notify("recording failed and stopped (details in the log)", severity="error")

    def _redraw_panels(self, session: ClusterSession) -> None:
        """The core forgot its samples (a replay seeking back) or learned a limit: redraw it all."""
        screen = self.monitor_screen_of(session)
        if screen is not None:
            for panel in screen.panels():
                panel.changed()
            screen.findings_changed()

    # -- state the widgets read ------------------------------------------------------
    @property
    def monitor_screen(self) -> MonitorScreen | None:
        for screen in self.screen_stack:
            if isinstance(screen, MonitorScreen):
                return screen
        return None

    def monitor_screen_of(self, session: ClusterSession) -> MonitorScreen | None:
        """The monitor screen showing ``session``, if one is open."""
        screen = self.monitor_screen
        return screen if screen is not None and screen.cluster is session else None

    def open_session(self, session: ClusterSession) -> None:
        """Show ``session``'s full monitor (from the fleet or compare screen; Escape comes back).

        A new screen each time: keeping one per cluster (installed) made Escape slower (p99 297 ms
        against 36 ms at 20 clusters, ``bench fleet_ui``) and Enter no faster.
        """
        self.session = session
        screen = MonitorScreen(session, layout=self._layout, back=True,
                               name=f"monitor-{self.sessions.index(session)}")
        # Building it allocates enough to make a full collection due: it runs after the first frame.
        self.hold_collections(screen.after_first_frame)
        self.push_screen(screen)

    def hold_collections(self, until: Callable[[Callable[[], None]], object] | None = None) -> None:
        """Hold the garbage collector off until the next frame (``until``: a screen's first frame):
        a screen opening or closing answers its key first, and collects after."""
        self.heap.hold_collections(until or self.call_after_refresh)
        self.set_timer(HOLD_COLLECTIONS_SECONDS, self.heap.release_collections)

    def cluster_name(self) -> str:
        """The current cluster's name where several are watched (dialogs say whose they are), else ""."""
        return self.session.name if self.fleet else ""

    @property
    def probes_paused(self) -> bool:
        return self.session.probes_paused

    # -- actions -----------------------------------------------------------------------
    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.store.last_good_of(FootprintSample)))

    def action_toggle_pause(self) -> None:
        """Pause or resume the probes (runs in flight finish): the shown cluster's, or on the fleet
        and compare screens every cluster's."""
        every = self.fleet and not isinstance(self.screen, MonitorScreen)
        feeds = [s.feed for s in self.sessions] if every else [self.feed]
        which = f" of {len(feeds)} clusters" if every else ""
        if self.probes_paused:
            for feed in feeds:
                feed.resume()
            self.notify(f"probes{which} resumed")
        else:
            for feed in feeds:
                feed.pause()
            self.notify(f"probes{which} paused: press p to resume")
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

    def _take_selected_cluster(self) -> None:
        """On a screen of several clusters (the fleet), the highlighted one becomes the current one:
        what ``e`` and ``f`` act on."""
        from .screens.fleet import FleetScreen

        session = self.screen.selected_session() if isinstance(self.screen, FleetScreen) else None
        if session is not None:
            self.session = session

    def action_estimate(self) -> None:
        """What installing a source would cost the watched API server (the cost model)."""
        from .screens.estimate import EstimateScreen

        self._take_selected_cluster()
        self.push_screen(EstimateScreen(self.store, cluster=self.cluster_name()))

    def action_findings(self) -> None:
        """Every open finding, with the selected one's evidence, cause and remedy."""
        from .screens.findings import FindingsScreen

        if not isinstance(self.screen, FindingsScreen):
            self._take_selected_cluster()
            self.push_screen(FindingsScreen(self.session, cluster=self.cluster_name()))

    def action_loader(self) -> None:
        """The loader's menu (start, pause, resume, stop, clean)."""
        from .loader_actions import open_loader_menu

        open_loader_menu(self)

    def load_everywhere(self) -> None:
        """The fleet and compare screens' ``l``: the same source into every cluster (the loader's
        actions push the screens' dialogs, so the screens ask the app rather than import them)."""
        from .loader_actions import load_everywhere

        load_everywhere(self)

    def _refresh_everything(self) -> None:
        for shown in self.screen_stack:
            if isinstance(shown, ThrottledScreen):
                shown.cluster_changed(self.session)
        screen = self.monitor_screen
        if screen is not None:
            screen.refresh_header()
            for panel in screen.panels():
                panel.refresh_status()

    def palette_commands(self) -> list[PaletteCommand]:
        """Every action for the command palette: (name, help, callback)."""
        from .loader_actions import loader_commands

        commands: list[PaletteCommand] = [
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
        if self.session.faults is not None:
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
        self._exit_renderables.append(Text(" ".join(self._crash_line.split())))
        self._close_messages_no_wait()
