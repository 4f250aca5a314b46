"""Incremental least-squares fits of a figure against the number of CRDs.

Memory and file descriptors per CRD are the slope of a straight line through
(CRDs, figure) points that arrive one sample at a time, for hours.  Two
things make a plain running regression misleading, and this module handles
both:

* Repeated x values.  A monitor samples every few seconds while the CRD count
  often stands still for minutes; a plain fit would let those many points at
  one count outweigh the few counts the installation went through.  Points are
  therefore grouped by x and each distinct x contributes the mean of its ys
  once (the ``n`` of a fit still counts every observation).
* Restarts.  A new API server process starts from scratch (its memory has
  nothing to do with the old one's), so :class:`ProcessFits` keeps one fit per
  process start time and reports the current process's.

Updates are O(1): the sums over distinct x are adjusted when a group's mean
moves.  Sums are kept relative to the first point to keep the subtraction in
the slope formula well conditioned (RSS is ~1e9, CRD counts ~1e3).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: Processes kept by :class:`ProcessFits` (older ones are dropped).
KEEP_PROCESSES = 4


@dataclass(frozen=True)
class FitResult:
    """A straight line ``y = slope * x + intercept`` and how well it fits.

    ``r2`` is None when every point lies at the same y (nothing to explain).
    """

    slope: float
    intercept: float
    r2: float | None
    n: int
    distinct_x: int


class LinearFit:
    """Least-squares line through points added one at a time (one mean y per distinct x)."""

    def __init__(self) -> None:
        self.n = 0
        self._groups: dict[float, tuple[int, float]] = {}  # x -> (count, mean y)
        self._origin: tuple[float, float] | None = None
        # Sums over distinct x of (x - x0), (y - y0), their squares and product.
        self._sx = self._sy = self._sxx = self._syy = self._sxy = 0.0

    def add(self, x: float, y: float) -> None:
        """Add one observation."""
        if self._origin is None:
            self._origin = (x, y)
        self.n += 1
        count, mean = self._groups.get(x, (0, 0.0))
        if count:
            self._account(x, mean, -1.0)
        mean += (y - mean) / (count + 1)
        self._groups[x] = (count + 1, mean)
        self._account(x, mean, 1.0)

    def _account(self, x: float, y: float, sign: float) -> None:
        x0, y0 = self._origin  # type: ignore[misc]
        dx, dy = x - x0, y - y0
        self._sx += sign * dx
        self._sy += sign * dy
        self._sxx += sign * dx * dx
        self._syy += sign * dy * dy
        self._sxy += sign * dx * dy

    @property
    def distinct_x(self) -> int:
        """How many different x values were seen."""
        return len(self._groups)

    def result(self) -> FitResult | None:
        """The fitted line, or None until points at two different x values exist."""
        m = len(self._groups)
        if m < 2:
            return None
        x0, y0 = self._origin  # type: ignore[misc]
        var_x = self._sxx - self._sx * self._sx / m
        if var_x <= 0:
            return None
        cov_xy = self._sxy - self._sx * self._sy / m
        var_y = self._syy - self._sy * self._sy / m
        slope = cov_xy / var_x
        intercept = y0 + self._sy / m - slope * (x0 + self._sx / m)
        r2 = None
        if var_y > 1e-12 * max(1.0, abs(self._syy)):
            r2 = max(0.0, min(1.0, cov_xy * cov_xy / (var_x * var_y)))
        return FitResult(slope=slope, intercept=intercept, r2=r2, n=self.n, distinct_x=m)


@dataclass(frozen=True)
class PlaneResult:
    """``y = intercept + slope1 * x1 + slope2 * x2``, or why the two slopes cannot be told apart."""

    #: x1's own slope (None: x1 and x2 moved together, so neither slope is known alone).
    slope1: float | None
    #: x2's own slope (None: x2 never changed, or moved with x1).
    slope2: float | None
    #: "separated", "x2-constant" (slope1 is x1's own: a constant x2 biases nothing), "together".
    state: str
    distinct: int


class PlaneFit:
    """Least squares of y on two regressors, points added one at a time (one mean y per distinct pair).

    The API server's memory against its CRDs (x1) and Crossplane's MRDs (x2): while MRDs arrive with
    the CRDs, a line through the CRD count alone charges the MRDs' memory to the CRDs.
    """

    #: Squared correlation of x1 and x2 above which they moved together (their slopes cannot be split).
    COLLINEAR = 0.98

    def __init__(self) -> None:
        self.n = 0
        self._groups: dict[tuple[float, float], tuple[int, float]] = {}

    def add(self, x1: float, x2: float, y: float) -> None:
        """Add one observation."""
        self.n += 1
        count, mean = self._groups.get((x1, x2), (0, 0.0))
        self._groups[(x1, x2)] = (count + 1, mean + (y - mean) / (count + 1))

    def result(self) -> PlaneResult | None:
        """The two slopes, or None until three distinct pairs exist."""
        m = len(self._groups)
        if m < 3:
            return None
        points = [(x1, x2, y) for (x1, x2), (_, y) in self._groups.items()]
        mx1 = sum(p[0] for p in points) / m
        mx2 = sum(p[1] for p in points) / m
        my = sum(p[2] for p in points) / m
        s11 = sum((p[0] - mx1) ** 2 for p in points)
        s22 = sum((p[1] - mx2) ** 2 for p in points)
        s12 = sum((p[0] - mx1) * (p[1] - mx2) for p in points)
        s1y = sum((p[0] - mx1) * (p[2] - my) for p in points)
        s2y = sum((p[1] - mx2) * (p[2] - my) for p in points)
        if s22 <= 0:
            return PlaneResult(s1y / s11 if s11 > 0 else None, None, "x2-constant", m)
        if s11 <= 0 or s12 * s12 > self.COLLINEAR * s11 * s22:
            return PlaneResult(None, None, "together", m)
        det = s11 * s22 - s12 * s12
        return PlaneResult((s1y * s22 - s2y * s12) / det, (s2y * s11 - s1y * s12) / det, "separated", m)


class ProcessFits:
    """One fit (a :class:`LinearFit`, or what ``factory`` makes) per process start time;
    :meth:`current` is the newest process's."""

    def __init__(self, keep: int = KEEP_PROCESSES, factory: Any = LinearFit) -> None:
        self._fits: dict[float, Any] = {}
        self._latest: float | None = None
        self._keep = keep
        self._factory = factory

    def add(self, start_time: float, *point: float) -> None:
        """Add a point observed while the process that started at ``start_time`` ran."""
        fit = self._fits.get(start_time)
        if fit is None:
            fit = self._fits[start_time] = self._factory()
            for old in sorted(self._fits)[:-self._keep]:
                del self._fits[old]
        if self._latest is None or start_time >= self._latest:
            self._latest = start_time
        fit.add(*point)

    @property
    def processes(self) -> tuple[float, ...]:
        """Start times of the processes whose fits are kept, oldest first."""
        return tuple(sorted(self._fits))

    def current(self) -> Any:
        """The fit of the newest process seen, if any."""
        return self._fits.get(self._latest) if self._latest is not None else None

    def result(self) -> Any:
        """The newest process's fit (None until it has enough distinct points)."""
        fit = self.current()
        return fit.result() if fit else None
