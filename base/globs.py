"""Go's ``path/filepath.Match``, as Crossplane matches MRAP entries against MRD names."""

from __future__ import annotations

import functools
import re


@functools.lru_cache(maxsize=512)
def _go_glob(pattern: str) -> re.Pattern[str] | None:
    """Go's ``path/filepath.Match`` syntax as a regular expression; None for a malformed pattern.

    ``*`` any run of non-``/`` characters, ``?`` one, ``[^a-z]`` classes (``^`` negates; ``-`` and
    ``]`` must be escaped inside), ``\\`` escapes.  Python's fnmatch differs (``[!...]``, no escapes).
    """
    out: list[str] = []
    index, end = 0, len(pattern)

    def class_char(at: int) -> tuple[str | None, int]:
        if at >= end or pattern[at] in "-]":
            return None, at
        if pattern[at] == "\\":
            at += 1
            if at >= end:
                return None, at
        return pattern[at], at + 1

    while index < end:
        char = pattern[index]
        if char == "*":
            out.append("[^/]*")
            index += 1
        elif char == "?":
            out.append("[^/]")
            index += 1
        elif char == "\\":
            if index + 1 >= end:
                return None
            out.append(re.escape(pattern[index + 1]))
            index += 2
        elif char == "[":
            index += 1
            negate = index < end and pattern[index] == "^"
            index += negate
            ranges: list[tuple[str, str]] = []
            while index >= end or pattern[index] != "]" or not ranges:
                low, index = class_char(index)
                if low is None:
                    return None
                high: str | None = low
                if index < end and pattern[index] == "-":
                    high, index = class_char(index + 1)
                if high is None:
                    return None
                ranges.append((low, high))
            index += 1
            valid = "".join(re.escape(a) if a == b else f"{re.escape(a)}-{re.escape(b)}" for a, b in ranges if a <= b)
            if valid:
                out.append(f"[{'^' if negate else ''}{valid}]")
            else:  # only empty ranges (z-a): Go matches nothing, or anything when negated
                out.append("(?s:.)" if negate else "(?!)")
        else:
            out.append(re.escape(char))
            index += 1
    return re.compile("".join(out), re.DOTALL)


def valid_pattern(pattern: str) -> bool:
    """Whether Go's ``filepath.Match`` accepts ``pattern`` (a malformed one matches nothing, silently)."""
    return _go_glob(pattern) is not None


def go_match(pattern: str, name: str) -> bool:
    """Whether an MRAP pattern activates MRD ``name``, as Crossplane decides (malformed: no match)."""
    compiled = _go_glob(pattern)
    return compiled is not None and compiled.fullmatch(name) is not None
