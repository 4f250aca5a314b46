"""Turn raw calibration measurements (``python -m bench calibrate``) into coefficients.

The raw file lists, per calibration set, the CRD files it loaded and points
measured on one fresh lab: empty, and after loading the set (older raw files
have a point after each half too: any number of points is fitted).
Each figure's growth over the empty point is fitted against the features of
the CRDs loaded by then (:mod:`.fitting`); discovery sizes are built
(:mod:`.documents`) and only their scale is fitted; request counts and
OpenAPI v3 paths are checked to be exact.
"""

from __future__ import annotations

import datetime as dt
import json
import statistics
from pathlib import Path
from typing import Any

from crdscope.base.settings import LoaderSettings
from crdscope.loader.sources import CRDDocument, yaml_items

from .coefficients import ACTIVATION_KEY, COEFFICIENTS_FILE, FORMAT, READABLE_FORMATS, forget_loaded, parse_minor
from .documents import aggregated_bytes, legacy_bytes
from .features import CRDFeatures, features_of
from .fitting import PacedFit, fit_paced, fit_terms, paced_value
from .model import INSTALL_MODEL, sum_terms

#: Memory: a term per served version was tried and dropped: schema bytes are summed over served
#: versions already, and with it the fit without the 3-version set missed that set by +27%
#: (leave-one-set-out), without it by +3% (calibration of 2026-12-03, 1.37).
MEMORY_TERMS = ("fixed", "crds", "schema_bytes")
LINEAR_FIGURES = {
    "rss_bytes": MEMORY_TERMS,
    "heap_bytes": MEMORY_TERMS,
    # heap in use after a forced collection (costmodel.measure): raw files from 2026-12-07 on
    "live_heap_bytes": MEMORY_TERMS,
    "openapi_v2_bytes": ("fixed", "crds", "served_versions", "schema_bytes"),
    "etcd_connections": ("fixed", "crds", "served_versions"),
}
#: The server's own work during an install: per CRD and per schema byte (summed over served versions).
#: No one-time term: fitted with one (seven sets of 2026-12-03) it came out 1.4 s on 1.37, 4.5 s on
#: 1.30 and 0 on 1.26, and the RMS error of a set left out of the fit was 0.169 against 0.163 on 1.37,
#: 0.230 against 0.239 on 1.30 and 0.082 against 0.072 on 1.26: no better on two minors of three.
INSTALL_TERMS = ("crds", "schema_bytes")
#: The pace of ``crdscope load`` at its defaults (LoaderSettings: 20 CRDs/s, 8 in flight; unchanged since
#: the first commit), for raw files that did not record it (all of 2026-12-03).
DEFAULT_LOAD_SETTINGS = LoaderSettings()


def read_features(paths: list[str]) -> list[CRDFeatures]:
    """The features of the CRDs in ``paths`` (one or more documents per file)."""
    found: list[CRDFeatures] = []
    for path in paths:
        with open(path, "rb") as handle:
            found.extend(features_of(item) for item in yaml_items(handle, path) if isinstance(item, CRDDocument))
    return found


