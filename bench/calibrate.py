"""``python -m bench calibrate``: measure what CRDs cost on fresh labs and fit the cost model.

Two phases, so that a model change never needs the labs again:

1. *measure* (``--measure-only`` stops after it): for each calibration set, a fresh lab of the
   default version (``--kubernetes MINOR``: a built older one); its figures empty (after the API
   server settles), then after loading the whole set in one go, once the API server is idle.
   Loads are ``crdscope load DIR`` at its defaults (the install time the model predicts).
   Figures: resident memory and Go heap (``/metrics``), aggregated discovery bytes, legacy
   group-versions and request latency, OpenAPI v3 paths and v2 bytes, etcd connections (from
   ``/proc``), when each CRD became Established.  The raw points go to
   ``~/.cache/crdscope/calibration/raw-<stamp>.json`` (``bench/results/`` keeps a copy).
2. *fit* (``--refit RAW [RAW ...]`` runs only this): least squares of each figure's growth against
   the sets' features (:mod:`crdscope.costmodel.fitting`), written with provenance into
   ``costmodel/coefficients.json`` for the lab's minor version.  Install time is
   ``max(CRDs / the loader's pace, server work) + tail``: only the server's work and the tail are fitted.

``--install-check`` prints predicted against measured install time for every held-out install kept in
``bench/results`` (no lab).

The GCP provider set is never used here: it is the held-out test (``crdscope estimate
--measure``).  Sets are a few hundred CRDs each (a 2-core shared machine).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crdscope.costmodel.measure import INSTALL_GOAL, MEMORY_GOAL
from crdscope.costmodel.measure import snapshot as measure_snapshot
from crdscope.lab.controlplane import LabState, admin_tls
from crdscope.lab.sockets import established_to_port
from crdscope.loader.synthetic import VERSION_NAMES, synthetic_documents
from crdscope.base.paths import cache_dir

from .common import BENCH_DIR, SHARED_CRDS, BenchError, isolate_environment, machine, run_timed, say
from .discovery import crdscope_command
from .labs import ADMIN_CONTEXT, established_times, fresh_lab, wait_for_memory, wait_until_idle

HELD_OUT = ("provider-gcp",)
LOAD_TIMEOUT_SECONDS = 3600.0


@dataclass(frozen=True)
class CalibrationSet:
    """A set of CRDs loaded into one fresh lab in two halves."""

    name: str
    #: "synthetic" or the name of a shared archive (``../shared/crds/<name>.tar.xz``)
    origin: str
    count: int
    schema_props: int = 40
    #: synthetic only: every CRD serves this many versions (0: the generator's own mix)
    versions: int = 0
    #: archives only: the first file taken (sorted by name)
    start: int = 0


SETS = (
    CalibrationSet("synthetic-300-props5", "synthetic", 300, schema_props=5),
    CalibrationSet("synthetic-150-props150", "synthetic", 150, schema_props=150),
    CalibrationSet("synthetic-75-props150", "synthetic", 75, schema_props=150),
    CalibrationSet("synthetic-200-props30-3versions", "synthetic", 200, schema_props=30, versions=3),
    CalibrationSet("synthetic-150-props60-2versions", "synthetic", 150, schema_props=60, versions=2),
    CalibrationSet("provider-aws-300", "provider-aws", 300),
    CalibrationSet("provider-aws-150-from-1000", "provider-aws", 150, start=1000),
)


def _with_versions(document: dict[str, Any], count: int) -> dict[str, Any]:
    """A synthetic CRD serving ``count`` versions (same schema each; the last one stored)."""
    first = document["spec"]["versions"][0]
    versions = [{**first, "name": name, "storage": index == count - 1}
                for index, name in enumerate(VERSION_NAMES[:count])]
    return {**document, "spec": {**document["spec"], "versions": versions}}


def materialise(chosen: CalibrationSet) -> list[Path]:
    """The set's CRD files (one per CRD, sorted), written once into the cache."""
    target = cache_dir() / "calibration" / "sets" / chosen.name
    stamp = target / ".complete"
    if not stamp.exists():
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        if chosen.origin == "synthetic":
            documents = synthetic_documents(chosen.count, schema_props=chosen.schema_props)
            for index, document in enumerate(documents):
                if chosen.versions:
                    document = _with_versions(document, chosen.versions)
                (target / f"{index:05d}.json").write_text(json.dumps(document))
        else:
            if chosen.origin in HELD_OUT:
                raise BenchError(f"{chosen.origin} is the held-out test set: never calibrate on it")
            with tarfile.open(SHARED_CRDS / f"{chosen.origin}.tar.xz", "r:xz") as tar:
                members = sorted((m for m in tar.getmembers() if m.isfile() and m.name.endswith(".yaml")),
                                 key=lambda m: m.name)
                for member in members[chosen.start:chosen.start + chosen.count]:
                    (target / Path(member.name).name).write_bytes(tar.extractfile(member).read())  # type: ignore[union-attr]
        stamp.write_text("")
    return sorted(p for p in target.iterdir() if p.suffix in (".json", ".yaml"))


