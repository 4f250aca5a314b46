"""``crdscope demo``: the same provider into a capped 1.26 lab and a 1.37 lab, compared side by side.

:func:`prepare_demo` brings the two named labs up (or finds them up from an earlier demo) and
plans each one's install: through the lab's real Crossplane (:func:`tui.launch.crossplane_install_stages`,
the driver of ``crdscope lab --crossplane``, once per lab) when Crossplane is built, else with
crdscope's own loader (the compare screen's ``l``, without its dialog).  :class:`FleetDemoApp` is
the monitor on both, opened on the compare screen: once up it starts both installs and narrates
what to look at, one notification per stage (memory nearing the cap, the OOM kill and the
supervisor's restart: :class:`tui.demo_story.Narrator`, from each health sample), and ends with
each cluster's open findings.  Every line is also a note in the capped lab's recording, so that
``crdscope demo --replay`` (:mod:`tui.fleet_replay`) tells the story again from the recordings.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from crdscope.base.errors import ConfigError, LabError
from crdscope.base.samples.health import HealthSample
from crdscope.loader.crossplane_install import LabClient, Stage, run_install
from crdscope.session.core import Taken
from crdscope.session.notes import Note, NoteKind

from .app import CrdscopeApp
from .crossplane_demo import InstallSaid
from .demo_story import DemoLab, Narrator, findings_line
from .fleet_figures import figures_of
from .format import size
from .sessions import ClusterSession

if TYPE_CHECKING:
    from crdscope.base.settings import Settings
    from crdscope.lab.controlplane import Lab, LabState
    from crdscope.toolchain.crossplane import CrossplaneBinaries

    from .launch import RecordChoice

log = logging.getLogger("crdscope.tui.demo")

MIB = 2**20
#: The 1.26 lab's memory cap, by way of install (measured with the GCP family on this 2-core machine;
#: the README's demo section has the figures).  Through Crossplane the 817 inactive MRDs take both labs
#: to about 1.1 GiB; activating every kind, 1.26 passed 4.5 GiB some 570 CRDs in (6.4 MiB each) while
#: 1.37 installed all 817 and peaked at 3.46 GiB (2.8 MiB each), 77% of the cap.  crdscope's loader
#: (no MRDs, no Crossplane) should take 1.37 to about 2.6 GiB and 1.26 past 3.5 GiB some 510 CRDs in.
CROSSPLANE_MEMORY_LIMIT = 4608 * MIB
LOADER_MEMORY_LIMIT = 3584 * MIB
OLD, NEW = "1.26", "1.37"
#: Seconds a narration line stays on screen (the last ones, the findings, stay longer).
NOTE_SECONDS = 30.0
END_SECONDS = 600.0
FOLLOW_SECONDS = 2.0


@dataclass(kw_only=True)
class LabInstall(DemoLab):
    """One lab of the demo (its name, minor, cap and install's result, as the story names it) and how
    the provider goes into it."""

    lab: Lab
    state: LabState
    #: Through Crossplane (the driver's stages), or None: crdscope's own loader.
    stages: list[Stage] | None = None


@dataclass
class FleetDemo:
    """What :func:`prepare_demo` set up: the labs (capped 1.26 first), the provider and the way in."""

    installs: list[LabInstall]
    provider: str
    #: Why the built-in loader installs instead of Crossplane ("" when Crossplane does).
    fallback: str = ""
    labs: list[Lab] = field(default_factory=list)


def lab_names(prefix: str) -> tuple[str, str]:
    """The demo's two labs: ``PREFIX-126`` (capped) and ``PREFIX-137``."""
    return f"{prefix}-{OLD.replace('.', '')}", f"{prefix}-{NEW.replace('.', '')}"


def default_memory_limit(through_crossplane: bool) -> int:
    """The 1.26 lab's cap when none is given: the one its way of install crosses and 1.37's does not."""
    return CROSSPLANE_MEMORY_LIMIT if through_crossplane else LOADER_MEMORY_LIMIT


def check_not_taken(lab: Lab, kubernetes: str, memory_limit: int | None) -> None:
    """A lab of that name up but not the demo's (another version, capped or not as the demo's is not,
    or another cap than ``memory_limit`` when one was given): a one-line error."""
    state = lab.state()
    if state is None:
        return
    version_ok = state.kubernetes_version.startswith(f"v{kubernetes}.")
    capped = memory_limit != 0
    cap_ok = state.memory_limit == memory_limit if memory_limit else bool(state.memory_limit) == capped
    if version_ok and cap_ok:
        return  # the demo's own, from an earlier run: watched again
    cap = f"capped at {size(state.memory_limit)}" if state.memory_limit else "no memory cap"
    raise LabError(f"a lab named {lab.name} is already up ({state.kubernetes_version}, {cap}) and is not the "
                   f"demo's: `crdscope lab down --name {lab.name}`, or `crdscope demo --name OTHER`")


def _binaries_for(kubernetes: str, say: Callable[[str], None]) -> None:
    """Kubernetes ``kubernetes`` built (or cached) before any lab starts: what stops a build is one line."""
    import shutil

    from crdscope.lab.binaries import build, find_binaries

    if find_binaries(kubernetes=kubernetes) is not None:
        return
    again = f"`crdscope lab build --kubernetes {kubernetes}`"
    if not shutil.which("go"):
        raise LabError(f"Kubernetes {kubernetes} is not built and Go is not installed to build it "
                       f"(`make system-deps`, then {again})")
    try:
        build(kubernetes, progress=say)
    except LabError as exc:  # Go's own output (the detail) goes to the log, not the screen
        log.error("building Kubernetes %s failed: %s\n%s", kubernetes, exc, exc.detail or "")
        raise LabError(f"Kubernetes {kubernetes} is not built and cannot be: {exc} ({again} once the Go "
                       "module proxy is reachable)") from None


def crossplane_binaries(crossplane: bool | None) -> tuple[CrossplaneBinaries | None, str]:
    """Crossplane's binaries when the demo installs through it, and else the line saying why not
    (``crossplane``: True demands it, False declines it, None takes it when built)."""
    from crdscope.toolchain import crossplane as toolchain_crossplane

    if crossplane is False:
        return None, "--no-crossplane: crdscope's loader installs the provider's CRDs in both labs"
    binaries = toolchain_crossplane.cached_binaries()
    if binaries is None:
        if crossplane:
            raise LabError("Crossplane is not built: run `crdscope lab build --crossplane` "
                           "(or `make demo FLEET=1 CROSSPLANE=1`, which builds it)")
        return None, ("Crossplane is not built (`crdscope lab build --crossplane`): crdscope's loader installs "
                      "the provider's CRDs in both labs instead")
    return binaries, ""


def prepare_demo(provider: str, *, prefix: str = "demo", memory_limit: int | None = None,
                 crossplane: bool | None = None, say: Callable[[str], None] = lambda _: None) -> FleetDemo:
    """Both labs up (1.26 capped at ``memory_limit``, by default :func:`default_memory_limit`, or kept
    at its cap when up from an earlier demo; 1.37 not capped), each install planned; every input
    checked before anything starts."""
    from crdscope.lab.components import LabOptions
    from crdscope.lab.controlplane import Lab
    from crdscope.loader.sources import open_source

    from .launch import _lab_up, crossplane_install_stages

    if memory_limit is not None and memory_limit < 256 * MIB:
        raise ConfigError(f"--memory-limit {size(memory_limit)} is below what an idle API server needs "
                          "(256 MiB at least)")
    source = open_source(provider)  # a one-line error before anything starts
    binaries, fallback = crossplane_binaries(crossplane)
    names = lab_names(prefix)
    check_not_taken(Lab(name=names[0]), OLD, memory_limit)
    check_not_taken(Lab(name=names[1]), NEW, 0)
    from crdscope.lab.cgroups import check_available

    check_available()
    cap = memory_limit or default_memory_limit(binaries is not None)
    wanted = list(zip(names, (OLD, NEW), (cap, 0), strict=True))
    from crdscope.lab.buildplan import say_plan

    say_plan(say, (OLD, NEW))  # before the first build: what it builds and about how long
    for _, kubernetes, _ in wanted:
        _binaries_for(kubernetes, say)
    installs = []
    for name, kubernetes, cap in wanted:
        def said(line: str, lab: str = name) -> None:
            say(f"{lab}: {line}")

        lab, state = _lab_up(name, kubernetes=kubernetes, options=LabOptions(name=name, memory_limit=cap),
                             say=said)
        stages = activating_every_kind(crossplane_install_stages(lab, state, source, binaries, say=said,
                                                                  controllers=False)) \
            if binaries else None
        state = lab.require()
        installs.append(LabInstall(name=name, kubernetes=kubernetes, memory_limit=state.memory_limit, lab=lab,
                                   state=state, stages=stages))
    return FleetDemo(installs, source.spec, fallback, [i.lab for i in installs])


def activating_every_kind(stages: list[Stage]) -> list[Stage]:
    """The driver's stages, its MRAP activating every kind (``*``) rather than the largest member's:
    the demo compares memory per CRD, and one member's CRDs (192 of the GCP family) left the two
    versions within 15% of each other (peaks of 2.27 GiB on 1.26 and 1.99 GiB on 1.37)."""
    from crdscope.loader.crossplane_install import MRAP_NAME, MRDS_TIMEOUT, activation_policy

    every = tuple(sorted({name for stage in stages if stage.wait == "mrds" for name in stage.names}))
    last = dataclasses.replace(stages[-1], says=f"MRAP {MRAP_NAME} activates every kind ('*'): {len(every)} CRDs "
                                                "to be Established", objects=(activation_policy(["*"]),),
                               names=every, timeout=max(stages[-1].timeout, MRDS_TIMEOUT))
    return [*stages[:-1], last]


def build_demo_app(demo: FleetDemo, *, record: RecordChoice = None, settings: Settings | None = None,
                   theme: str | None = None, layout: str | None = None) -> FleetDemoApp:
    """The monitor on the demo's labs, opening on the compare screen (tests drive it with ``run_test``)."""
    from .launch import _settings, _theme, live_session

    settings = _settings(settings, False, None)
    sessions = [live_session(i.state.kubeconfig, i.state.admin_context, settings=settings, record=record, lab=i.lab,
                             source=demo.provider, fleet=True) for i in demo.installs]
    return FleetDemoApp(settings=settings, theme=_theme(theme, settings), layout=layout, sessions=sessions,
                        compare=True, demo=demo)


class FleetDemoApp(CrdscopeApp):
    """The compare screen on the demo's two labs, installing the same provider into both and
    narrating it (``narration`` keeps every line said, in order; each is also recorded as a note in
    the capped lab's recording, which ``crdscope demo --replay`` tells again)."""

    def __init__(self, *args: Any, demo: FleetDemo, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.demo = demo
        self.narration: list[str] = []
        self._stop = threading.Event()
        self.narrator = Narrator(list(zip(demo.installs, self.sessions, strict=True)), self._tell)

    @property
    def ended(self) -> bool:
        """True once every install ended (or the capped lab was killed and the others ended)."""
        return self.narrator.ended

    @property
    def pairs(self) -> list[tuple[LabInstall, ClusterSession]]:
        """Each lab's install beside its session (same order)."""
        return list(zip(self.demo.installs, self.sessions, strict=True))

    # -- narration ---------------------------------------------------------------------
    def say(self, line: str, severity: str = "information", kind: NoteKind = "story") -> None:
        """One line of narration, on screen (from the event loop's thread) and in the first lab's recording
        (the first line with the cast: the labs as the story names them)."""
        log.info("demo: %s", line)
        cast = () if self.narration else tuple(i.cast(s.name) for i, s in self.pairs)
        self.narration.append(line)
        recording = self.sessions[0].recording
        if recording is not None:
            recording.record(Note(time.time(), line, severity, kind, cast))
        timeout = END_SECONDS if self.ended else NOTE_SECONDS
        self.notify(line, title="demo", severity=severity, timeout=timeout)  # type: ignore[arg-type]

    def _tell(self, line: str, severity: str, kind: NoteKind) -> None:
        self.say(line, severity, kind)

    def on_install_said(self, message: InstallSaid) -> None:
        self.say(message.line, message.severity)

    # -- the stages --------------------------------------------------------------------
    def on_mount(self) -> None:  # after the app's own (Textual calls each class's handler)
        for session in self.sessions:  # the story follows each health sample as it is taken
            session.core.add_listener(self._taken)

    def _taken(self, taken: Taken) -> None:
        if isinstance(taken.sample, HealthSample):
            self.narrator.follow()

    def on_ready(self) -> None:
        how = ("through each lab's Crossplane (ImageConfig, family Provider, members' MRDs, then an MRAP "
               "activating every kind)" if not self.demo.fallback else "with crdscope's loader, at the same pace")
        self.narrator.opening(self.demo.provider, how, self.demo.fallback)
        for install, session in self.pairs:
            if install.stages is not None:
                self.run_worker(functools.partial(self._install, install), thread=True,
                                name=f"install {install.lab.name}", group="demo-install", exit_on_error=False)
            else:
                self.run_worker(self._load(install, session), name=f"load {install.lab.name}", group="demo-install",
                                exit_on_error=False)
        self.set_interval(FOLLOW_SECONDS, self.follow)

    def on_unmount(self) -> None:
        self._stop.set()  # the install threads end at their next request or poll
        super().on_unmount()

    def _install(self, install: LabInstall) -> None:
        """One lab's install through its Crossplane (a thread: the driver blocks on the lab)."""
        assert install.stages is not None
        name = install.lab.name

        def said(line: str, severity: str = "information") -> None:
            self.post_message(InstallSaid(f"{name}: {line}", severity))  # thread-safe

        client = LabClient(install.state.server, install.state.pki_dir)
        try:
            install.result = run_install(install.stages, client, say=said, stop=self._stop)
        except Exception as exc:  # the monitor keeps running; the line says what failed
            log.exception("the Crossplane install into %s failed", name)
            install.result = False
            said(f"the install stopped: {exc}", "error")
        finally:
            client.close()

    async def _load(self, install: LabInstall, session: ClusterSession) -> None:
        """One lab's install with crdscope's loader (the same source and pace in each lab)."""
        loader = session.loader
        if loader is None:  # the demo's clusters are its live labs: each has its loader
            raise RuntimeError(f"{install.lab.name} is watched without a loader")
        loader.configure(self.demo.provider, loader.settings.profile, loader.settings.rate,
                         loader.settings.concurrency)
        final = await loader.run()
        install.result = final is not None and final.state == "done" and not final.error
        if not install.result:
            why = (final.error if final is not None else "") or "it did not finish"
            self.say(f"{install.lab.name}: the load stopped short: {why}", "warning")

    def follow(self) -> None:
        """Every few seconds: the end, once every install ended (the figures' lines follow the samples)."""
        if not self.ended and self._finished():
            self.end()

    def _finished(self) -> bool:
        """Every install ended, or every uncapped one did and each capped lab was killed at least once."""
        if any(i.result is None for i, _ in self.pairs if not i.memory_limit):
            return False
        return all(i.result is not None or (figures_of(s).restarts or 0) > 0 for i, s in self.narrator.capped)

    def end(self) -> None:
        """The last stage: each cluster's open findings, then how to leave."""
        done = ", ".join(f"{i.lab.name} {'installed' if i.result else 'not installed'}" for i in self.demo.installs)
        self.narrator.end(f"the end ({done}): each cluster's findings follow (f opens them in a cluster's monitor)")
        self.say("q quits and leaves both labs up (it says how to take them down)", kind="live")


def open_fleet_demo(provider: str | None = None, *, prefix: str = "demo", memory_limit: int | None = None,
                    crossplane: bool | None = None, record: RecordChoice = True) -> None:
    """``crdscope demo``: a 1.26 lab capped at ``memory_limit`` (None: the demo's default) and a 1.37
    lab (named ``PREFIX-126`` and ``PREFIX-137``, started unless up), the compare screen on both, the
    same provider installed into each (through Crossplane when built; ``crossplane`` True demands it,
    False declines it), narrated; quitting leaves both labs up and says how to take them down."""
    from crdscope.base.logs import NOT_WRITABLE, log_to_file

    from .launch import _run, _say, default_provider, say_lab_still_running

    where = log_to_file() or NOT_WRITABLE
    demo = prepare_demo(provider or default_provider(_say), prefix=prefix,
                        memory_limit=memory_limit, crossplane=crossplane, say=_say)
    if demo.fallback:
        _say(demo.fallback)
    app = build_demo_app(demo, record=record)
    _run(app, where)
    for install, session in app.pairs:
        _say(findings_line(install.name, session.core.open_findings()))
    for lab in demo.labs:
        say_lab_still_running(lab)
