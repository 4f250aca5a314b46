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


@dataclasses.dataclass(frozen=True)
class Figure:
    """What the front ends need to know of a sample's field beyond its name, type and value.

    Declared on the field (``field = figure(0, counter=True)``), read by :func:`figure_of`: the
    exporter names and types its series from it, ``--fail-if`` and the exporter read what a failed
    sample still says.  A field declared with a plain default is a gauge named after itself.
    """

    #: Only ever counts up (Prometheus counter; the exporter's family drops a ``_total`` suffix).
    counter: bool = False
    #: The label naming a ``dict``'s keys or a tuple's records (default: from the field's name).
    label: str | None = None
    #: The field's part of a series name where its own reads wrong (``count`` reads as a histogram's).
    metric: str | None = None
    #: A count inside a record of figures with a unit (``lag_seconds``' ``count``): the enclosing
    #: field's unit (``_seconds``, ``_bytes``) is not this figure's and leaves its name.
    unitless: bool = False
    #: False: not exported (a series per CRD or per event: unbounded cardinality).
    exported: bool = True
    #: Still an observation in a failed sample (what the probe knows of the failure itself:
    #: down for how long, restarts so far); every other figure of a failed sample is a default.
    while_down: bool = False


#: A field without a declaration.
PLAIN = Figure()
_FIGURE = "crdscope.figure"


def figure(default: Any = dataclasses.MISSING, *, default_factory: Any = dataclasses.MISSING,
           counter: bool = False, label: str | None = None, metric: str | None = None,
           unitless: bool = False, exported: bool = True, while_down: bool = False) -> Any:
    """A dataclass field with its :class:`Figure` declaration."""
    spec = Figure(counter=counter, label=label, metric=metric, unitless=unitless, exported=exported,
                  while_down=while_down)
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata={_FIGURE: spec})
    return dataclasses.field(default=default, metadata={_FIGURE: spec})


#: class -> its fields' declarations, read once per class.
_DECLARED: dict[type, dict[str, Figure]] = {}


def figures_of(cls: type) -> dict[str, Figure]:
    """Field name -> its declaration, for a sample or record class (undeclared fields: PLAIN)."""
    found = _DECLARED.get(cls)
    if found is None:
        found = _DECLARED[cls] = {f.name: f.metadata.get(_FIGURE, PLAIN) for f in dataclasses.fields(cls)}
    return found


def figure_of(record: object, name: str) -> Figure:
    """The declaration of field ``name`` of ``record`` (a sample or a nested record)."""
    return figures_of(type(record)).get(name, PLAIN)


#: class -> the fields its failed samples still observe, read once per class.
_WHILE_DOWN: dict[type, frozenset[str]] = {}


def known_while_down(cls: type[Sample]) -> frozenset[str]:
    """The fields a failed sample of ``cls`` still observes (declared ``while_down``); read for every
    failed sample by the exporter and ``--fail-if``, so worked out once per class."""
    found = _WHILE_DOWN.get(cls)
    if found is None:
        found = _WHILE_DOWN[cls] = frozenset(name for name, spec in figures_of(cls).items() if spec.while_down)
    return found


@dataclasses.dataclass(frozen=True, kw_only=True)
class Sample:
    """Base of all probe samples: when it was taken and what went wrong, if anything.

    ``error`` is a one-line message for an expected failure (timeout, 5xx,
    403...); the figures of a failed sample are left at their defaults.
    """

    probe: ClassVar[str] = "sample"
    #: The probe's name in the TUI header's chips at 80 columns (default: its name).
    short_name: ClassVar[str] = ""

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