def _whole(files: list[Path], chosen: CalibrationSet) -> Path:
    """A directory holding every file of the set (symlinks), loaded in one go."""
    directory = cache_dir() / "calibration" / "parts" / chosen.name
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    for path in files:
        (directory / path.name).symlink_to(path)
    return directory


# --------------------------------------------------------------------------- measuring a lab


def snapshot(state: LabState) -> dict[str, Any]:
    """Every figure the model predicts, read from the lab as it is now."""
    apiserver, etcd = state.components["apiserver"], state.components["etcd"]
    return measure_snapshot(state.server, admin_tls(state.pki_dir),
                            lambda: established_to_port(apiserver.pid, etcd.port))


def _load(state: LabState, directory: Path) -> dict[str, Any]:
    """``crdscope load DIR`` at its defaults: wall seconds, and the server's establish window."""
    started = time.time()
    seconds, done = run_timed([*crdscope_command(), "load", str(directory), "--kubeconfig", state.kubeconfig,
                               "--context", ADMIN_CONTEXT, "--json", "--new-run"],
                              timeout=LOAD_TIMEOUT_SECONDS, check=False)
    try:
        summary = json.loads(done.stdout)
    except ValueError:
        raise BenchError(f"crdscope load exited {done.returncode}: {done.stderr.strip()[-200:]}") from None
    # The pace is part of the point: the install-time model's floor is CRDs / pace.
    return {"load_seconds": seconds, "load_started": started, "established": summary.get("established"),
            "failed": summary.get("failed"), "load_rate_per_second": summary.get("rate_limit_per_s"),
            "load_concurrency": summary.get("concurrency")}


def _keep_profile(state: LabState, profiles: Path | None, name: str) -> None:
    """The server's heap profile after a forced collection, kept as ``profiles/name.pb.gz`` (if asked)."""
    if profiles is None:
        return
    import httpx

    from .heapprofile import save

    with httpx.Client(base_url=state.server, verify=admin_tls(state.pki_dir), timeout=300) as client:
        say(f"heap profile: {save(client, profiles / f'{name}.pb.gz')}")


