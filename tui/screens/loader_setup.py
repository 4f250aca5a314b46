"""The loader's set-up dialog: what to load and at what pace, and what that run will do.

Opened by "Loader: start".  Source (typed, or picked from the CRD sets found in
``../shared/crds``), profile, rate and concurrency can be changed; below them the
dialog says what the run will do (how many CRDs, at what pace, about how long)
before anything is written.  Counting a source reads it (an archive is
decompressed), so it runs in a worker thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Static

from crdscope.base.samples.loader import PROFILES

from ..format import age

#: Folders holding real CRD sets (``*.tar.xz``), beside the checkout or the working directory.
SHARED_CRD_DIRS = (Path(__file__).resolve().parents[3] / "shared" / "crds", Path("..") / "shared" / "crds")


@dataclasses.dataclass(frozen=True)
class LoadChoice:
    """What the user chose to load, and how."""

    source: str
    profile: str
    rate: float
    concurrency: int


def shared_sets() -> list[str]:
    """The CRD set archives found in the shared folder (paths as the loader takes them)."""
    for folder in SHARED_CRD_DIRS:
        if folder.is_dir():
            return [str(path.resolve()) for path in sorted(folder.glob("*.tar*"))]
    return []


def count_source(spec: str) -> int | None:
    """How many CRDs ``spec`` holds (None: unknown until read); raises CrdscopeError on a bad spec."""
    from crdscope.loader.sources import open_source

    source = open_source(spec)
    source.prepare()
    return None if source.estimate is None else int(source.estimate)


def describe_plan(count: int | None, profile: str, rate: float, concurrency: int) -> str:
    """What a run will do, in one sentence."""
    how_many = "an unknown number of" if count is None else f"{count:,}"
    if profile == "burst":
        return (f"Will apply {how_many} CRDs all at once, {concurrency} in flight: as fast as the server "
                "takes them (a provider install). Each one is then Established in its own time.")
    sending = f", about {age(count / rate)} of sending" if count else ""
    return (f"Will apply {how_many} CRDs at {rate:g} per second, at most {concurrency} in flight{sending}. "
            "Each one is then Established in its own time.")


class LoaderSetupScreen(ModalScreen[LoadChoice | None]):
    """Choose source, profile, rate and concurrency; start or cancel."""

    BINDINGS = [Binding("escape", "cancel", "Cancel"), Binding("ctrl+s", "start", "Start")]

    def __init__(self, choice: LoadChoice) -> None:
        super().__init__(classes="dialog-screen")
        self.choice = choice
        self.count: int | None = None
        self.problem: str | None = None

    def compose(self) -> ComposeResult:
        sets = shared_sets()
        with Vertical(classes="dialog loader-setup"):
            yield Static("Load CRDs", classes="dialog-title")
            yield Label("Source (a directory, an archive, a YAML file, synthetic:N)")
            yield Input(self.choice.source, id="source")
            if sets:
                yield Select([(Path(s).name, s) for s in sets], prompt="or a CRD set from shared/crds",
                             id="sets", allow_blank=True)
            # Labels over the fields: "20" and "8" alone do not say rate and concurrency.
            with Horizontal(classes="loader-setup-row loader-setup-labels"):
                yield Label("Profile", classes="profile-label")
                yield Label("CRDs per second")
                yield Label("Applies in flight")
            with Horizontal(classes="loader-setup-row"):
                yield Select([(p, p) for p in PROFILES], value=self.choice.profile, allow_blank=False,
                             id="profile")
                yield Input(f"{self.choice.rate:g}", id="rate", type="number", placeholder="CRDs/s")
                yield Input(str(self.choice.concurrency), id="concurrency", type="integer",
                            placeholder="in flight")
            yield Static("", id="plan", classes="dialog-note", markup=False)
            with Horizontal(classes="dialog-buttons"):
                yield Button("Start (ctrl+s)", id="start", variant="primary")
                yield Button("Cancel (esc)", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#start", Button).focus()
        self._count(self.choice.source)

    # -- reading the form ----------------------------------------------------------------
    def read(self) -> LoadChoice | str:
        """The choice in the form, or what is wrong with it (one line)."""
        source = self.query_one("#source", Input).value.strip()
        profile = str(self.query_one("#profile", Select).value)
        try:
            rate = float(self.query_one("#rate", Input).value)
            concurrency = int(self.query_one("#concurrency", Input).value)
        except ValueError:
            return "rate and concurrency must be numbers"
        if not source:
            return "no source"
        if profile == "steady" and rate <= 0:
            return "the rate must be above 0 CRDs per second"
        if concurrency < 1:
            return "at least 1 apply in flight"
        return LoadChoice(source, profile, rate, concurrency)

    def _show_plan(self) -> None:
        choice = self.read()
        plan = self.query_one("#plan", Static)
        start = self.query_one("#start", Button)
        if isinstance(choice, str) or self.problem:
            plan.update(f"Cannot start: {self.problem or choice}")
            start.disabled = True
            return
        start.disabled = False
        plan.update(describe_plan(self.count, choice.profile, choice.rate, choice.concurrency))

    def _count(self, spec: str) -> None:
        self.query_one("#plan", Static).update(f"Reading {spec} to count its CRDs...")
        self.run_worker(self._count_in_thread(spec), group="count", exclusive=True)

    async def _count_in_thread(self, spec: str) -> None:
        from crdscope.base.errors import CrdscopeError

        try:
            count = await asyncio.to_thread(count_source, spec)
        except CrdscopeError as exc:
            self.count, self.problem = None, str(exc)
        except OSError as exc:
            self.count, self.problem = None, f"{spec}: {exc.strerror or exc}"
        else:
            self.count, self.problem = count, None
        if self.query_one("#source", Input).value.strip() == spec:
            self._show_plan()

    # -- events --------------------------------------------------------------------------
    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "source":
            self._count(event.value.strip())
        else:
            self._show_plan()

    def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id == "sets" and isinstance(event.value, str):
            self.query_one("#source", Input).value = event.value  # counted by on_input_changed
        else:
            self._show_plan()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "start":
            self.action_start()
        else:
            self.action_cancel()

    def action_start(self) -> None:
        choice = self.read()
        if isinstance(choice, LoadChoice) and not self.problem:
            self._close(choice)

    def action_cancel(self) -> None:
        self._close(None)

    def _close(self, answer: LoadChoice | None) -> None:
        # A count still in its thread must not resume into a dialog being taken apart: Textual
        # removes the children before the screen unmounts and cancels its workers, so a count
        # finishing in between found no #plan and took the app down with it.
        self.workers.cancel_group(self, "count")
        self.dismiss(answer)
