"""The sample contract shared by every probe.

A probe run yields one frozen :class:`Sample`.  Its :meth:`Sample.to_json`
keys are what ``crdscope probe <name> --json`` prints, what the recorder
stores and what ``--fail-if`` expressions name: one definition, three users.
Field names carry units (``seconds``, ``bytes``, ``per_s``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import math
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

import msgspec

#: probe name -> Sample subclass, filled as sample classes are defined (``probes.registry.sample_type``
#: finds a probe's class by the table there and falls back to this for classes defined elsewhere).
SAMPLE_TYPES: dict[str, type[Sample]] = {}

log = logging.getLogger("crdscope.scheduler")


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
        """A JSON-ready dict of every field, in declaration order (tuples become lists, NaN and
        infinities become null), as msgspec encodes it.  The recorder writes that same encoding
        straight to its lines, without this dict (``session.recorder.sample_line``)."""
        data: dict[str, Any] = _DECODER.decode(_ENCODER.encode(self))
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Sample:
        """Rebuild a sample from :meth:`to_json` output (replay), with msgspec's conversion.

        Unknown keys (a later version's fields) are ignored, and a null in a field that cannot
        be None (a NaN figure is recorded as null) leaves that field at its default.  Anything
        else that does not fit (a damaged line) is a :class:`ValueError`: replay stops there.
        """
        fields = dict(data)
        while True:
            try:
                sample: Sample = msgspec.convert(fields, cls, strict=False)
                return sample
            except msgspec.ValidationError as exc:
                field = _field_of(str(exc))
                # Replay orders and seeks by the time: a sample without one cannot be placed.
                if field is None or fields.get(field, 0) is not None or field == "timestamp":
                    raise ValueError(f"not a {cls.__name__}: {exc}") from None
                del fields[field]


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder()
#: The top-level field a validation error is about, when the error is about that field itself
#: (``Expected `float`, got `null` - at `$.ratio```), not about something inside it.
_ERROR_PATH = re.compile(r"at `\$\.([A-Za-z0-9_]+)`")


def _field_of(message: str) -> str | None:
    match = _ERROR_PATH.search(message)
    return match.group(1) if match else None


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


#: What takes samples (the core, a recorder, a test): sync or async.
Sink = Callable[[Sample], Awaitable[None] | None]


async def deliver(sinks: list[Sink], sample: Sample) -> None:
    """Hand a sample to every sink (sync or async); a failing sink is logged, never fatal.

    Shared by the scheduler and by replay (``session.replay.ReplayFeed``).
    """
    for sink in list(sinks):
        try:
            result = sink(sample)
            if inspect.isawaitable(result):
                await result
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("sink %r failed on a %s sample", sink, type(sample).__name__)