def measure_set(chosen: CalibrationSet, kubernetes: str | None = None, profiles: Path | None = None) -> dict[str, Any]:
    """One fresh lab: the empty point, then the whole set loaded in one go and its point.

    One load per lab, as ``crdscope estimate --measure`` does: measured on 1.37 with 150 CRDs of
    150 properties, loading in two halves left 15% more RSS than one load (30% more when the
    OpenAPI v2 document was built between the halves), so a point after a first load is not the
    point a user's one install reaches.
    """
    files = materialise(chosen)
    whole = _whole(files, chosen)
    wait_for_memory(2.0 + 0.01 * len(files))
    say(f"calibrate: {chosen.name}: {len(files)} CRDs")
    points = []
    # The machine's load beside each point: a busy machine lengthens installs (the install-time fit).
    load_before = os.getloadavg()
    with fresh_lab(kubernetes) as state:
        wait_until_idle(state)
        points.append({"files": 0, **snapshot(state)})
        _keep_profile(state, profiles, f"{chosen.name}-direct-before")
        load = _load(state, whole)
        times = sorted(t for t in established_times(state).values() if t is not None)
        wait_until_idle(state)
        points.append({"files": len(files), **load, "load_average_before": load_before,
                       "load_average_after": os.getloadavg(), "established_total": len(times),
                       "established_first": times[0] if times else None,
                       "established_last": times[-1] if times else None, **snapshot(state)})
        _keep_profile(state, profiles, f"{chosen.name}-direct-after")
        held = points[-1].get("live_heap_bytes")
        say(f"calibrate: {chosen.name}: {len(files)} CRDs, RSS {points[-1]['rss_bytes'] / 2**20:.0f} MiB, held "
            + (f"{held / 2**20:.0f} MiB" if held else "not read"))
        kubernetes = state.kubernetes_version
    return {"set": chosen.__dict__, "kubernetes": kubernetes, "files": [str(p) for p in files],
            "points": points}


def measure(sets: tuple[CalibrationSet, ...], kubernetes: str | None = None, profiles: bool = False) -> Path:
    """Measure every set on labs of ``kubernetes`` (default: the lab's version); the raw file's path."""
    raw: dict[str, Any] = {"when": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                           "machine": machine(), "sets": []}
    directory = cache_dir() / "calibration"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"raw-{raw['when'].replace(':', '')}.json"
    profile_dir = (BENCH_DIR / "results" / "profiles" / f"{raw['when'].replace(':', '').replace('-', '')}-"
                   f"{kubernetes or 'default'}") if profiles else None
    for chosen in sets:
        raw["sets"].append(measure_set(chosen, kubernetes, profile_dir))
        path.write_text(json.dumps(raw, indent=1))  # each set kept as soon as it is measured
    (BENCH_DIR / "results").mkdir(exist_ok=True)
    shutil.copy(path, BENCH_DIR / "results" / f"calibration-{path.name}")
    return path


# --------------------------------------------------------------------------- install time, held out

#: Installs of CRDs the calibration never saw, on quiet machines, by ``crdscope load DIR`` at its defaults
#: (20 CRDs/s, 8 in flight): (results file, source as ``crdscope estimate`` reads it, seed, schema props).
#: Left out: ``footprint-20261204T205218Z`` (its quiet run was disturbed by a copy running beside it),
#: the first calibration's checks (load average 34) and the ``versions`` runs (same pace, but a sampler
#: polled the server all through the install and the 1.26 and 1.30 runs overlapped: 1.37 took 325 s
#: there against 104-128 s in the quiet footprint installs).
ESTIMATE_CHECKS = (("provider-gcp", "provider-gcp.tar.xz", 1, 40),
                   ("synthetic-100-props150", "synthetic:100", 9, 150),
                   ("synthetic-300-props5", "synthetic:300", 9, 5))
#: Where a held-out install's results file came from: ``estimate-measure-<stamp>-<minor>-<set>.json``.
ESTIMATE_FILE = re.compile(r"^estimate-measure-(\d{8}T\d{6}Z)-(\d+\.\d+)-(.+)\.json$")
FOOTPRINT_QUIET = ("footprint-20261204T203743Z.json", "footprint-20261204T223324Z.json",
                   "footprint-20261205T124710Z.json", "footprint-20261205T153814Z.json",
                   "footprint-20261205T162240Z.json", "footprint-20261205T183539Z.json",
                   "footprint-20261205T185701Z.json")


def _check_source(name: str) -> tuple[str, int, int]:
    """(source as ``crdscope estimate`` reads it, seed, schema props) of a held-out set by name."""
    for check_name, source, seed, props in ESTIMATE_CHECKS:
        if check_name == name:
            return (str(SHARED_CRDS / source) if source.endswith(".tar.xz") else source), seed, props
    raise BenchError(f"{name}: not a held-out set (one of: {', '.join(c[0] for c in ESTIMATE_CHECKS)})")


