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
from typing import Any, ClassVar


@dataclasses.dataclass(frozen=True, kw_only=True)
class Sample:
    """Base of all probe samples: when it was taken and what went wrong, if anything.

    ``error`` is a one-line message for an expected failure (timeout, 5xx,
    403...); the figures of a failed sample are left at their defaults.
    """

    probe: ClassVar[str] = "sample"

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
        """Rebuild a sample from :meth:`to_json` output (used by replay)."""
        names = {f.name: f for f in dataclasses.fields(cls)}
        kwargs = {k: from_jsonable(names[k].type, v) for k, v in data.items() if k in names}
        return cls(**kwargs)


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
    """Inverse of :func:`to_jsonable` for the shapes samples use: lists become tuples."""
    if isinstance(value, list):
        return tuple(from_jsonable(None, v) for v in value)
    return value


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
