"""Reading sample figures by *name*, defensively, whatever shape a probe chose.

For code that only knows a figure's name at run time: ``--fail-if`` expressions
(``discovery.seconds>5``), the report's generic tables and the exporter's walk
over every field.  A missing field or an unobservable (``None``) figure is
simply "not known" rather than an exception.  Code that knows which sample it
holds reads its attributes instead (a type checker sees those).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any


def read_field(obj: Any, name: str, default: Any = None) -> Any:
    """``obj.name`` for a dataclass/object, ``obj[name]`` for a mapping, else ``default``."""
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def get_path(obj: Any, path: str | list[str] | tuple[str, ...], default: Any = None) -> Any:
    """Follow a dotted path (``"lag_seconds.established.p99"``) through dataclasses and dicts."""
    parts = path.split(".") if isinstance(path, str) else list(path)
    current = obj
    for part in parts:
        current = read_field(current, part, _MISSING)
        if current is _MISSING:
            return default
    return current


def finite_number(value: Any) -> float | None:
    """A finite float from an int/float/bool, else None (strings, None, NaN are not numbers)."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        value = float(value)
        return value if math.isfinite(value) else None
    return None


def count(value: Any) -> float | None:
    """A count from a number, or from a collection's length, or from a nested ``count``/``total``."""
    as_number = finite_number(value)
    if as_number is not None:
        return as_number
    if isinstance(value, (list, tuple)):
        return float(len(value))
    for key in ("count", "total"):
        inner = finite_number(read_field(value, key))
        if inner is not None:
            return inner
    return None


def members(value: Any) -> list[Any]:
    """A tuple/list as a list; a mapping as its values; anything else as no items."""
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, dict):
        return list(value.values())
    return []


def is_record(value: Any) -> bool:
    """True for a dataclass instance or a dict (something with named figures)."""
    return isinstance(value, dict) or (dataclasses.is_dataclass(value) and not isinstance(value, type))


def names_of(value: Any) -> list[str]:
    """Field names of a dataclass instance, or keys of a dict."""
    if isinstance(value, dict):
        return [str(k) for k in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [f.name for f in dataclasses.fields(value)]
    return []


_MISSING = object()
