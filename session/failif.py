"""``--fail-if`` thresholds: ``<probe>.<field><op><number>``, checked against every sample.

Expressions are validated against the probes' sample dataclasses before
anything runs (an unknown probe or field is a :class:`ConfigError`, exit 2), so a
typo in a CI pipeline fails at once instead of silently never firing.  Field
names are the ``--json`` keys of ``crdscope probe <name>``; a nested figure is
reached with more dots (``latency.p99_by_verb.GET``), and a collection compares
by its size (``health.failing_checks>0``).  ``findings.critical`` (``warning``, ``info``,
``any``) counts open findings that page (an accepted one, ``[[silence]]``, is not counted
until it lapses).  ``... for 2m`` requires the condition to hold that long (every sample
of the probe in between crossing it), so one noisy sample does not fail a job.

While the server does not answer, a probe's samples fail and their figures are unknown, so a
threshold on them cannot cross; the fields a sample declares valid on error
(fields declared ``while_down``: for health ``down``, ``down_seconds``, ``restarts``, ``oom_kills``...)
are read then too, which is what ``--fail-if 'health.down_seconds>30'`` needs.
"""

from __future__ import annotations

import dataclasses
import operator
import re
import types
import typing
from typing import Any
from collections.abc import Callable, Iterable

from crdscope.base.errors import ConfigError
from crdscope.probes.registry import monitor_probes, sample_type
from crdscope.base.samples import Sample, known_while_down

from .values import count, get_path

OPERATORS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
    ">": operator.gt, "<": operator.lt,
}
_COMPARE = r"\s*(?P<op>>=|<=|==|!=|>|<)\s*(?P<number>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$"
_EXPRESSION = re.compile(r"^\s*(?P<probe>[A-Za-z_][\w-]*)\.(?P<path>[A-Za-z_][\w-]*(?:\.[\w-]+)*)" + _COMPARE)
#: A one-shot command's figure: a ``--json`` key, nested ones joined by dots (``memory.held_added_mib``).
_FIGURE_EXPRESSION = re.compile(r"^\s*(?P<path>[A-Za-z_][\w-]*(?:\.[\w-]+)*)" + _COMPARE)


_HOLDING = re.compile(r"^(?P<expression>.*\S)\s+for\s+(?P<duration>\S+)\s*$")
#: ``findings.<severity>``: open findings of that severity (or worse, for ``findings.any``).
FINDINGS = "findings"
FINDING_FIELDS = ("critical", "warning", "info", "any")


@dataclasses.dataclass(frozen=True)
class Threshold:
    """One parsed ``--fail-if`` expression; ``for_seconds`` > 0: it must hold that long."""

    text: str
    probe: str
    path: tuple[str, ...]
    op: str
    limit: float
    for_seconds: float = 0.0

    def holds(self, value: float | None) -> bool:
        """True when an observed value is over the limit (None: not observed, never)."""
        return value is not None and OPERATORS[self.op](value, self.limit)

    @property
    def name(self) -> str:
        return f"{self.probe}.{'.'.join(self.path)}"

    def value(self, sample: Sample) -> float | None:
        """The figure this threshold reads from a sample of its probe (None: not observed)."""
        if type(sample).probe != self.probe:
            return None
        if sample.error and self.path[0] not in known_while_down(type(sample)):
            return None  # a failed sample's figures are defaults, except what it says of the failure
        return count(get_path(sample, self.path))

    def crossed(self, sample: Sample) -> float | None:
        """The observed value when this sample crosses the threshold, else None."""
        value = self.value(sample)
        if value is not None and OPERATORS[self.op](value, self.limit):
            return value
        return None


def parse_threshold(text: str, probes: Iterable[str] | None = None) -> Threshold:
    """Parse and validate one expression; :class:`ConfigError` names what is wrong."""
    for_seconds = 0.0
    holding = _HOLDING.match(text)
    if holding:
        from .durations import parse_duration

        for_seconds = parse_duration(holding["duration"], flag=f"--fail-if '{text}': duration")
    match = _EXPRESSION.match(holding["expression"] if holding else text)
    if not match:
        raise ConfigError(
            f"--fail-if '{text}' is not <probe>.<field><op><number> "
            f"(ops: {' '.join(OPERATORS)}; e.g. 'discovery.seconds>5')"
        )
    known = list(probes if probes is not None else monitor_probes())
    probe = match["probe"]
    if probe == FINDINGS:
        if match["path"] not in FINDING_FIELDS:
            raise ConfigError(f"--fail-if '{text}': findings has no field '{match['path']}' "
                              f"(fields: {', '.join(FINDING_FIELDS)})")
        return Threshold(text=text.strip(), probe=FINDINGS, path=(match["path"],), op=match["op"],
                         limit=float(match["number"]), for_seconds=for_seconds)
    if probe not in known:
        raise ConfigError(f"--fail-if '{text}': unknown probe '{probe}' (probes: {', '.join(known)})")
    cls = sample_type(probe)
    if cls is Sample:
        raise ConfigError(f"--fail-if '{text}': probe '{probe}' is not available in this build")
    path = _check_path(text, probe, cls, tuple(match["path"].split(".")))
    return Threshold(text=text.strip(), probe=probe, path=path, op=match["op"], limit=float(match["number"]),
                     for_seconds=for_seconds)


