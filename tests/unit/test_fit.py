"""Least-squares fits of a figure against the CRD count, checked against hand computations."""

from __future__ import annotations

import pytest

from crdscope.base.fit import LinearFit, PlaneFit, ProcessFits


def fit_of(points):
    fit = LinearFit()
    for x, y in points:
        fit.add(x, y)
    return fit.result()


def test_points_on_a_line_fit_exactly():
    # y = 2x + 1 through (0,1), (1,3), (2,5).
    result = fit_of([(0, 1), (1, 3), (2, 5)])
    assert result.slope == pytest.approx(2.0)
    assert result.intercept == pytest.approx(1.0)
    assert result.r2 == pytest.approx(1.0)
    assert (result.n, result.distinct_x) == (3, 3)


def test_scattered_points_match_the_textbook_formulas():
    # x̄ = 2.5, ȳ = 3.5; Sxx = 5, Sxy = 4, Syy = 5
    # slope = 4/5 = 0.8; intercept = 3.5 - 0.8 * 2.5 = 1.5; R² = 4² / (5 * 5) = 0.64
    result = fit_of([(1, 2), (2, 3), (3, 5), (4, 4)])
    assert result.slope == pytest.approx(0.8)
    assert result.intercept == pytest.approx(1.5)
    assert result.r2 == pytest.approx(0.64)


def test_points_arrive_in_any_order():
    forward = fit_of([(1, 2), (2, 3), (3, 5), (4, 4)])
    shuffled = fit_of([(3, 5), (1, 2), (4, 4), (2, 3)])
    assert shuffled.slope == pytest.approx(forward.slope)
    assert shuffled.r2 == pytest.approx(forward.r2)


def test_repeated_x_counts_once_with_the_mean_of_its_ys():
    # A monitor idling at one CRD count samples it many times: x=0 has ys 1 and 3
    # (mean 2), x=1 has 4 three times (mean 4): the line through (0,2), (1,4).
    result = fit_of([(0, 1), (0, 3), (1, 4), (1, 4), (1, 4)])
    assert result.slope == pytest.approx(2.0)
    assert result.intercept == pytest.approx(2.0)
    assert result.r2 == pytest.approx(1.0)
    assert (result.n, result.distinct_x) == (5, 2)


def test_many_repeats_do_not_outweigh_other_counts():
    # 100 samples at x=10 around y=100, one each at 20 and 30 on the line y = 10x:
    # per-x means (10,100), (20,200), (30,300): slope exactly 10.
    points = [(10, 100 + (1 if i % 2 else -1)) for i in range(100)] + [(20, 200), (30, 300)]
    assert fit_of(points).slope == pytest.approx(10.0)


def test_no_line_until_two_distinct_x():
    assert fit_of([]) is None
    assert fit_of([(5, 1)]) is None
    assert fit_of([(5, 1), (5, 2), (5, 3)]) is None
    assert fit_of([(5, 1), (5, 2), (6, 3)]) is not None


def test_flat_figure_has_slope_zero_and_no_r2():
    result = fit_of([(1, 7), (2, 7), (3, 7)])
    assert result.slope == pytest.approx(0.0)
    assert result.r2 is None


def test_api_server_sized_numbers_keep_their_precision():
    # 600 MiB resident plus exactly 4 MiB per CRD, from 1000 to 1300 CRDs, with ±1 byte jitter.
    mib = 1 << 20
    points = [(x, 600 * mib + 4 * mib * x + (1 if x % 2 else -1)) for x in range(1000, 1301)]
    result = fit_of(points)
    assert result.slope / mib == pytest.approx(4.0, rel=1e-9)
    assert result.intercept / mib == pytest.approx(600.0, rel=1e-6)
    assert result.r2 == pytest.approx(1.0, abs=1e-9)


def test_a_restart_starts_a_new_series():
    fits = ProcessFits()
    # First process: slope 10 per CRD.
    fits.add(1000.0, 10, 500)
    fits.add(1000.0, 20, 600)
    assert fits.result().slope == pytest.approx(10.0)
    # A restarted process at the same CRD count uses far less memory: one point, no line yet,
    # and nothing of the old process leaks in.
    fits.add(2000.0, 20, 100)
    assert fits.result() is None
    fits.add(2000.0, 30, 300)
    result = fits.result()
    assert result.slope == pytest.approx(20.0)
    assert result.n == 2


def test_a_late_point_of_an_old_process_does_not_take_over():
    fits = ProcessFits()
    fits.add(2000.0, 1, 10)
    fits.add(2000.0, 2, 20)
    fits.add(1000.0, 5, 999)  # a delayed reading from the process before the restart
    assert fits.result().slope == pytest.approx(10.0)


def test_old_processes_are_forgotten():
    fits = ProcessFits(keep=2)
    for start in (1.0, 2.0, 3.0):
        fits.add(start, 1, 1)
    assert fits.processes == (2.0, 3.0)


# --------------------------------------------------------------------------- two regressors (CRDs and MRDs)

def test_a_plane_fit_separates_two_slopes_that_moved_apart():
    fit = PlaneFit()
    for mrds in range(0, 401, 50):  # MRDs arrive first (a safe-start provider), then CRDs are activated
        fit.add(0, mrds, 300 + 0.8 * mrds)
    for crds in range(0, 201, 25):
        fit.add(crds, 400, 300 + 0.8 * 400 + 2.0 * crds)
    result = fit.result()
    assert result is not None and result.state == "separated"
    assert result.slope1 == pytest.approx(2.0) and result.slope2 == pytest.approx(0.8)


def test_a_plane_fit_says_when_it_cannot_separate():
    together = PlaneFit()
    for n in range(0, 300, 30):  # every MRD's CRD made at once: no telling their costs apart
        together.add(n, n, 300 + 2.8 * n)
    assert together.result().state == "together" and together.result().slope1 is None
    constant = PlaneFit()
    for crds in range(0, 300, 30):  # the MRDs were all there before: the CRD slope is the CRDs' own
        constant.add(crds, 817, 1000 + 2.0 * crds)
    result = constant.result()
    assert result.state == "x2-constant" and result.slope1 == pytest.approx(2.0) and result.slope2 is None
    few = PlaneFit()
    few.add(1, 1, 1)
    few.add(2, 2, 2)
    assert few.result() is None
