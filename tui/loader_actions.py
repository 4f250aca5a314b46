"""The loader from the keyboard and the palette: start, pause, resume, stop, clean.

``app.loader`` is a :class:`tui.loader_control.LoaderControl` (None in a
replay).  Network work (the load itself, counting what clean would delete,
deleting) runs in async workers; clean asks first, in a modal, as
``crdscope clean`` does on the command line.
"""

from __future__ import annotations

from typing import Any
from collections.abc import Callable

from .screens.dialogs import ChoiceScreen, ConfirmScreen

#: action -> (palette name, help)
ACTIONS = {
    "start": ("Loader: start", "choose what to load and at what pace, then load it"),
    "pause": ("Loader: pause", "stop sending CRDs; what was sent keeps establishing"),
    "resume": ("Loader: resume", "go on where the load paused"),
    "stop": ("Loader: stop", "end the load, keeping a consistent record of what was applied"),
    "clean": ("Loader: clean", "delete the CRDs crdscope created (asks first)"),
}


def available(app: Any) -> list[str]:
    """The loader actions that make sense now."""
    loader = app.loader
    if loader is None:
        return []
    state = loader.state
    if state == "running":
        return ["pause", "stop"]
    if state == "paused":
        return ["resume", "stop"]
    if state == "stopping":
        return []
    return ["start", "clean"]


def run_action(app: Any, action: str) -> None:
    """Do one loader action (from the menu or the palette)."""
    loader = app.loader
    if loader is None:
        app.notify("no loader here (replays cannot load)", severity="warning")
        return
    if action not in available(app):
        app.notify(f"the loader is {loader.state}: cannot {action}", severity="warning")
        return
    if action == "start":
        _set_up_and_start(app)
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
        app.run_worker(_clean(app), name="loader-clean", group="loader", exit_on_error=False)


def _set_up_and_start(app: Any) -> None:
    """Ask what to load and how (source, profile, rate, concurrency), show what the run will do,
    then start it; cancelling writes nothing."""
    from .screens.loader_setup import LoadChoice, LoaderSetupScreen

    loader = app.loader
    current = LoadChoice(loader.source, loader.settings.profile, loader.settings.rate, loader.settings.concurrency)

    def chosen(choice: LoadChoice | None) -> None:
        if choice is None:
            app.notify("loader not started")
            return
        loader.configure(choice.source, choice.profile, choice.rate, choice.concurrency)
        app.run_worker(loader.run(), name="loader", group="loader", exit_on_error=False)
        app.notify(f"loader started: {loader.source}")

    app.push_screen(LoaderSetupScreen(current), chosen)


async def _clean(app: Any) -> None:
    loader = app.loader
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
        app.run_worker(_delete(app, plan), name="loader-delete", group="loader", exit_on_error=False)

    app.push_screen(ConfirmScreen(plan.question, yes="Delete", no="Keep"), confirmed)


async def _delete(app: Any, plan: Any) -> None:
    try:
        message = await app.loader.clean(plan)
    except Exception as exc:  # noqa: BLE001
        app.notify(f"clean: {exc}", severity="error")
        return
    app.notify(message, timeout=8)


def open_loader_menu(app: Any) -> None:
    """The ``l`` key: a small menu of what the loader can do now."""
    loader = app.loader
    if loader is None:
        app.notify("no loader here (replays cannot load)", severity="warning")
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


def loader_commands(app: Any) -> list[tuple[str, str, Callable[[], None]]]:
    """Palette entries for the loader actions available now."""
    def runner(action: str) -> Callable[[], None]:
        return lambda: run_action(app, action)

    return [(ACTIONS[action][0], ACTIONS[action][1], runner(action)) for action in available(app)]
