"""The loader from the keyboard and the palette: start, pause, resume, stop, clean.

``app.session.loader`` is a :class:`session.loader_control.LoaderHandle` (None in a
replay).  Network work (the load itself, counting what clean would delete,
deleting) runs in async workers; clean asks first, in a modal, as
``crdscope clean`` does on the command line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from collections.abc import Callable

from .screens.dialogs import ChoiceScreen, ConfirmScreen

if TYPE_CHECKING:
    from crdscope.loader.safety import CleanPlan

    from .host import MonitorHost
    from crdscope.session.loader_control import LoaderHandle

NO_LOADER = "no loader here: a replay cannot load, nor a viewer of a read-only collector (its --allow-control)"

#: action -> (palette name, help)
ACTIONS = {
    "start": ("Loader: start", "choose what to load and at what pace, then load it"),
    "pause": ("Loader: pause", "stop sending CRDs; what was sent keeps establishing"),
    "resume": ("Loader: resume", "go on where the load paused"),
    "stop": ("Loader: stop", "end the load, keeping a consistent record of what was applied"),
    "clean": ("Loader: clean", "delete the CRDs crdscope created (asks first)"),
}


def available(app: MonitorHost) -> list[str]:
    """The loader actions that make sense now."""
    loader = app.session.loader
    if loader is None:
        return []
    return available_for(loader)


def available_for(loader: LoaderHandle) -> list[str]:
    """The actions that make sense now for one loader control."""
    state = loader.state
    if state == "running":
        return ["pause", "stop"]
    if state == "paused":
        return ["resume", "stop"]
    if state == "stopping":
        return []
    return ["start", "clean"]


def run_action(app: MonitorHost, action: str) -> None:
    """Do one loader action (from the menu or the palette)."""
    loader = app.session.loader
    if loader is None:
        app.notify(NO_LOADER, severity="warning")
        return
    if action not in available(app):
        app.notify(f"the loader is {loader.state}: cannot {action}", severity="warning")
        return
    if action == "start":
        _set_up_and_start(app, [loader])
    elif action == "pause":
        loader.pause()
        app.notify("loader paused")
    elif action == "resume":
        loader.resume()
        app.notify("loader resumed")
    elif action == "stop":
        loader.stop()
        app.notify("loader stopping")
    elif action == "clean":
        app.run_worker(_clean(app, loader), name="loader-clean", group="loader", exit_on_error=False)


def _set_up_and_start(app: MonitorHost, loaders: list[LoaderHandle]) -> None:
    """Ask what to load and how (source, profile, rate, concurrency), show what the run will do,
    then start it (in each of ``loaders``: the same source at the same pace); cancelling writes
    nothing."""
    from .screens.loader_setup import LoadChoice, LoaderSetupScreen

    chosen_loaders = loaders
    first = chosen_loaders[0]
    current = LoadChoice(first.source, first.settings.profile, first.settings.rate, first.settings.concurrency)

    def chosen(choice: LoadChoice | None) -> None:
        if choice is None:
            app.notify("loader not started")
            return
        for loader in chosen_loaders:
            loader.configure(choice.source, choice.profile, choice.rate, choice.concurrency)
            app.run_worker(loader.run(), name="loader", group="loader", exit_on_error=False)
        where = f" into {len(chosen_loaders)} clusters" if len(chosen_loaders) > 1 else ""
        app.notify(f"loader started{where}: {choice.source}")

    app.push_screen(LoaderSetupScreen(current), chosen)


def load_everywhere(app: MonitorHost) -> None:
    """The fleet screen's ``l``: the same source into every cluster at the same pace (asked once,
    in the loader's set-up dialog); while loads run, pause, resume or stop them all."""
    loaders = [session.loader for session in app.sessions if session.loader is not None]
    if not loaders:
        app.notify(NO_LOADER, severity="warning")
        return
    states = {loader.state for loader in loaders}
    if states <= {"idle", "stopped", "done"}:
        _set_up_and_start(app, loaders)
        return
    actions = [action for action in ("pause", "resume", "stop")
               if any(action in available_for(loader) for loader in loaders)]
    if not actions:
        app.notify(f"the loaders are {', '.join(sorted(states))}; try again in a moment", severity="warning")
        return
    choices = [(action, f"{action.capitalize()} every cluster's load") for action in actions]

    def chosen(action: str | None) -> None:
        if not action:
            return
        for loader in loaders:
            if action in available_for(loader):
                getattr(loader, action)()
        app.notify(f"loaders: {action} sent to every cluster")

    app.push_screen(ChoiceScreen(f"Loaders of {len(loaders)} clusters", choices,
                                 note=", ".join(sorted(states))), chosen)


async def _clean(app: MonitorHost, loader: LoaderHandle) -> None:
    try:
        plan = await loader.clean_plan()
    except Exception as exc:  # noqa: BLE001 - CrdscopeError and network failures: one line
        app.notify(f"clean: {exc}", severity="error")
        return
    if not plan.names:
        app.notify("clean: no CRD carries crdscope's label; nothing to delete")
        return

    async def confirmed(yes: bool | None) -> None:
        if not yes:
            app.notify("clean cancelled: nothing deleted")
            return
        app.run_worker(_delete(app, loader, plan), name="loader-delete", group="loader", exit_on_error=False)

    app.push_screen(ConfirmScreen(plan.question, yes="Delete", no="Keep"), confirmed)


async def _delete(app: MonitorHost, loader: LoaderHandle, plan: CleanPlan) -> None:
    try:
        message = await loader.clean(plan)
    except Exception as exc:  # noqa: BLE001
        app.notify(f"clean: {exc}", severity="error")
        return
    app.notify(message, timeout=8)


def open_loader_menu(app: MonitorHost) -> None:
    """The ``l`` key: a small menu of what the loader can do now."""
    loader = app.session.loader
    if loader is None:
        app.notify(NO_LOADER, severity="warning")
        return
    choices = [(action, ACTIONS[action][0].split(": ", 1)[1].capitalize() + ": " + ACTIONS[action][1])
               for action in available(app)]
    if not choices:
        app.notify(f"the loader is {loader.state}; try again in a moment", severity="warning")
        return
    note = f"source {loader.source} · {loader.describe()}"

    def chosen(action: str | None) -> None:
        if action:
            run_action(app, action)

    app.push_screen(ChoiceScreen(f"Loader ({loader.state})", choices, note=note), chosen)


def loader_commands(app: MonitorHost) -> list[tuple[str, str, Callable[[], None]]]:
    """Palette entries for the loader actions available now."""
    def runner(action: str) -> Callable[[], None]:
        return lambda: run_action(app, action)

    return [(ACTIONS[action][0], ACTIONS[action][1], runner(action)) for action in available(app)]
