"""Short, unit-bearing text for figures on screen (widths matter at 80 columns)."""

from __future__ import annotations

import math
from typing_extensions import TypeIs

DASH = "—"
MIB = 1024 * 1024


def missing(value: float | None) -> TypeIs[None]:
    """True for None and NaN: values that render as a dash (after it, a type checker knows a number)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def age(seconds: float | None) -> str:
    """``4s``, ``3m05s``, ``2h07m``."""
    if missing(seconds):
        return DASH
    seconds = max(0.0, float(seconds))
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        minutes, rest = divmod(int(seconds), 60)
        return f"{minutes}m{rest:02d}s"
    hours, rest = divmod(int(seconds), 3600)
    return f"{hours}h{rest // 60:02d}m"


def duration(seconds: float | None) -> str:
    """A latency: ``850µs``, ``42ms``, ``1.25s``, ``3m05s``."""
    if missing(seconds):
        return DASH
    seconds = float(seconds)
    if seconds == 0:
        return "0s"
    if seconds < 0.001:
        return f"{seconds * 1e6:.0f}µs"
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.2f}s"
    return age(seconds)


def size(count: float | None) -> str:
    """Bytes: ``812B``, ``14.2KiB``, ``3.1MiB``, ``1.20GiB``."""
    if missing(count):
        return DASH
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            break
        value /= 1024
    if unit == "B":
        return f"{value:.0f}B"
    return f"{value:.1f}{unit}" if abs(value) < 100 else f"{value:.0f}{unit}"


def number(value: float | int | None, digits: int = 0) -> str:
    """A count or figure with thousands separators; a dash when missing."""
    if missing(value):
        return DASH
    if digits == 0:
        return f"{round(float(value)):,}"
    return f"{float(value):,.{digits}f}"


def rate(per_s: float | None, unit: str = "/s") -> str:
    """A rate with a sensible precision."""
    if missing(per_s):
        return DASH
    per_s = float(per_s)
    return f"{per_s:.1f}{unit}" if per_s < 100 else f"{per_s:.0f}{unit}"


def escape(text: str) -> str:
    """Text from a server or a user, as markup that shows it as it is: every ``[`` escaped.

    Textual's own ``escape`` escapes only what looks like a tag, and leaves an unclosed ``[`` (an MRAP
    pattern such as ``[bad``, quoted in a finding's title) for the parser, which then fails on the
    next ``[/]`` of the line.
    """
    return text.replace("[", "\\[")