def measure_held_out(kubernetes: str) -> list[Path]:
    """``crdscope estimate SET --kubernetes MINOR --measure --json`` for every held-out set; the files written.

    Each run installs its set on its own fresh lab of ``kubernetes`` and compares what it measured with
    what the model predicted; the whole answer is kept, with the machine and its load before and after
    (a busy machine moves install time most).
    """
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    results = BENCH_DIR / "results"
    results.mkdir(exist_ok=True)
    written = []
    for name, _, _, _ in ESTIMATE_CHECKS:
        source, seed, props = _check_source(name)
        wait_for_memory(4.0)
        say(f"held out: {name} on {kubernetes}")
        load_before = os.getloadavg()
        seconds, done = run_timed([*crdscope_command(), "estimate", source, "--kubernetes", kubernetes, "--measure",
                                   "--json", "--seed", str(seed), "--schema-props", str(props)],
                                  timeout=LOAD_TIMEOUT_SECONDS, check=False)
        try:
            answer = json.loads(done.stdout)
        except ValueError:
            raise BenchError(f"estimate --measure {name} on {kubernetes} exited {done.returncode}: "
                             f"{done.stderr.strip()[-300:]}") from None
        answer["bench"] = {"command_seconds": seconds, "machine": machine(), "load_average_before": load_before,
                           "load_average_after": os.getloadavg(), "exit": done.returncode}
        path = results / f"estimate-measure-{stamp}-{kubernetes}-{name}.json"
        path.write_text(json.dumps(answer, indent=1))
        written.append(path)
    return written


def _held_out_files() -> list[tuple[str, str, Path]]:
    """(minor, set name, path) of every held-out results file kept, oldest stamp first."""
    found = []
    for path in sorted((BENCH_DIR / "results").glob("estimate-measure-*.json")):
        match = ESTIMATE_FILE.match(path.name)
        if match and any(match.group(3) == c[0] for c in ESTIMATE_CHECKS):
            found.append((match.group(2), match.group(3), path))
    return found


def _measured(path: Path, prefix: str) -> float | None:
    rows = [row for row in json.loads(path.read_text())["comparison"] if row["figure"].startswith(prefix)]
    return rows[0]["measured"] if rows and rows[0]["measured"] is not None else None


def _measured_installs() -> list[dict[str, Any]]:
    """(minor, set, source, seed, props, measured seconds as text, a number to compare, file)."""
    found = []
    results = BENCH_DIR / "results"
    for minor, name, path in _held_out_files():
        source, seed, props = _check_source(name)
        measured = _measured(path, "install")
        if measured is not None:
            found.append({"minor": minor, "set": name, "source": source, "seed": seed, "props": props,
                          "measured": measured, "shown": f"{measured:.1f}", "file": path.name})
    for file in FOOTPRINT_QUIET:
        document = json.loads((results / file).read_text())
        quiet = document["figures"]["quiet_install_s"]
        major, minor_number = document["kubernetes"].lstrip("v").split(".")[:2]
        found.append({"minor": f"{major}.{minor_number}", "set": "provider-aws (all)",
                      "source": str(SHARED_CRDS / "provider-aws.tar.xz"), "seed": 1, "props": 40,
                      "measured": quiet["median"], "file": file,
                      "shown": f"{quiet['median']:.1f} ({quiet['min']:.0f}-{quiet['max']:.0f}, {quiet['n']} runs)"})
    return found


def _read_crds(source: str, seed: int, props: int) -> list[Any]:
    import asyncio

    from crdscope.costmodel.source import read_source

    return list(asyncio.run(read_source(source, seed=seed, schema_props=props)).crds)


def install_check() -> list[dict[str, Any]]:
    """Predicted against measured install time of every held-out install (a table's rows)."""
    from crdscope.costmodel.model import estimate

    rows = []
    for measured in _measured_installs():
        crds = _read_crds(measured["source"], measured["seed"], measured["props"])
        predicted = estimate(crds, measured["minor"]).install_seconds
        rows.append({**measured, "crds": len(crds), "predicted": predicted.value, "low": predicted.low,
                     "high": predicted.high, "error": (predicted.value - measured["measured"]) / measured["measured"]})
    return rows


