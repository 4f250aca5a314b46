"""Themes: every role in every theme, colours only in themes/, a clear line for a wrong name."""

from __future__ import annotations

import re

import pytest

from crdscope.base.errors import ConfigError
from tests.conftest import ROOT
from crdscope.themes import ROLES, THEME_NAMES, THEMES
from crdscope.tui.app import check_theme

HEX_COLOUR = re.compile(r"#[0-9a-fA-F]{3}(?:[0-9a-fA-F]{3})?\b")


def test_three_themes_define_every_role():
    assert {"crdscope-dark", "crdscope-light", "crdscope-high-contrast"} <= set(THEME_NAMES)
    for theme in THEMES:
        assert set(ROLES) <= set(theme.variables), f"{theme.name} lacks {set(ROLES) - set(theme.variables)}"


def test_no_colour_outside_themes():
    offenders = []
    for path in sorted((ROOT / "tui").rglob("*")):
        if path.suffix in (".py", ".tcss"):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if HEX_COLOUR.search(line.split("//")[0]):
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_every_role_used_in_tcss_exists():
    used = set(re.findall(r"\$([a-z][a-z-]+)", (ROOT / "tui" / "monitor.tcss").read_text()))
    textual_own = {"primary", "secondary", "accent", "foreground", "background", "surface", "panel", "text",
                   "text-muted", "warning", "error", "success"}
    assert used - textual_own <= set(ROLES)


def test_unknown_theme_is_one_clear_line():
    assert check_theme("crdscope-light") == "crdscope-light"
    with pytest.raises(ConfigError) as caught:
        check_theme("neon")
    message = str(caught.value)
    assert "\n" not in message and "neon" in message and "crdscope-dark" in message
