"""crdscope's Textual themes: the only place in the project that names colours.

Every other module refers to colours by role through theme variables
(``$probe-ok`` in tcss, ``[$probe-warn]...[/]`` in markup, ``role_color("plot-fit")``
for plots), so a theme change recolours everything at once.
"""

from __future__ import annotations

from textual.theme import Theme

#: Role-named variables every crdscope theme defines (and their meaning).
ROLES: dict[str, str] = {
    "probe-ok": "a probe or figure that is fine",
    "probe-warn": "over a warning threshold, or stale",
    "probe-fail": "failing: errors, outages, SLO breaches",
    "probe-idle": "no data yet, or paused",
    "loader-progress": "the loader's progress bar",
    "plot-memory": "resident memory (plots)",
    "plot-heap": "heap memory (plots)",
    "plot-fit": "the fitted MiB-per-CRD line",
    "plot-aggregated": "aggregated discovery latency",
    "plot-legacy": "legacy discovery latency",
    "plot-canary": "canary request p99",
    "plot-slo": "latency SLO lines",
    "plot-outage": "restarts and outage windows",
    "plot-backlog": "OpenAPI publication backlog",
}

DARK = Theme(
    name="crdscope-dark",
    primary="#4a9fe0",
    secondary="#2e6a99",
    accent="#f0a030",
    warning="#f0a030",
    error="#e0505a",
    success="#50c070",
    foreground="#dcdcdc",
    background="#121418",
    surface="#1a1d23",
    panel="#23272f",
    dark=True,
    variables={
        "probe-ok": "#50c070",
        "probe-warn": "#f0a030",
        "probe-fail": "#ff5a64",
        "probe-idle": "#8a8f98",
        "loader-progress": "#4a9fe0",
        "plot-memory": "#4a9fe0",
        "plot-heap": "#a070e0",
        "plot-fit": "#f0a030",
        "plot-aggregated": "#50c0c0",
        "plot-legacy": "#e070b0",
        "plot-canary": "#50c070",
        "plot-slo": "#e0505a",
        "plot-outage": "#ff5a64",
        "plot-backlog": "#f0d050",
    },
)

LIGHT = Theme(
    name="crdscope-light",
    primary="#1f5fa8",
    secondary="#3d7cc0",
    accent="#b85c00",
    warning="#a85a00",
    error="#b3202a",
    success="#1f7a3a",
    foreground="#1c1e21",
    background="#f7f7f5",
    surface="#ededea",
    panel="#e0e0dc",
    dark=False,
    variables={
        "probe-ok": "#1f7a3a",
        "probe-warn": "#a85a00",
        "probe-fail": "#b3202a",
        "probe-idle": "#6a6e75",
        "loader-progress": "#1f5fa8",
        "plot-memory": "#1f5fa8",
        "plot-heap": "#6a3fb0",
        "plot-fit": "#b85c00",
        "plot-aggregated": "#00787a",
        "plot-legacy": "#a0306e",
        "plot-canary": "#1f7a3a",
        "plot-slo": "#b3202a",
        "plot-outage": "#b3202a",
        "plot-backlog": "#8a6d00",
    },
)

HIGH_CONTRAST = Theme(
    name="crdscope-high-contrast",
    primary="#00ffff",
    secondary="#ffffff",
    accent="#ffff00",
    warning="#ffff00",
    error="#ff3030",
    success="#00ff00",
    foreground="#ffffff",
    background="#000000",
    surface="#000000",
    panel="#1a1a1a",
    dark=True,
    luminosity_spread=0.3,
    text_alpha=1.0,
    variables={
        "probe-ok": "#00ff00",
        "probe-warn": "#ffff00",
        "probe-fail": "#ff3030",
        "probe-idle": "#c0c0c0",
        "loader-progress": "#00ffff",
        "plot-memory": "#00ffff",
        "plot-heap": "#ff00ff",
        "plot-fit": "#ffff00",
        "plot-aggregated": "#00ffff",
        "plot-legacy": "#ff00ff",
        "plot-canary": "#00ff00",
        "plot-slo": "#ff3030",
        "plot-outage": "#ff3030",
        "plot-backlog": "#ffff00",
    },
)

#: Every crdscope theme, in the order ``t`` cycles through them.
THEMES: tuple[Theme, ...] = (DARK, LIGHT, HIGH_CONTRAST)
THEME_NAMES: tuple[str, ...] = tuple(theme.name for theme in THEMES)
DEFAULT_THEME = DARK.name


def role_defaults() -> dict[str, str]:
    """Role variables for themes that do not define them (Textual's built-in ones)."""
    return dict(DARK.variables)