def held_out_check() -> list[dict[str, Any]]:
    """Memory held (heap after a forced collection), RSS added and install time, predicted now against
    measured, for every held-out file kept.

    Predictions come from today's coefficients (``costmodel/coefficients.json``), not from the file:
    a refit changes them, the measurement does not.  A row is judged on memory held and install
    time; files from before 2026-12-07 did not measure memory held, and are not judged.
    """
    from crdscope.costmodel.coefficients import for_minor
    from crdscope.costmodel.model import estimate

    rows = []
    crds_by_set: dict[str, list[Any]] = {}
    for minor, name, path in _held_out_files():
        if name not in crds_by_set:
            crds_by_set[name] = _read_crds(*_check_source(name))
        crds = crds_by_set[name]
        predicted = estimate(crds, minor)
        memory, install = _measured(path, "memory added"), _measured(path, "install")
        held = _measured(path, "memory held")
        live = predicted.live_heap_bytes
        row = {"minor": minor, "set": name, "crds": len(crds), "file": path.name,
               "model": for_minor(minor).minor,
               "held_predicted_mib": live.value / 2**20 if live else None, "held_measured_mib": held,
               "memory_predicted_mib": predicted.memory_bytes.value / 2**20,
               "memory_low_mib": predicted.memory_bytes.low / 2**20,
               "memory_high_mib": predicted.memory_bytes.high / 2**20,
               "memory_measured_mib": memory,
               "install_predicted_s": predicted.install_seconds.value, "install_measured_s": install}
        row["held_error"] = _error(row["held_predicted_mib"], held)
        row["memory_error"] = _error(row["memory_predicted_mib"], memory)
        row["install_error"] = _error(row["install_predicted_s"], install)
        row["judged"] = row["model"] == minor and row["held_error"] is not None
        row["met"] = (row["judged"] and abs(row["held_error"]) <= MEMORY_GOAL
                      and row["install_error"] is not None and abs(row["install_error"]) <= INSTALL_GOAL)
        rows.append(row)
    return rows


def _error(predicted: float | None, measured: float | None) -> float | None:
    return None if predicted is None or not measured else (predicted - measured) / measured


def _held_out_table(rows: list[dict[str, Any]]) -> str:
    def error(value: float | None) -> str:
        return "-" if value is None else f"{value:+.1%}"

    def mib(value: float | None) -> str:
        return "-" if value is None else f"{value:.0f}"

    lines = ["| minor | set (CRDs) | results file | memory held MiB: predicted / measured / error "
             "| RSS added MiB: predicted (interval) / measured / error, in interval "
             "| install s: predicted / measured / error | both goals met |", "|---|---|---|---|---|---|---|"]
    own = [r for r in rows if r["judged"]]
    rows_elsewhere = {r["minor"]: r["model"] for r in rows if r["model"] != r["minor"]}
    for r in rows:
        install = "-" if r["install_measured_s"] is None else f"{r['install_measured_s']:.1f}"
        measured = r["memory_measured_mib"]
        inside = "-" if measured is None else (
            "yes" if r["memory_low_mib"] <= measured <= r["memory_high_mib"] else "no")
        verdict = ("yes" if r["met"] else "no") if r["judged"] else "not judged"
        lines.append(f"| {r['minor']} | {r['set']} ({r['crds']}) | {r['file']} | {mib(r['held_predicted_mib'])} / "
                     f"{mib(r['held_measured_mib'])} / {error(r['held_error'])} | {r['memory_predicted_mib']:.0f} "
                     f"({r['memory_low_mib']:.0f}-{r['memory_high_mib']:.0f}) / {mib(measured)} / "
                     f"{error(r['memory_error'])}, {inside} | {r['install_predicted_s']:.1f} / {install} / "
                     f"{error(r['install_error'])} | {verdict} |")
    by_minor: dict[str, list[bool]] = {}
    for r in own:
        by_minor.setdefault(r["minor"], []).append(r["met"])
    every = sorted((m for m, met in by_minor.items() if all(met)), key=lambda m: tuple(map(int, m.split("."))))
    lines.append("")
    lines.append(f"Minors with every judged held-out set within {MEMORY_GOAL:.0%} memory held and {INSTALL_GOAL:.0%} "
                 f"install time: {', '.join(every) or 'none'} ({len(every)} of {len(by_minor)} judged).")
    for minor, model in sorted(rows_elsewhere.items()):
        lines.append(f"{minor}: not calibrated, priced with {model}'s coefficients (not judged).")
    return "\n".join(lines)


