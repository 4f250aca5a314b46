"""The install-time model: ``max(CRDs / loader pace, server work) + tail`` (coefficients format 2).

Expected values come from the structure by hand (a paced client cannot beat N / pace; the server's
work overlaps the pacing), or from points built from known parameters: never from the code's output.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crdscope.base.settings import LoaderSettings
from crdscope.costmodel import coefficients as coefficients_module
from crdscope.costmodel.calibration import _install, write_minor
from crdscope.costmodel.coefficients import FORMAT, calibrated_minors, for_minor
from crdscope.costmodel.features import CRDFeatures
from crdscope.costmodel.fitting import fit_paced
from crdscope.costmodel.model import estimate
from crdscope.costmodel.source import read_source

PACE = 20.0
TAIL = 1.0
PER_CRD = 0.01
PER_BYTE = 1e-6


def crds(count: int, schema_bytes: int) -> list[CRDFeatures]:
    return [CRDFeatures(name=f"k{i}s.g{i % 5}.example", group=f"g{i % 5}.example", kind=f"K{i}", plural=f"k{i}s",
                        singular=f"k{i}", namespaced=False, served_versions=("v1",), storage_version="v1",
                        schema_bytes=schema_bytes, schema_properties=10, printer_columns=0, subresources=(),
                        conversion="None") for i in range(count)]


def paced_entry(minor: str) -> dict:
    return {
        "kubernetes_version": f"v{minor}.0",
        "baseline": {"rss_bytes": 3e8, "legacy_request_seconds": 0.002},
        "figures": {
            "rss_bytes": {"terms": {"crds": 2**20}, "relative_rms": 0.05},
            "install_seconds": {"model": "paced", "pace_per_second": PACE, "tail_seconds": TAIL,
                                "terms": {"crds": PER_CRD, "schema_bytes": PER_BYTE}, "relative_rms": 0.15},
        },
    }


@pytest.fixture
def paced_file(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "coefficients.json"
    path.write_text(json.dumps({"format": 2, "minors": {"1.37": paced_entry("1.37")}}))
    monkeypatch.setattr(coefficients_module.for_minor, "__defaults__", (path,))
    return path


def test_at_the_pace_floor_twice_the_crds_take_twice_the_pacing(paced_file):
    # 1 KB schemas: the server's work is 0.01 + 0.001 = 0.011 s a CRD, under the pace's 0.05 s.
    small, double = estimate(crds(100, 1000), "1.37"), estimate(crds(200, 1000), "1.37")
    assert small.install_seconds.value == pytest.approx(100 / PACE + TAIL)
    assert double.install_seconds.value - TAIL == pytest.approx(2 * (small.install_seconds.value - TAIL))
    assert double.install_pace_per_second == PACE


def test_a_server_bound_set_costs_its_work_and_never_less_than_the_pace(paced_file):
    # 200 KB schemas: 0.01 + 0.2 = 0.21 s a CRD of server work, four times the pace's 0.05 s.
    result = estimate(crds(100, 200_000), "1.37")
    assert result.install_seconds.value == pytest.approx(100 * 0.21 + TAIL)
    # The interval is 2 x 15% RMS wide, but its low end stops at the pacing: 100 CRDs at 20/s.
    assert result.install_seconds.low >= 100 / PACE
    paced = estimate(crds(100, 1000), "1.37")
    assert paced.install_seconds.low == pytest.approx(100 / PACE)  # 6 s - 30% would be 4.2 s


def test_another_pace_moves_the_floor_not_the_servers_work(paced_file):
    # Twice the pace halves a paced install's floor; a server-bound install does not get faster.
    assert estimate(crds(100, 1000), "1.37", load_rate_per_second=40.0).install_seconds.value == pytest.approx(
        100 / 40 + TAIL)
    assert estimate(crds(100, 200_000), "1.37", load_rate_per_second=40.0).install_seconds.value == pytest.approx(
        100 * 0.21 + TAIL)


def test_a_format_1_file_is_read_and_upgraded_when_a_minor_is_written(tmp_path, monkeypatch):
    old = paced_entry("1.30")
    old["figures"]["install_seconds"] = {"terms": {"fixed": 2.0, "crds": 0.1}, "relative_rms": 0.05}
    path = tmp_path / "coefficients.json"
    path.write_text(json.dumps({"format": 1, "minors": {"1.30": old}}))
    monkeypatch.setattr(coefficients_module.for_minor, "__defaults__", (path,))
    # Format 1: a plain sum of terms (2 s once, 0.1 s a CRD), and no pace to speak of.
    linear = estimate(crds(10, 1000), "1.30")
    assert linear.install_seconds.value == pytest.approx(3.0)
    assert linear.install_pace_per_second is None
    write_minor("1.37", paced_entry("1.37"), path)
    document = json.loads(path.read_text())
    assert document["format"] == FORMAT == 2
    assert set(document["minors"]) == {"1.30", "1.37"}
    assert calibrated_minors(path) == ["1.30", "1.37"]
    assert for_minor("1.30", path).figure("install_seconds")["terms"] == {"fixed": 2.0, "crds": 0.1}


def points(sizes: list[tuple[int, float]], per_crd: float, per_byte: float, tail: float, pace: float):
    rows = [{"crds": float(n), "schema_bytes": s} for n, s in sizes]
    ys = [max(n / pace, per_crd * n + per_byte * s) + tail for n, s in sizes]
    return rows, ys, [n / pace for n, _ in sizes]


def test_fit_paced_recovers_the_parameters_points_were_built_from():
    # Two sets at the pace (small schemas), five the server bounds; tail 0.8 s.
    sizes = [(300, 1.9e6), (400, 2.0e6), (150, 16e6), (75, 7e6), (200, 10e6), (300, 9.8e6), (150, 4e6)]
    rows, ys, paces = points(sizes, 0.02, 2e-6, 0.8, 20.0)
    fit = fit_paced(rows, ys, paces, ("crds", "schema_bytes"))
    assert fit.coefficients["crds"] == pytest.approx(0.02, rel=1e-6)
    assert fit.coefficients["schema_bytes"] == pytest.approx(2e-6, rel=1e-6)
    assert fit.tail_seconds == pytest.approx(0.8)
    assert fit.relative_max == pytest.approx(0.0, abs=1e-9)
    assert fit.server_bound == (False, False, True, True, True, True, True)


def test_a_linear_fit_of_paced_points_would_price_the_pace_as_work():
    # Why the structure changed: points at the pace floor fitted by a plain sum put the pacing into
    # the per-CRD term, and a large server-bound set then pays pacing and work added together.
    from crdscope.costmodel.fitting import fit_terms

    sizes = [(300, 1.9e6), (150, 16e6), (75, 7e6), (200, 10e6), (300, 9.8e6), (150, 4e6)]
    rows, ys, paces = points(sizes, 0.02, 2e-6, 0.8, 20.0)
    linear = fit_terms([{**row, "fixed": 1.0} for row in rows], ys, ("fixed", "crds", "schema_bytes"))
    big = {"fixed": 1.0, "crds": 2000.0, "schema_bytes": 56e6}
    truth = max(2000 / 20.0, 0.02 * 2000 + 2e-6 * 56e6) + 0.8  # 152.8 s: server-bound
    paced = fit_paced(rows, ys, paces, ("crds", "schema_bytes"))
    assert paced.coefficients["crds"] * 2000 + paced.coefficients["schema_bytes"] * 56e6 + paced.tail_seconds \
        == pytest.approx(truth, rel=1e-6)
    assert sum(c * big[t] for t, c in linear.coefficients.items()) != pytest.approx(truth, rel=0.05)


def raw_rows(pace: float | None) -> list[dict]:
    rows = []
    sizes = [("a", 300, 1.9e6), ("b", 150, 16e6), ("c", 75, 7e6), ("d", 200, 10e6)]
    built, ys, _ = points([(n, s) for _, n, s in sizes], 0.02, 2e-6, 0.5, pace or 20.0)
    for (name, count, _), x, y in zip(sizes, built, ys, strict=True):
        point = {"load_seconds": y, "load_started": 0.0, "established_last": y - 0.2}
        if pace is not None:
            point["load_rate_per_second"] = pace
        rows.append({"set": name, "point": point, "x_half": x, "half": [None] * count})
    return rows


def test_calibration_writes_the_pace_it_measured_at():
    # Raw files of 2026-12-03 recorded no pace: the loader's default (20 CRDs/s) was it.
    old, _ = _install(raw_rows(None))
    assert old["model"] == "paced" and old["pace_per_second"] == LoaderSettings().rate == 20.0
    assert old["tail_seconds"] == pytest.approx(0.5)
    assert set(old["leave_one_set_out"]) == {"a", "b", "c", "d"}
    faster, _ = _install(raw_rows(40.0))
    assert faster["pace_per_second"] == 40.0
    mixed = raw_rows(None) + raw_rows(40.0)
    with pytest.raises(ValueError, match="one loader pace"):
        _install(mixed)


def test_the_committed_coefficients_price_crdscope_load_at_its_default_pace():
    # The estimate is for `crdscope load` at its defaults: a changed default needs a recalibration.
    for minor in calibrated_minors():
        figure = for_minor(minor).figure("install_seconds")
        assert figure["model"] == "paced"
        assert figure["pace_per_second"] == LoaderSettings().rate


async def test_committed_coefficients_keep_small_schemas_at_the_pace():
    # Measured on every calibrated minor: 300 synthetic CRDs of 5 properties took 15.5-16.5 s at 20/s,
    # the pacing's 15 s and a tail. Twice as many such CRDs are still paced: about twice the time.
    small = list((await read_source("synthetic:300", schema_props=5)).crds)
    double = list((await read_source("synthetic:600", schema_props=5)).crds)
    for minor in calibrated_minors():
        one, two = estimate(small, minor).install_seconds.value, estimate(double, minor).install_seconds.value
        assert 300 / 20 <= one <= 300 / 20 + 2
        assert two / one == pytest.approx(2.0, rel=0.05)
