"""``--fail-if`` on a one-shot command's own figures: ``estimate`` and ``mrap`` gate an upgrade in a pipeline.

An expression is ``<figure><op><number>``, with the operators and numbers of ``watch --headless
--fail-if`` (:func:`crdscope.session.failif.parse_comparison`); the figure is a key of the command's
``--json`` output, nested keys joined by dots (``memory.held_added_mib``, ``crds_added``).  An
interval (``{value, low, high}``) compares by its value (``.high`` names its upper bound), a list by
its length.  The syntax is checked before anything is read, the names against the output before
anything is printed: an unknown key, a record, a text or a figure this run did not produce (null) is
one line and exit 2.  A crossed gate is one line after the output, and exit 1.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from crdscope.base.errors import ConfigError, CrdscopeError

if TYPE_CHECKING:
    from crdscope.session.failif import Comparison

#: The keys of an interval in ``--json``: compared by its value unless a bound is named.
INTERVAL_KEYS = frozenset({"value", "low", "high"})
#: Keys listed in an error naming the figures a record has (the rest are counted).
LISTED_KEYS = 24
#: A figure this large is shown whole (bytes), not in exponent form.
LARGE = 1e5


@dataclass(frozen=True)
class Crossed:
    """A gate the output crossed, with the figure that crossed it."""

    comparison: Comparison
    value: float

    def describe(self) -> str:
        shown = f"{self.value:.0f}" if abs(self.value) >= LARGE else f"{self.value:g}"
        return f"{self.comparison.text} ({self.comparison.name} = {shown})"


def parse_gates(texts: Iterable[str], example: str) -> tuple[Comparison, ...]:
    """Every ``--fail-if``, parsed before anything runs (all syntax errors found at once)."""
    from crdscope.session.failif import parse_comparison

    return tuple(parse_comparison(text, example) for text in texts)


def _keys(record: Mapping[str, Any]) -> str:
    names = list(record)
    more = f", ... ({len(names) - LISTED_KEYS} more)" if len(names) > LISTED_KEYS else ""
    return ", ".join(names[:LISTED_KEYS]) + more


def _null(text: str, walked: str, hints: Mapping[str, str]) -> ConfigError:
    hint = f": {hints[walked]}" if walked in hints else ""
    return ConfigError(f"--fail-if '{text}': {walked} is null in this run (a figure it does not produce{hint})")


def figure_of(data: Mapping[str, Any], comparison: Comparison, hints: Mapping[str, str] | None = None) -> float:
    """The number ``comparison`` reads from the output; :class:`ConfigError` when it names none
    (``hints``: what gives a figure that is null in this run, by its name)."""
    from crdscope.session.values import finite_number

    text, current, walked, hints = comparison.text, data, "", hints or {}
    for part in comparison.path:
        if current is None:
            raise _null(text, walked, hints)
        if not isinstance(current, Mapping):
            raise ConfigError(f"--fail-if '{text}': {walked} is not a record ('{part}' cannot follow it)")
        if part not in current:
            raise ConfigError(f"--fail-if '{text}': {walked or 'the output'} has no figure '{part}' "
                              f"(figures: {_keys(current)})")
        current, walked = current[part], f"{walked}.{part}" if walked else part
    if isinstance(current, Mapping) and set(current) >= INTERVAL_KEYS:
        current = current["value"]
    if isinstance(current, list):
        return float(len(current))
    if current is None:
        raise _null(text, walked, hints)
    if isinstance(current, Mapping):
        raise ConfigError(f"--fail-if '{text}': {walked} is a record, not a number (figures: {_keys(current)})")
    number = finite_number(current)
    if number is None:
        raise ConfigError(f"--fail-if '{text}': {walked} is text, not a number")
    return number


def judge(gates: Iterable[Comparison], data: Mapping[str, Any],
          hints: Mapping[str, str] | None = None) -> tuple[Crossed, ...]:
    """The gates ``data`` crosses; every name is checked first, so a typo is never a pass."""
    values = [(gate, figure_of(data, gate, hints)) for gate in gates]
    return tuple(Crossed(gate, value) for gate, value in values if gate.holds(value))


def gate_json(gates: Iterable[Comparison], crossed: Iterable[Crossed]) -> dict[str, Any]:
    """What ``--json`` says of the gates: every condition, and those crossed with their figure."""
    return {"conditions": [gate.text for gate in gates],
            "crossed": [{"condition": c.comparison.text, "figure": c.comparison.name,
                         "value": int(c.value) if c.value.is_integer() else c.value} for c in crossed]}


def crossed_line(crossed: Iterable[Crossed]) -> str:
    """One line naming every crossed condition and its figure."""
    return "--fail-if crossed: " + "; ".join(c.describe() for c in crossed)


def enforce(crossed: tuple[Crossed, ...]) -> None:
    """Exit 1 with :func:`crossed_line` (after the output) when a gate is crossed."""
    if crossed:
        raise CrdscopeError(crossed_line(crossed), exit_code=1)
