"""Modal dialogs: a yes/no confirmation and a menu of choices (the loader's actions)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, OptionList, Static
from textual.widgets.option_list import Option


class ConfirmScreen(ModalScreen[bool]):
    """Ask a yes/no question; dismisses with True only on an explicit yes."""

    BINDINGS = [Binding("y", "answer(True)", "Yes"), Binding("n,escape", "answer(False)", "No")]

    def __init__(self, question: str, *, yes: str = "Yes", no: str = "No") -> None:
        super().__init__(classes="dialog-screen")
        self.question = question
        self.yes_label = yes
        self.no_label = no

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(self.question, classes="dialog-question", markup=False)
            with Horizontal(classes="dialog-buttons"):
                yield Button(f"{self.yes_label} (y)", id="yes", variant="error")
                yield Button(f"{self.no_label} (n)", id="no", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()  # the safe answer is the default

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)


class ChoiceScreen(ModalScreen[str | None]):
    """Pick one of a few actions (``(id, label)``); escape picks nothing."""

    BINDINGS = [Binding("escape", "dismiss_none", "Close")]

    def __init__(self, title: str, choices: list[tuple[str, str]], *, note: str = "") -> None:
        super().__init__(classes="dialog-screen")
        self.title_text = title
        self.choices = choices
        self.note = note

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(self.title_text, classes="dialog-title", markup=False)
            if self.note:
                yield Static(self.note, classes="dialog-note", markup=False)
            yield OptionList(*(Option(label, id=key) for key, label in self.choices), id="choices")

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option.id)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
