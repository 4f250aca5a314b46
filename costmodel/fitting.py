"""Least squares for a few non-negative terms (no numpy: a handful of columns, tens of rows).

A cost is never negative, so a term the data would give a negative coefficient
(collinear columns: in a set where every CRD serves one version, "per CRD" and
"per served version" are the same column) is dropped and the rest refitted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class TermFit:
    """``y ~ sum(coefficients[name] * x[name])`` and how well it fits the points it came from."""

    coefficients: dict[str, float]
    #: root mean square of (predicted - observed) / observed over the points
    relative_rms: float
    #: the largest |predicted - observed| / observed
    relative_max: float
    points: int


def _solve(matrix: list[list[float]], vector: list[float]) -> list[float] | None:
    """Gaussian elimination with partial pivoting; None when the system is singular."""
    size = len(vector)
    rows = [row[:] + [value] for row, value in zip(matrix, vector, strict=True)]
    for column in range(size):
        pivot = max(range(column, size), key=lambda r: abs(rows[r][column]))
        if abs(rows[pivot][column]) < 1e-12 * max(1.0, max(abs(v) for row in rows for v in row[:-1])):
            return None
        rows[column], rows[pivot] = rows[pivot], rows[column]
        for other in range(size):
            if other != column:
                factor = rows[other][column] / rows[column][column]
                rows[other] = [a - factor * b for a, b in zip(rows[other], rows[column], strict=True)]
    return [rows[i][-1] / rows[i][i] for i in range(size)]


def least_squares(xs: Sequence[Sequence[float]], ys: Sequence[float]) -> list[float] | None:
    """Coefficients minimising the squared error of ``xs @ c - ys`` (columns scaled first)."""
    columns = len(xs[0]) if xs else 0
    scale = [max(abs(row[j]) for row in xs) or 1.0 for j in range(columns)]
    scaled = [[row[j] / scale[j] for j in range(columns)] for row in xs]
    normal = [[sum(row[i] * row[j] for row in scaled) for j in range(columns)] for i in range(columns)]
    right = [sum(row[i] * y for row, y in zip(scaled, ys, strict=True)) for i in range(columns)]
    solved = _solve(normal, right)
    return None if solved is None else [value / scale[j] for j, value in enumerate(solved)]


def fit_terms(rows: Sequence[dict[str, float]], ys: Sequence[float], terms: Sequence[str]) -> TermFit:
    """Fit ``ys`` on the named columns of ``rows``, dropping terms that come out negative."""
    kept = list(terms)
    while kept:
        solved = least_squares([[row[t] for t in kept] for row in rows], ys)
        if solved is not None and all(value >= 0 for value in solved):
            coefficients = dict(zip(kept, solved, strict=True))
            break
        if solved is None:
            kept.pop()  # singular: the last (least basic) term goes
        else:
            kept.pop(min(range(len(kept)), key=lambda i: solved[i]))
    else:
        coefficients = {}
    errors = []
    for row, y in zip(rows, ys, strict=True):
        predicted = sum(value * row[name] for name, value in coefficients.items())
        if y:
            errors.append((predicted - y) / y)
    rms = math.sqrt(sum(e * e for e in errors) / len(errors)) if errors else 0.0
    return TermFit({t: coefficients.get(t, 0.0) for t in terms}, rms,
                   max((abs(e) for e in errors), default=0.0), len(ys))


@dataclass(frozen=True)
class PacedFit:
    """``y ~ max(pace_seconds, sum(coefficients[name] * x[name])) + tail_seconds``.

    An install paced by its client takes at least the pace (N / rate); the server's own work
    overlaps the pacing and only its excess over the pace adds time.  The tail is what every
    install pays once whichever bound holds: starting the client, and the last CRD's way to
    Established after its creation.
    """

    coefficients: dict[str, float]
    tail_seconds: float
    relative_rms: float
    relative_max: float
    points: int
    #: per point, True where the fitted server work exceeds the pace
    server_bound: tuple[bool, ...]


#: Step of the search over the tail (seconds); the tails measured are 0.5 to 2 s.
TAIL_STEP_SECONDS = 0.05


def paced_value(coefficients: dict[str, float], tail_seconds: float, row: dict[str, float],
                pace_seconds: float) -> float:
    """One prediction of a :class:`PacedFit`'s shape."""
    server = sum(value * row.get(name, 0.0) for name, value in coefficients.items())
    return max(pace_seconds, server) + tail_seconds


def _relative_errors(coefficients: dict[str, float], tail: float, rows: Sequence[dict[str, float]],
                     ys: Sequence[float], paces: Sequence[float]) -> list[float]:
    return [(paced_value(coefficients, tail, row, pace) - y) / y
            for row, y, pace in zip(rows, ys, paces, strict=True) if y]


def _server_fit(rows: Sequence[dict[str, float]], ys: Sequence[float], paces: Sequence[float],
                terms: Sequence[str], tail: float) -> dict[str, float]:
    """The server terms for one tail: fitted on the points the server bounds, until that set is stable.

    Each row is divided by its measured time, so the squared error minimised is the relative one
    (a 15 s point weighs as much as a 150 s one).  It starts from every point server-bound.
    """
    bound = [True] * len(ys)
    coefficients = dict.fromkeys(terms, 0.0)
    for _ in range(2 * len(ys) + 2):
        chosen = [i for i, b in enumerate(bound) if b]
        if not chosen:
            break
        scaled = [{t: rows[i].get(t, 0.0) / ys[i] for t in terms} for i in chosen]
        coefficients = fit_terms(scaled, [(ys[i] - tail) / ys[i] for i in chosen], terms).coefficients
        again = [paced_value(coefficients, 0.0, row, 0.0) > pace for row, pace in zip(rows, paces, strict=True)]
        if again == bound:
            break
        bound = again
    return coefficients


def fit_paced(rows: Sequence[dict[str, float]], ys: Sequence[float], paces: Sequence[float],
              terms: Sequence[str]) -> PacedFit:
    """Fit ``ys ~ max(paces, server terms) + tail``: the tail searched on a grid (it is never more than
    the smallest measured excess over the pace), the terms by least squares of the relative error."""
    floor = min((y - pace for y, pace in zip(ys, paces, strict=True)), default=0.0)
    steps = max(0, int(floor / TAIL_STEP_SECONDS))
    best: tuple[float, dict[str, float], float] | None = None
    for step in range(steps + 1):
        tail = round(step * TAIL_STEP_SECONDS, 6)
        coefficients = _server_fit(rows, ys, paces, terms, tail)
        errors = _relative_errors(coefficients, tail, rows, ys, paces)
        score = sum(e * e for e in errors)
        if best is None or score < best[0]:
            best = (score, coefficients, tail)
    coefficients, tail = (best[1], best[2]) if best else (dict.fromkeys(terms, 0.0), 0.0)
    errors = _relative_errors(coefficients, tail, rows, ys, paces)
    bound = tuple(paced_value(coefficients, 0.0, row, 0.0) > pace for row, pace in zip(rows, paces, strict=True))
    return PacedFit(coefficients, tail, math.sqrt(sum(e * e for e in errors) / len(errors)) if errors else 0.0,
                    max((abs(e) for e in errors), default=0.0), len(ys), bound)