def _install_table(rows: list[dict[str, Any]]) -> str:
    lines = ["| minor | set (CRDs) | results file | predicted s (interval) | measured s | error |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['minor']} | {r['set']} ({r['crds']}) | {r['file']} | {r['predicted']:.1f} "
              f"({r['low']:.0f}-{r['high']:.0f}) | {r['shown']} | {r['error']:+.1%} |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench calibrate", description=__doc__)
    parser.add_argument("--sets", default=",".join(s.name for s in SETS),
                        help="comma-separated calibration sets [default: all]")
    parser.add_argument("--measure-only", action="store_true", help="measure, do not fit")
    parser.add_argument("--kubernetes", metavar="MINOR",
                        help="calibrate this built Kubernetes minor, e.g. 1.26 [default: the lab's version]")
    parser.add_argument("--refit", type=Path, metavar="RAW", nargs="+",
                        help="fit raw files measured before, one minor each (no labs)")
    parser.add_argument("--install-check", action="store_true",
                        help="print predicted against measured install time of the held-out installs in "
                             "bench/results (no labs)")
    parser.add_argument("--held-out", action="store_true",
                        help="install every held-out set on fresh labs of --kubernetes with `crdscope estimate "
                             "--measure`, keep the answers in bench/results, then print --check")
    parser.add_argument("--full", action="store_true",
                        help="for each minor of --kubernetes (comma-separated): calibrate, fit, install the "
                             "held-out sets; then print --check (the held-out table from one command)")
    parser.add_argument("--check", action="store_true",
                        help="print memory and install time, predicted by today's coefficients against "
                             "measured, for every held-out file in bench/results (no labs)")
    parser.add_argument("--activation", action="store_true",
                        help="the Crossplane activation path instead of direct installs (bench/activation.py): "
                             "each set installed as MRDs through real Crossplane and activated by an MRAP; with "
                             "--held-out, --check, --full and --refit likewise")
    parser.add_argument("--heap-profiles", action="store_true",
                        help="keep the API server's heap profile at each measured point (bench/results/profiles)")
    args = parser.parse_args(argv)
    if args.activation:
        return _activation_main(parser, args)
    if args.install_check:
        print(_install_table(install_check()))
        return 0
    if args.full:
        if not args.kubernetes:
            parser.error("--full needs --kubernetes MINOR[,MINOR...]")
        isolate_environment()
        from crdscope.costmodel.calibration import fit_minor, write_minor

        for minor in [m.strip() for m in args.kubernetes.split(",") if m.strip()]:
            raw_path = measure(_chosen_sets(parser, args.sets), minor, args.heap_profiles)
            fitted_minor, fitted = fit_minor(json.loads(raw_path.read_text()), source=raw_path.name,
                                             command=f"python -m bench calibrate --full --kubernetes {minor}")
            say(f"calibrate: {fitted_minor} fitted from {raw_path} into {write_minor(fitted_minor, fitted)}")
            for path in measure_held_out(minor):
                say(f"held out: {path}")
        print(_held_out_table(held_out_check()))
        return 0
    if args.held_out:
        if not args.kubernetes:
            parser.error("--held-out needs --kubernetes MINOR")
        isolate_environment()
        for path in measure_held_out(args.kubernetes):
            say(f"held out: {path}")
        args.check = True
    if args.check:
        print(_held_out_table(held_out_check()))
        return 0
    if args.refit:
        raw_paths = list(args.refit)
    else:
        wanted = [name.strip() for name in args.sets.split(",") if name.strip()]
        unknown = [name for name in wanted if name not in {s.name for s in SETS}]
        if unknown:
            parser.error(f"unknown set {', '.join(unknown)} (one of: {', '.join(s.name for s in SETS)})")
        isolate_environment()
        raw_paths = [measure(tuple(s for s in SETS if s.name in wanted), args.kubernetes, args.heap_profiles)]
        say(f"calibrate: raw figures in {raw_paths[0]}")
        if args.measure_only:
            return 0
    from crdscope.costmodel.calibration import fit_minor, write_minor

    for names, raw in merged_raws(raw_paths):
        command = f"python -m bench calibrate --refit {' '.join(names)}" if args.refit else "python -m bench calibrate"
        minor, fitted = fit_minor(raw, source=" + ".join(names), command=command)
        path = write_minor(minor, fitted)
        install = fitted["figures"]["install_seconds"]
        print(json.dumps({"minor": minor, "coefficients": str(path), "raw": names,
                          "install_seconds": {k: install[k] for k in ("terms", "tail_seconds", "relative_rms",
                                                                       "leave_one_set_out")}}))
    return 0


