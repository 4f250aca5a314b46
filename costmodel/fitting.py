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
