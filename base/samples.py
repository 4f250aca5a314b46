"""The sample contract shared by every probe.

A probe run yields one frozen :class:`Sample`.  Its :meth:`Sample.to_json`
keys are what ``crdscope probe <name> --json`` prints, what the recorder
stores and what ``--fail-if`` expressions name: one definition, three users.
Field names carry units (``seconds``, ``bytes``, ``per_s``).
"""

from __future__ import annotations

import dataclasses
import math
import time
import types
import typing
from typing import Any, ClassVar

#: probe name -> Sample subclass, filled as sample classes are defined (``probes.registry.sample_type``
#: finds a probe's class by the table there and falls back to this for classes defined elsewhere).
SAMPLE_TYPES: dict[str, type[Sample]] = {}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Sample:
    """Base of all probe samples: when it was taken and what went wrong, if anything.

    ``error`` is a one-line message for an expected failure (timeout, 5xx,
    403...); the figures of a failed sample are left at their defaults.
    """

    probe: ClassVar[str] = "sample"
    #: Fields that hold observations even on a failed sample (``error`` set): what the probe
    #: knows about the failure itself (down for how long, restarts so far).  Thresholds read
    #: these on failed samples; every other figure of a failed sample is only a default.
    VALID_ON_ERROR: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("probe")
        if isinstance(name, str):
            SAMPLE_TYPES[name] = cls

    timestamp: float = dataclasses.field(default_factory=time.time)
    error: str | None = None

    @property
    def ok(self) -> bool:
        """True when the probe run succeeded."""
        return self.error is None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict of every field (tuples become lists, NaN becomes null)."""
        return {f.name: to_jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Sample:
        """Rebuild a sample from :meth:`to_json` output (used by replay); unknown keys are ignored."""
        sample: Sample = from_jsonable(cls, data)
        return sample


def to_jsonable(value: Any) -> Any:
    """Convert nested dataclasses, tuples and floats to plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if hasattr(value, "to_json"):
            return value.to_json()
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    return value


def from_jsonable(annotation: Any, value: Any) -> Any:
    """Inverse of :func:`to_jsonable`, guided by type hints.

    Sample fields use only: bool, int, float, str, None-able types, ``tuple[T, ...]``,
    ``dict[str, T]`` and nested frozen dataclasses, so a recorded sample replays equal.
    """
    if value is None:
        return None
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        return from_jsonable(options[0], value) if len(options) == 1 else value
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation) and isinstance(value, dict):
        hints = _hints(annotation)
        names = {f.name for f in dataclasses.fields(annotation) if f.init}
        return annotation(**{k: from_jsonable(hints.get(k), v) for k, v in value.items() if k in names})
    if origin is tuple and isinstance(value, list):
        args = typing.get_args(annotation)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_jsonable(args[0], v) for v in value)
        if args:
            # A recorded tuple of another length (a damaged line) rebuilds what it can.
            return tuple(from_jsonable(a, v) for a, v in zip(args, value, strict=False))
        return tuple(value)
    if origin is dict and isinstance(value, dict):
        args = typing.get_args(annotation)
        inner = args[1] if len(args) == 2 else None
        return {k: from_jsonable(inner, v) for k, v in value.items()}
    if annotation is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, list):
        return tuple(from_jsonable(None, v) for v in value)
    return value


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)  # each class's own module resolves its names
    return _HINTS[cls]


def percentile(values: list[float] | tuple[float, ...], q: float) -> float | None:
    """The q-th percentile (0..100) by linear interpolation; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = math.ceil(rank)
    if low == high:
        return ordered[int(rank)]
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)
