"""Driving the loader's dialogs on the lab with Textual's Pilot: pick a choice, count the CRDs it owns."""

from __future__ import annotations

from tests.helpers import async_wait_for

OWNED = "app.kubernetes.io/managed-by=crdscope"


def owned_crds(handle) -> int:
    return len(handle.kubectl_json("get", "crd", "-l", OWNED)["items"])


async def choose(pilot, screen_type, label_start: str) -> None:
    """Pick the option of a ChoiceScreen whose label starts with ``label_start``."""
    await async_wait_for(lambda: isinstance(pilot.app.screen, screen_type), timeout=10, message="the dialog")
    options = pilot.app.screen.query_one("#choices")
    index = next(i for i in range(options.option_count)
                 if str(options.get_option_at_index(i).prompt).startswith(label_start))
    options.highlighted = index
    await pilot.press("enter")