def merged_raws(paths: list[Path]) -> list[tuple[list[str], dict[str, Any]]]:
    """Raw files grouped by the Kubernetes version they measured, each group's sets in one raw (a minor
    measured in several sittings, a few sets each, is fitted once on all of them); (file names, raw)."""
    groups: dict[str, tuple[list[str], dict[str, Any]]] = {}
    for path in paths:
        try:
            raw = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise BenchError(f"--refit {path}: {exc}") from None
        versions = {measured["kubernetes"] for measured in raw["sets"]}
        if len(versions) != 1:
            raise BenchError(f"--refit {path}: one Kubernetes version per raw file, not {sorted(versions)}")
        names, merged = groups.setdefault(versions.pop(), ([], {**raw, "sets": []}))
        names.append(path.name)
        merged["sets"] = merged["sets"] + raw["sets"]
        merged["when"] = min(merged.get("when") or raw["when"], raw["when"])
    return list(groups.values())


def _chosen_sets(parser: argparse.ArgumentParser, sets: str) -> tuple[CalibrationSet, ...]:
    wanted = [name.strip() for name in sets.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in {s.name for s in SETS}]
    if unknown:
        parser.error(f"unknown set {', '.join(unknown)} (one of: {', '.join(s.name for s in SETS)})")
    return tuple(s for s in SETS if s.name in wanted)


def _activation_main(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """``--activation``: measure and fit the Crossplane activation path (``--refit``: fit only; ``--held-out``:
    the held-out sets through Crossplane; ``--check``: their table; ``--full``: all of it, minor by minor)."""
    from . import activation

    if args.check:
        print(activation.check_table(activation.check_rows()))
        return 0
    if args.refit:
        activation.fit(list(args.refit), "python -m bench calibrate --activation --refit "
                       + " ".join(p.name for p in args.refit))
        return 0
    if not args.kubernetes:
        parser.error("--activation needs --kubernetes MINOR[,MINOR...] (or --check, --refit)")
    isolate_environment()
    for minor in [m.strip() for m in args.kubernetes.split(",") if m.strip()]:
        if not args.held_out or args.full:
            raw_path = activation.measure(_chosen_sets(parser, args.sets), minor, args.heap_profiles)
            say(f"activation: raw points in {raw_path}")
            if args.measure_only:
                continue
            activation.fit([raw_path], f"python -m bench calibrate --activation --kubernetes {minor}")
        if args.held_out or args.full:
            for path in activation.measure_held_out(minor, profiles=args.heap_profiles):
                say(f"activation held out: {path}")
    if args.held_out or args.full:
        print(activation.check_table(activation.check_rows()))
    return 0
