"""The key footer (``tui/footer.py``): the keys are shown, and focus moving between widgets that
add no key does not rebuild it.  It overrides Textual's ``Footer.bindings_changed``, which sets
the private ``_bindings_ready`` that ``Footer.compose`` waits on: were Textual to rename it, the
footer would stay blank and the first test fails."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.widgets import Button
from textual.widgets._footer import FooterKey  # not exported: the key widgets the footer composes

from crdscope.tui.footer import KeyFooter
from tests.helpers import async_wait_for


class FooterApp(App[None]):
    BINDINGS = [("q", "quit", "Quit"), ("f", "noop", "Findings")]

    def compose(self) -> ComposeResult:
        yield Button("one", id="one")
        yield Button("two", id="two")
        yield KeyFooter()

    def action_noop(self) -> None:
        """A key that does nothing: only its footer entry matters here."""


def shows_the_app_keys(app: App) -> bool:
    return {"Quit", "Findings"} <= {key.description for key in app.screen.query(FooterKey)}


async def test_the_footer_shows_the_screen_keys():
    app = FooterApp()
    async with app.run_test():
        await async_wait_for(lambda: shows_the_app_keys(app), timeout=10,
                             message="the footer to show the app's keys")


async def test_focus_moving_between_widgets_without_keys_does_not_rebuild_it():
    app = FooterApp()
    async with app.run_test() as pilot:
        await async_wait_for(lambda: shows_the_app_keys(app), timeout=10,
                             message="the footer to show the app's keys")
        footer = app.query_one(KeyFooter)
        first = list(app.screen.query(FooterKey))
        for _ in range(4):
            await pilot.press("tab")
            await pilot.pause()
        assert app.focused is not None
        # The same key widgets: no recompose happened while the shown keys stayed the same.
        assert list(app.screen.query(FooterKey)) == first
        assert not footer._look_pending