def _rows(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per measured point after the empty one: its set, features and growth."""
    rows = []
    for measured in raw["sets"]:
        crds = read_features(measured["files"])
        empty = measured["points"][0]
        previous = 0
        for point in measured["points"][1:]:
            loaded, half = crds[:point["files"]], crds[previous:point["files"]]
            rows.append({"set": measured["set"]["name"], "point": point, "empty": empty, "x": sum_terms(loaded),
                         "x_half": sum_terms(half), "crds": loaded, "half": half, "previous": crds[:previous]})
            previous = point["files"]
    return rows


def _scale(rows: list[dict[str, Any]], figure: str, built: list[float]) -> dict[str, Any]:
    measured = [row["point"][figure] - row["empty"][figure] for row in rows]
    scale = sum(measured) / sum(built) if sum(built) else 1.0
    errors = [(scale * b - m) / m for b, m in zip(built, measured, strict=True) if m]
    return {"scale": scale, "relative_max": max((abs(e) for e in errors), default=0.0),
            "relative_rms": (sum(e * e for e in errors) / len(errors)) ** 0.5 if errors else 0.0}


def _exact(rows: list[dict[str, Any]], figure: str) -> dict[str, Any]:
    """Measured growth of a count against the new group-versions (should match exactly)."""
    misses = []
    for row in rows:
        measured = row["point"][figure] - row["empty"][figure]
        built = len({gv for crd in row["crds"] for gv in crd.group_versions})
        if measured != built:
            misses.append({"set": row["set"], "measured": measured, "built": built})
    return {"per": "new group-version", "points": len(rows), "misses": misses}


def _baseline(raw: dict[str, Any]) -> dict[str, Any]:
    empties = [measured["points"][0] for measured in raw["sets"]]
    everything = [point for measured in raw["sets"] for point in measured["points"]]

    def median(name: str) -> float:
        return float(statistics.median(point[name] for point in empties))

    def median_if_served(name: str) -> float | None:
        known = [point[name] for point in empties if point.get(name) is not None]
        return float(statistics.median(known)) if known else None

    return {
        "rss_bytes": median("rss_bytes"), "heap_bytes": median("heap_bytes"),
        "live_heap_bytes": median_if_served("live_heap_bytes"),
        "aggregated_bytes": median_if_served("aggregated_bytes"), "legacy_bytes": median("legacy_bytes"),
        "group_versions": int(median("legacy_requests")) - 2, "openapi_v3_paths": int(median("openapi_v3_paths")),
        "openapi_v2_bytes": median_if_served("openapi_v2_bytes"), "etcd_connections": int(median("etcd_connections")),
        "legacy_request_seconds": float(statistics.median(p["legacy_request_seconds_median"] for p in everything)),
    }


def _measured(rows: list[dict[str, Any]], figure: str) -> list[dict[str, Any]]:
    """The rows where ``figure`` was read (a v2 document that timed out is None)."""
    return [row for row in rows if row["point"].get(figure) is not None and row["empty"].get(figure) is not None]


def _leave_one_set_out(rows: list[dict[str, Any]], figure: str, terms: tuple[str, ...]) -> dict[str, float]:
    """Each set's error when the figure is fitted without it (the honest error of a new set)."""
    errors = {}
    for name in sorted({row["set"] for row in rows}):
        kept = [row for row in rows if row["set"] != name]
        if not kept:
            continue
        fit = fit_terms([row["x"] for row in kept], [row["point"][figure] - row["empty"][figure] for row in kept],
                        terms)
        last = [row for row in rows if row["set"] == name][-1]
        observed = last["point"][figure] - last["empty"][figure]
        predicted = sum(c * last["x"].get(t, 0.0) for t, c in fit.coefficients.items())
        if observed:
            errors[name] = round((predicted - observed) / observed, 4)
    return errors


def _pace(point: dict[str, Any]) -> float:
    """The loader's pace for one measured load (CRDs per second)."""
    return float(point.get("load_rate_per_second") or DEFAULT_LOAD_SETTINGS.rate)


def _paced_fit(rows: list[dict[str, Any]]) -> PacedFit:
    return fit_paced([row["x_half"] for row in rows], [row["point"]["load_seconds"] for row in rows],
                     [len(row["half"]) / _pace(row["point"]) for row in rows], INSTALL_TERMS)


def _install_leave_one_set_out(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Each set's install-time error when fitted without it."""
    errors = {}
    for name in sorted({row["set"] for row in rows}):
        kept = [row for row in rows if row["set"] != name]
        if len(kept) < len(INSTALL_TERMS):
            continue
        fit = _paced_fit(kept)
        last = [row for row in rows if row["set"] == name][-1]
        observed = last["point"]["load_seconds"]
        predicted = paced_value(fit.coefficients, fit.tail_seconds, last["x_half"],
                                len(last["half"]) / _pace(last["point"]))
        errors[name] = round((predicted - observed) / observed, 4)
    return errors


def _install(rows: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    paces = {_pace(row["point"]) for row in rows}
    if len(paces) != 1:
        raise ValueError(f"one loader pace per calibration, not {sorted(paces)}")
    fit = _paced_fit(rows)
    rates = [len(row["half"]) / max(1.0, row["point"]["established_last"] - row["point"]["load_started"])
             for row in rows if row["point"].get("established_last")]
    install = {"model": INSTALL_MODEL, "pace_per_second": paces.pop(),
               "concurrency": int(rows[0]["point"].get("load_concurrency") or DEFAULT_LOAD_SETTINGS.concurrency),
               "terms": fit.coefficients, "tail_seconds": fit.tail_seconds,
               "relative_rms": fit.relative_rms, "relative_max": fit.relative_max, "points": fit.points,
               "server_bound": sorted(row["set"] for row, bound in zip(rows, fit.server_bound, strict=True)
                                      if bound),
               "leave_one_set_out": _install_leave_one_set_out(rows),
               "measured_with": "crdscope load at its defaults"}
    rate = {"per_second": statistics.median(rates) if rates else None,
            "measured_with": "CRDs of a load / (last Established - load start), server clock"}
    return install, rate


def _one_version(raw: dict[str, Any]) -> str:
    """The one Kubernetes version a raw calibration file measured (an error if several)."""
    versions = {measured["kubernetes"] for measured in raw["sets"]}
    if len(versions) != 1:
        raise ValueError(f"one Kubernetes version per calibration, not {sorted(versions)}")
    return str(versions.pop())


def _linear_fits(rows: list[dict[str, Any]], wanted: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    """Each figure of ``wanted`` fitted on its terms: the growth from each set's empty point to its points.
    A figure older raw files did not read is left out (the minor has no coefficients for it)."""
    figures: dict[str, Any] = {}
    for figure, terms in wanted.items():
        measured = _measured(rows, figure)
        if not measured:
            continue
        fit = fit_terms([row["x"] for row in measured],
                        [row["point"][figure] - row["empty"][figure] for row in measured], terms)
        figures[figure] = {"terms": fit.coefficients, "relative_rms": fit.relative_rms,
                           "relative_max": fit.relative_max, "points": fit.points,
                           "leave_one_set_out": _leave_one_set_out(measured, figure, terms)}
    return figures


def fit_minor(raw: dict[str, Any], *, source: str = "",
              command: str = "python -m bench calibrate") -> tuple[str, dict[str, Any]]:
    """(minor, its coefficient entry) from a raw calibration file's contents."""
    version = _one_version(raw)
    major, minor_number = parse_minor(version)
    rows = _rows(raw)
    figures = _linear_fits(rows, LINEAR_FIGURES)
    served = _measured(rows, "aggregated_bytes")  # none where the minor serves no aggregated discovery
    figures["aggregated_bytes"] = _scale(served, "aggregated_bytes",
                                         [float(aggregated_bytes(row["crds"])) for row in served])
    figures["legacy_bytes"] = _scale(rows, "legacy_bytes", [float(legacy_bytes(row["crds"])) for row in rows])
    figures["legacy_requests"] = _exact(rows, "legacy_requests")
    figures["openapi_v3_paths"] = _exact(rows, "openapi_v3_paths")
    figures["install_seconds"], figures["establish_rate"] = _install(rows)
    real = [crd for measured in raw["sets"] if measured["set"]["origin"] != "synthetic"
            for crd in read_features(measured["files"])]
    entry = {
        "kubernetes_version": version,
        "baseline": _baseline(raw),
        # One CRD of the real provider set(s), on average: what a count alone is priced as.
        "typical_crd": {"served_versions": statistics.fmean(c.served for c in real) if real else 1.0,
                        "schema_bytes": statistics.fmean(c.schema_bytes for c in real) if real else 30_000.0,
                        "from": sorted({m["set"]["name"] for m in raw["sets"] if m["set"]["origin"] != "synthetic"})},
        "figures": figures,
        "provenance": {
            "measured": raw.get("when"), "fitted": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "machine": raw.get("machine"), "raw": source,
            "sets": [{**measured["set"], "crds": len(measured["files"])} for measured in raw["sets"]],
            "held_out": ["provider-gcp"],
            "command": command,
        },
    }
    return f"{major}.{minor_number}", entry


def write_minor(minor: str, entry: dict[str, Any], path: Path = COEFFICIENTS_FILE) -> Path:
    """Put one minor's coefficients into the data file (other minors are kept)."""
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError):
        document = {}
    if document.get("format") not in READABLE_FORMATS:
        document = {"format": FORMAT, "minors": {}}
    # Older minors keep their entries: each figure says its own shape, so the newer format reads them.
    document["format"] = FORMAT
    kept = (document["minors"].get(minor) or {}).get(ACTIVATION_KEY)
    # A direct calibration leaves the minor's activation path as it was: they are measured apart.
    document["minors"][minor] = {**entry, ACTIVATION_KEY: kept} if kept and ACTIVATION_KEY not in entry else entry
    document["minors"] = dict(sorted(document["minors"].items(), key=lambda item: parse_minor(item[0])))
    path.write_text(json.dumps(document, indent=1, sort_keys=False) + "\n")
    forget_loaded()
    return path


#: The activation path (Crossplane creates each CRD when an MRAP activates its MRD), fitted on the growth
#: from the MRDs installed and Inactive to every CRD Established.  Memory has no one-time term: a
#: Crossplane cluster holds CRDs already (its own), so a server's first-CRD cost is paid before any
#: activation; each activation's own figures start from a cluster with MRDs.
ACTIVATION_MEMORY_TERMS = ("crds", "schema_bytes")
#: The time from the MRAP's creation to the last CRD's Established transition: Crossplane's reaction
#: (``fixed``, paid once per activation) and its work per CRD and per schema byte.
ACTIVATION_TIME_TERMS = ("fixed", "crds", "schema_bytes")
ACTIVATION_FIGURES = {"rss_bytes": ACTIVATION_MEMORY_TERMS, "heap_bytes": ACTIVATION_MEMORY_TERMS,
                      "live_heap_bytes": ACTIVATION_MEMORY_TERMS, "activation_seconds": ACTIVATION_TIME_TERMS}


def fit_activation(raw: dict[str, Any], *, source: str = "",
                   command: str = "python -m bench calibrate --activation") -> tuple[str, dict[str, Any]]:
    """(minor, its ``activation`` entry) from an activation raw file (``bench/activation.py``): each figure's
    growth from before the MRAP to after it, fitted on the activated CRDs' features."""
    version = _one_version(raw)
    major, minor_number = parse_minor(version)
    figures = _linear_fits(_rows(raw), ACTIVATION_FIGURES)
    crossplane = sorted({str(measured.get("crossplane")) for measured in raw["sets"]})
    entry = {
        "kubernetes_version": version, "crossplane": ", ".join(crossplane), "figures": figures,
        "provenance": {
            "measured": raw.get("when"), "fitted": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "machine": raw.get("machine"), "raw": source,
            "sets": [{**measured["set"], "crds": len(measured["files"])} for measured in raw["sets"]],
            "held_out": ["provider-gcp", "synthetic-100-props150 (seed 9)"],
            "measured_with": "the set as one safe-start provider package through real Crossplane, then an MRAP *",
            "command": command,
        },
    }
    return f"{major}.{minor_number}", entry


def write_activation(minor: str, entry: dict[str, Any], path: Path = COEFFICIENTS_FILE) -> Path:
    """Put one minor's activation coefficients into the data file (beside its direct ones, which it needs)."""
    document = json.loads(path.read_text())
    if minor not in document.get("minors", {}):
        raise ValueError(f"{minor} has no direct coefficients: calibrate it first (python -m bench calibrate "
                         f"--kubernetes {minor})")
    document["minors"][minor][ACTIVATION_KEY] = entry
    path.write_text(json.dumps(document, indent=1, sort_keys=False) + "\n")
    forget_loaded()
    return path
