"""Durations people type: ``90s``, ``5m``, ``1h30m`` or plain seconds (``--duration``, ``--fail-if ... for 2m``)."""

from __future__ import annotations

import re

from crdscope.base.errors import ConfigError

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str, flag: str = "--duration") -> float:
    """``90s``, ``5m``, ``1h``, ``1h30m``, or plain seconds (``45``) -> seconds; ``flag`` names the
    option in the one-line error."""
    value = str(text).strip().lower()
    try:
        seconds = float(value)
    except ValueError:
        position, seconds = 0, 0.0
        for match in _DURATION_PART.finditer(value):
            if match.start() != position:
                break
            seconds += float(match[1]) * _UNIT_SECONDS[match[2]]
            position = match.end()
        if position != len(value) or not value:
            raise ConfigError(f"{flag} '{text}' is not a duration (e.g. 90s, 5m, 1h, 1h30m)") from None
    if seconds <= 0:
        raise ConfigError(f"{flag} '{text}' must be positive")
    return seconds