@dataclasses.dataclass(frozen=True)
class Comparison:
    """One ``--fail-if`` on a one-shot command's own figures (``estimate``, ``mrap``): the same
    operators and numbers as a watch's thresholds, on a ``--json`` key instead of a probe's field."""

    text: str
    path: tuple[str, ...]
    op: str
    limit: float

    @property
    def name(self) -> str:
        return ".".join(self.path)

    def holds(self, value: float) -> bool:
        return OPERATORS[self.op](value, self.limit)


def parse_comparison(text: str, example: str) -> Comparison:
    """Parse ``<figure><op><number>``; :class:`ConfigError` (exit 2) names what is wrong.  A one-shot
    command's figures are read once, so ``for DURATION`` is refused, not ignored."""
    if _HOLDING.match(text):
        raise ConfigError(f"--fail-if '{text}': 'for DURATION' is for watch --headless; this command's figures "
                          "are computed once")
    match = _FIGURE_EXPRESSION.match(text)
    if not match:
        raise ConfigError(f"--fail-if '{text}' is not <figure><op><number> (ops: {' '.join(OPERATORS)}; "
                          f"e.g. '{example}')")
    return Comparison(text=text.strip(), path=tuple(match["path"].split(".")), op=match["op"],
                      limit=float(match["number"]))


class Holding:
    """Thresholds with ``for DURATION``: crossed once the condition held, sample after sample, that long.

    A sample of the threshold's probe that does not cross it starts the wait over; a sample
    of another probe (or a failed one) neither starts nor breaks it.
    """

    def __init__(self) -> None:
        self._since: dict[Threshold, float] = {}

    def crossed(self, threshold: Threshold, value: float | None, timestamp: float) -> float | None:
        """The value when the threshold has now held for its duration, else None."""
        if value is None:
            return None
        if not threshold.holds(value):
            self._since.pop(threshold, None)
            return None
        since = self._since.setdefault(threshold, timestamp)
        return value if timestamp - since >= threshold.for_seconds else None


def parse_thresholds(texts: Iterable[str], probes: Iterable[str] | None = None) -> list[Threshold]:
    """Parse every ``--fail-if`` (all errors are found before anything runs)."""
    return [parse_threshold(text, probes) for text in texts]


def _check_path(text: str, probe: str, cls: type, path: tuple[str, ...]) -> tuple[str, ...]:
    """Walk the dataclass type hints along ``path``; the leaf must be a number or a collection.

    Returns the path with dict keys as single segments: a key may contain dots
    (``storage_objects_top.customresourcedefinitions.apiextensions.k8s.io``) when the
    dict's values are figures, so the rest of the path is that key.
    """
    annotation: Any = cls
    walked = probe
    resolved: list[str] = []
    index = 0
    while index < len(path):
        part = path[index]
        annotation = _strip_optional(annotation)
        if dataclasses.is_dataclass(annotation):
            hints = typing.get_type_hints(annotation)
            names = [f.name for f in dataclasses.fields(annotation) if f.name != "error"]
            if part not in names:
                raise ConfigError(f"--fail-if '{text}': {walked} has no field '{part}' "
                                  f"(fields: {', '.join(names)})")
            annotation = hints.get(part, Any)
        elif typing.get_origin(annotation) is dict:
            args = typing.get_args(annotation)
            annotation = _strip_optional(args[1]) if len(args) == 2 else Any
            if not (dataclasses.is_dataclass(annotation) or typing.get_origin(annotation) is dict):
                part = ".".join(path[index:])  # figures keyed by names that may hold dots
                index = len(path) - 1
        elif annotation is Any:
            return (*resolved, *path[index:])  # untyped: checked when samples arrive
        else:
            raise ConfigError(f"--fail-if '{text}': {walked} is not a record ('{part}' cannot follow it)")
        resolved.append(part)
        walked = f"{walked}.{part}"
        index += 1
    if _strip_optional(annotation) is str:
        raise ConfigError(f"--fail-if '{text}': {walked} is text, not a number")
    return tuple(resolved)


def _strip_optional(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(options) == 1:
            return options[0]
    return annotation
