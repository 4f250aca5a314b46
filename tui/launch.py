"""Open the monitor (kept apart from cli.py so that textual loads only when needed)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from pathlib import Path
from typing import TYPE_CHECKING

import click

from crdscope.base.logs import NOT_WRITABLE, log_to_file

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from crdscope.base.labrecord import LabState
    from crdscope.base.settings import LoaderSettings, Settings
    from crdscope.lab.components import LabOptions
    from crdscope.lab.controlplane import Lab
    from crdscope.loader.crossplane_install import Stage
    from crdscope.loader.documents import Source
    from crdscope.toolchain.crossplane import CrossplaneBinaries
    from crdscope.session.attach import Collector, CollectorCluster
    from crdscope.session.recorder import ClusterInfo, Recorder
    from crdscope.session.viewstream import StreamSettings

    from .app import CrdscopeApp
    from .sessions import ClusterSession

log = logging.getLogger("crdscope.launch")

#: What ``--record`` asked for: True the default file, a path that file, False or None no recording.
RecordChoice = bool | str | Path | None


def _describe(kubeconfig: str | None, context: str | None) -> ClusterInfo:
    """The cluster as a recording names it (server, context, version; never credentials)."""
    from crdscope.connection.cluster import Cluster
    from crdscope.session.recorder import describe_cluster

    async def describe() -> ClusterInfo:
        # A cluster of its own: the monitor's client must be born in the app's event loop.
        async with Cluster.connect(kubeconfig, context) as cluster:
            return await describe_cluster(cluster)

    return asyncio.run(describe())


def _first_contact(kubeconfig: str | None, context: str | None) -> None:
    """A wrong CA or refused credentials are one line before the screen opens, not a screen of errors."""
    from crdscope.connection.cluster import Cluster, first_contact

    async def check() -> None:
        async with Cluster.connect(kubeconfig, context) as cluster:
            await first_contact(cluster)

    asyncio.run(check())


def open_recorder(record: RecordChoice, settings: Settings, kubeconfig: str | None, context: str | None, *,
                  fleet: bool = False) -> Recorder | None:
    """A Recorder for ``record`` (True: the default file, a path: that file, or in a fleet
    ``NAME.<context>.EXT`` beside it; None: none)."""
    if record is None or record is False or (record is True and not settings.ui.record):
        return None
    from crdscope.session.recorder import DEFAULT_KEEP_BYTES, Recorder, default_recording_path

    info = _describe(kubeconfig, context)
    if record is True:
        return Recorder(default_recording_path(info.context), info, keep_bytes=DEFAULT_KEEP_BYTES)
    if fleet:
        from crdscope.session.recorder import recording_path

        return Recorder(Path(recording_path(str(record), info.context, True)), info)
    return Recorder(Path(record), info)


def build_app(kubeconfig: str | None = None, context: str | None = None, *, record: RecordChoice = None,
              prometheus_url: str | None = None, theme: str | None = None, lab: Lab | None = None,
              settings: Settings | None = None, layout: str | None = None, source: str | None = None,
              memory_limit: int | None = None, openapi_v2: bool = False,
              app_class: Callable[..., CrdscopeApp] | None = None) -> CrdscopeApp:
    """The monitor app on a cluster, ready to run (tests drive it with ``run_test``); ``app_class``
    makes another kind of monitor (the Crossplane demo's, which installs a provider once up)."""
    from .app import CrdscopeApp

    settings = _settings(settings, openapi_v2, prometheus_url)
    theme = _theme(theme, settings)
    session = live_session(kubeconfig, context, settings=settings, record=record, lab=lab, source=source,
                           memory_limit=memory_limit)
    return (app_class or CrdscopeApp)(settings=settings, theme=theme, layout=layout, sessions=[session])


def _settings(settings: Settings | None, openapi_v2: bool, prometheus_url: str | None) -> Settings:
    from crdscope.base.settings import load_settings, with_openapi_v2
    from crdscope.findings.engine import check_silences

    chosen: Settings = with_openapi_v2(settings or load_settings(), openapi_v2)
    check_silences(chosen.silences)  # a bad [[silence]] entry: one line, exit 2, before any screen
    if prometheus_url:
        chosen = dataclasses.replace(chosen, prometheus_url=prometheus_url)
    return chosen


def _theme(theme: str | None, settings: Settings) -> str:
    from .app import check_theme

    return check_theme(theme or settings.ui.theme)


def live_session(kubeconfig: str | None, context: str | None, *, settings: Settings,
                 record: RecordChoice = None, lab: Lab | None = None, source: str | None = None,
                 memory_limit: int | None = None, fleet: bool = False) -> ClusterSession:
    """One live cluster of the monitor: its live core (``session.live.open_live_core``: probes,
    store, findings, recording, memory limit) and loader control (``fleet``: one of several, its
    recording named after its context)."""
    from crdscope.connection.cluster import Cluster
    from crdscope.session.live import open_live_core

    from crdscope.session.loader_control import LoaderControl
    from .sessions import ClusterSession

    cluster = Cluster.connect(kubeconfig, context)
    recorder = open_recorder(record, settings, kubeconfig, context, fleet=fleet)
    live = open_live_core(cluster, settings, lab_home=lab.home if lab is not None else None,
                          memory_limit=memory_limit, recorder=recorder)
    loader = LoaderControl(live.monitor, settings.loader, context_flag=context, source=source)
    loader.add_sink(live.core.take)  # the loader's progress is recorded and replayed like a probe's samples
    return ClusterSession(live.core, live=live, loader=loader, lab=lab)


def build_fleet_app(kubeconfig: str | None, contexts: Sequence[str], *, record: RecordChoice = None,
                    prometheus_url: str | None = None, theme: str | None = None, settings: Settings | None = None,
                    layout: str | None = None, source: str | None = None, memory_limit: int | None = None,
                    openapi_v2: bool = False, compare: bool = False) -> CrdscopeApp:
    """The monitor on several clusters (one session each), opening on the fleet screen, or with
    ``compare`` and two contexts on the compare screen."""
    from crdscope.base.errors import ConfigError

    from .app import CrdscopeApp

    repeated = next((name for name in contexts if list(contexts).count(name) > 1), None)
    if repeated is not None:
        raise ConfigError(f"--context {repeated} is given twice")
    if compare and len(contexts) != 2:
        raise ConfigError(f"compare takes two contexts, not {len(contexts)}")
    settings = _settings(settings, openapi_v2, prometheus_url)
    theme = _theme(theme, settings)
    sessions = [live_session(kubeconfig, context, settings=settings, record=record, source=source,
                             memory_limit=memory_limit, fleet=True) for context in contexts]
    return CrdscopeApp(settings=settings, theme=theme, layout=layout, sessions=sessions, compare=compare)


def check_source(source: str | None) -> None:
    """A wrong ``--source`` is one line before the screen opens (it is read when the loader starts)."""
    if source is not None:
        from crdscope.loader.sources import open_source

        open_source(source)


def open_monitor(kubeconfig: str | None = None, context: str | None = None, *, record: RecordChoice = True,
                 prometheus_url: str | None = None, theme: str | None = None, lab: Lab | None = None,
                 source: str | None = None, memory_limit: int | None = None, openapi_v2: bool = False,
                 app_class: Callable[..., CrdscopeApp] | None = None) -> None:
    """Open the monitor on a cluster (the current context by default) and run it until quit;
    ``source`` is what the loader offers to load (default: the configured one)."""
    check_source(source)
    where = log_to_file() or NOT_WRITABLE
    _first_contact(kubeconfig, context)
    app = build_app(kubeconfig, context, record=record, prometheus_url=prometheus_url, theme=theme, lab=lab,
                    source=source, memory_limit=memory_limit, openapi_v2=openapi_v2, app_class=app_class)
    _run(app, where)
    if lab is not None:
        say_lab_still_running(lab)


def _run(app: CrdscopeApp, where: str | Path) -> None:
    """Run the app until quit; then close each cluster's recording and say where it went."""
    try:
        app.run()
    finally:
        for session in app.sessions:
            path = session.close_recorder()
            if path is not None:
                click.echo(f"recorded to {path}", err=True)
    if app.return_code:
        click.echo(f"crdscope: the monitor stopped on an error (details in {where})", err=True)


def open_fleet_monitor(contexts: Sequence[str], *, kubeconfig: str | None = None, compare: bool = False,
                       record: RecordChoice = True, prometheus_url: str | None = None, theme: str | None = None,
                       source: str | None = None, memory_limit: int | None = None,
                       openapi_v2: bool = False) -> None:
    """Open the monitor on several clusters (``--context`` repeated) and run it until quit: the fleet
    screen, or with ``compare`` (``crdscope compare A B``) the two clusters compared."""
    from crdscope.base.errors import CrdscopeError

    check_source(source)
    where = log_to_file() or NOT_WRITABLE
    for context in contexts:
        try:
            _first_contact(kubeconfig, context)
        except CrdscopeError as exc:
            raise exc.about(f"context {context}") from None
    app = build_fleet_app(kubeconfig, contexts, record=record, prometheus_url=prometheus_url, theme=theme,
                          source=source, memory_limit=memory_limit, openapi_v2=openapi_v2, compare=compare)
    _run(app, where)


def say_lab_still_running(lab: Lab) -> None:
    """Quitting the monitor leaves the lab up (loaded CRDs and all): say so, and how to stop it."""
    try:
        running = lab.state() is not None
    except Exception:  # noqa: BLE001 - a reminder must never turn a clean quit into a traceback
        return
    if running:
        down = f"crdscope lab down --name {lab.name}" if lab.name else "crdscope lab down"
        click.echo(f"the lab is still running: {down} stops it", err=True)


def _say(line: str) -> None:
    click.echo(line, err=True)


def _lab_up(name: str, *, kubernetes: str | None = None, options: LabOptions | None = None,
            say: Callable[[str], None] = _say) -> tuple[Lab, LabState]:
    """The lab ``name`` (started when it is not up: Kubernetes ``kubernetes``, the newest by
    default, with ``options``, a ``lab.controlplane.LabOptions``) and its state."""
    from crdscope.lab.binaries import ensure_binaries
    from crdscope.lab.controlplane import Lab

    lab = Lab(name=name)
    state = lab.state()
    if state is None or not lab.status()["ready"]:
        from crdscope.lab.binaries import find_binaries
        from crdscope.lab.buildplan import say_plan

        if find_binaries(kubernetes=kubernetes) is None:
            say_plan(say, (kubernetes,))  # before the build: what it builds and about how long
        binaries = ensure_binaries(kubernetes=kubernetes, progress=say)
        state = lab.up(binaries, say=say, options=options)
    return lab, state


def open_lab_monitor(source: str | None = None, name: str = "") -> None:
    """Start the lab (``name``: a named one) if it is not up, then open the monitor on it with the
    loader ready (loading ``source`` when given, else the configured source)."""
    check_source(source)
    lab, state = _lab_up(name)
    open_monitor(kubeconfig=state.kubeconfig, context=None, lab=lab, source=source)


#: The demo's provider when none is given: the GCP family set beside the checkout (81 packages).
DEFAULT_PROVIDER = "provider-gcp.tar.xz"
#: ... and where there is none (a plain clone): a family crdscope generates (loader/synthetic.py),
#: packaged as ``provider-synthetic`` (75 packages). 800 CRDs, about the GCP set's 817 and of about
#: the same bytes each (30 KB of spec), so that what was measured with that set still holds: the
#: install's stages take about as long (their timeouts), and the fleet demo's cap still separates
#: 1.26 from 1.37 (README: the demo section).
GENERATED_PROVIDER = "synthetic:800"


def default_provider(say: Callable[[str], None] | None = None) -> str:
    """``../shared/crds/provider-gcp.tar.xz`` where the loader finds the shared sets, else
    :data:`GENERATED_PROVIDER` (nothing beside the checkout: a clone has only crdscope), which
    ``say`` announces."""
    from .screens.loader_setup import SHARED_CRD_DIRS

    for folder in SHARED_CRD_DIRS:
        if (folder / DEFAULT_PROVIDER).is_file():
            return str((folder / DEFAULT_PROVIDER).resolve())
    if say is not None:
        say(f"no ../shared/crds/{DEFAULT_PROVIDER} beside the checkout: the provider is {GENERATED_PROVIDER}, "
            "a family crdscope generates (--provider SRC installs another)")
    return GENERATED_PROVIDER


def open_crossplane_demo(provider: str | None = None, name: str = "", source: str | None = None,
                         registry_auth: bool = False) -> None:
    """The demo with a real provider install: the lab with Crossplane, the provider's packages
    built (or taken from the cache) and pushed, then the monitor, which installs them once up."""
    import functools
    import time

    from crdscope.toolchain import crossplane as toolchain_crossplane
    from crdscope.base.errors import LabError
    from crdscope.loader.oci import OciSource
    from crdscope.loader.sources import open_source

    from .crossplane_demo import CrossplaneDemoApp

    check_source(source)
    chosen = open_source(provider or default_provider(_say))  # a one-line error before anything starts
    if isinstance(chosen, OciSource):
        chosen.prepare()  # a package reference: pulled (or read from the cache) before any lab starts
    binaries = toolchain_crossplane.cached_binaries()
    if binaries is None:
        raise LabError("Crossplane is not built: run `crdscope lab build --crossplane` "
                       "(or `make demo CROSSPLANE=1`, which builds it)")
    started = time.monotonic()
    lab, state = _lab_up(name)
    stages = crossplane_install_stages(lab, state, chosen, binaries, registry_auth=registry_auth)
    packages = sum(1 for stage in stages for obj in stage.objects if obj["kind"] == "Provider")
    _say(f"ready in {time.monotonic() - started:.0f}s: the monitor installs {packages} packages "
         "through Crossplane once it is up")
    app_class = functools.partial(CrossplaneDemoApp, stages=stages, server=state.server, pki_dir=str(state.pki_dir))
    open_monitor(kubeconfig=state.kubeconfig, context=None, lab=lab, source=source, app_class=app_class)


def crossplane_install_stages(lab: Lab, state: LabState, provider: Source, binaries: CrossplaneBinaries, *,
                              say: Callable[[str], None] = _say, controllers: bool = True,
                              registry_auth: bool = False) -> list[Stage]:
    """The stages of ``provider``'s install (a ``loader.sources`` source) through the Crossplane of
    ``lab``: Crossplane started there if it is not running (``controllers``: with the Deployment
    controller beside it; ``registry_auth``: its registry asking for credentials), the packages built
    (or taken from the cache) and pushed to the lab's registry (with its credentials, and Crossplane
    pulls with its pull secret); a package reference is named as it is (nothing built)."""
    from crdscope.lab import crossplane
    from crdscope.base.labrecord import lab_registry
    from crdscope.base.labrecord import pid_alive
    from crdscope.loader.crossplane_install import (
        package_name_of, plan_install, plan_reference_install, prepare_packages,
    )
    from crdscope.lab.registry import PULL_SECRET
    from crdscope.loader.oci import OciSource
    from crdscope.loader.registry_auth import named_config

    core = state.components.get("crossplane")
    if core is None or not pid_alive(core.pid):
        # No default MRAP (`--activation none`), rather than upstream's '*': the packages are safe-start,
        # so the install shows each stage of Crossplane v2 (MRDs, Inactive; then an MRAP's CRDs
        # Established) instead of 800 CRDs at once, and the findings can price the kinds left inactive.
        crossplane.start(lab, state, binaries, activations=[], say=say, controllers=controllers,
                         registry_auth=registry_auth)
        lab.start_supervisor(state)
    registry = lab_registry(lab.name)
    secret = PULL_SECRET if state.registry_config else None
    if isinstance(provider, OciSource):  # REGISTRY/REPO:TAG: Crossplane pulls it itself
        return plan_reference_install(provider, secret if provider.reference.host == registry else None)
    packages = prepare_packages(provider, name=package_name_of(provider.spec), registry=registry,
                                crank=binaries.crank, crossplane_version=binaries.cli_version or binaries.version,
                                say=say, config=named_config(state.registry_config) if secret else None)
    return plan_install([p.plan for p in packages], registry, secret)


def attached_sessions(collector: Collector, clusters: Sequence[CollectorCluster], settings: StreamSettings, *,
                      record: str | None = None, loader_settings: LoaderSettings | None = None
                      ) -> list[ClusterSession]:
    """One session per cluster a collector serves, each fed by its stream (no probes, no request to
    any API server), judged by the collector's thresholds; ``record``: recorded there (in a fleet,
    one file per cluster beside it)."""
    from crdscope.base.settings import LoaderSettings
    from crdscope.session.attach import StreamFeed, attach_core, record_core
    from crdscope.session.control import RemoteFaults, RemoteLoader

    from .sessions import ClusterSession

    sessions = []
    for cluster in clusters:
        feed = StreamFeed(collector, cluster, settings)
        core = attach_core(feed)
        recording = record_core(core, cluster, record, fleet=len(clusters) > 1)
        # Read-only unless the collector allows control: then its loader and lab's faults are offered.
        loader = RemoteLoader(collector, cluster.name, core, loader_settings or LoaderSettings()) \
            if settings.allow_control else None
        faults = RemoteFaults(collector, cluster.name) if settings.allow_control else None
        sessions.append(ClusterSession(core, cadences=settings.cadences, origin=feed.describe, recording=recording,
                                       loader=loader, faults=faults))
    return sessions


def open_attached(url: str, token_file: str, *, ca_file: str | None = None, record: str | None = None,
                  theme: str | None = None) -> None:
    """``crdscope attach``: the monitor on a collector's stream until quit (a fleet when it serves
    several clusters)."""
    from crdscope.base.settings import load_settings
    from crdscope.session.attach import open_collector
    from crdscope.session.control import RemoteLoader

    from .app import CrdscopeApp

    collector, clusters, stream = open_collector(url, token_file, ca_file)
    where = log_to_file() or NOT_WRITABLE
    settings = dataclasses.replace(load_settings(), thresholds=stream.thresholds, cadences=stream.cadences)
    sessions = attached_sessions(collector, clusters, stream, record=record, loader_settings=settings.loader)
    app = CrdscopeApp(settings=settings, theme=_theme(theme, settings), sessions=sessions, kubectl=None)
    for session in sessions:
        if isinstance(session.loader, RemoteLoader):
            session.loader.notify = app.notify  # the collector's answers, on screen
    _run(app, where)
