"""``python -m bench calibrate --activation``: what CRDs cost when Crossplane creates them, by activating MRDs.

The cost model's direct coefficients come from ``crdscope load`` (a client creating CRDs); on a
Crossplane v2 cluster a provider's CRDs are created by Crossplane instead, when an MRAP activates their
ManagedResourceDefinitions, and they held 1.5-2.1 times the direct figure (``bench mrap``, 2026-12-06).
This measures that path on its own and fits it apart (``costmodel/coefficients.json``, a minor's
``activation`` entry):

1. *measure*, per calibration set (the direct calibration's sets, ``bench.calibrate.SETS``): a fresh lab
   of the minor with real Crossplane (no default MRAP), the set's CRDs as one ``safe-start`` provider
   package (built with the real ``crossplane xpkg``, pushed to the lab's registry), a Provider that
   installs it (every CRD an Inactive MRD, none created), the "before" figures once the server is idle,
   an MRAP ``*``, then once every CRD is Established and published and the server idle, the "after"
   figures (``costmodel.activation_measure``, what ``crdscope estimate --activate --measure`` runs).
   A provider's ProviderConfig kinds are left out: Crossplane v2.4 installs them as plain CRDs.
   ``--heap-profiles`` keeps the server's heap profile at both points (``bench/results/profiles``).
2. *fit*: the growth from before to after of memory held (heap in use after a forced collection),
   RSS and the Go heap against the activated CRDs' features, and the time from the MRAP's creation to
   the last CRD's Established transition (:func:`crdscope.costmodel.calibration.fit_activation`).
3. *held out* (``--held-out``): sets the fit never saw, through the same path, predicted by the
   activation coefficients against measured (``--check`` prints the table from the kept files).

Raw points: ``~/.cache/crdscope/calibration/activation-raw-<stamp>.json`` (``bench/results`` keeps a
copy); held-out answers: ``bench/results/activation-check-<stamp>-<minor>-<set>.json``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import yaml

from crdscope.base.crossplane import becomes_mrd
from crdscope.base.paths import cache_dir
from crdscope.costmodel.calibration import fit_activation, write_activation

from .calibrate import CalibrationSet, materialise
from .common import BENCH_DIR, BenchError, machine, say
from .labs import crd_dir, crd_files, wait_for_memory

#: Sets the activation fit never sees: (name, origin, seed, schema props).  The GCP provider is the
#: direct model's held-out set too; the synthetic set is another seed and size than any calibration set.
HELD_OUT = (("provider-gcp", "provider-gcp", 1, 40), ("synthetic-100-props150", "synthetic:100", 9, 150))
CHECK_FILE = re.compile(r"^activation-check-(\d{8}T\d{6}Z)-(\d+\.\d+)-(.+)\.json$")
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def crd_documents(files: list[Path]) -> list[dict[str, Any]]:
    """The CRDs of ``files`` that Crossplane makes MRDs of (its ProviderConfig kinds stay plain CRDs)."""
    found = []
    for path in files:
        text = path.read_text()
        document = json.loads(text) if path.suffix == ".json" else yaml.load(text, Loader=_LOADER)
        if isinstance(document, dict) and document.get("kind") == "CustomResourceDefinition" \
                and becomes_mrd(str(document["metadata"]["name"])):
            found.append(document)
    return found


def selection_of(documents: list[dict[str, Any]]) -> Any:
    """The CRDs as an MRD selection activated by one MRAP ``*`` (what ``estimate --activate`` measures)."""
    from crdscope.costmodel.features import features_of_spec
    from crdscope.costmodel.mrds import MRDSelection

    ordered = sorted(documents, key=lambda d: str(d["metadata"]["name"]))
    crds = tuple(features_of_spec(str(d["metadata"]["name"]), d["spec"]) for d in ordered)
    clean = tuple({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                   "metadata": {"name": d["metadata"]["name"]}, "spec": d["spec"]} for d in ordered)
    return MRDSelection(("*",), crds, len(crds), (), clean)


def _stamp() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")


def measure_through_crossplane(name: str, documents: list[dict[str, Any]], minor: str,
                               profiles: Path | None = None) -> dict[str, Any]:
    """One fresh lab with Crossplane: the documents installed as MRDs, activated by an MRAP ``*``; the points."""
    from crdscope.costmodel.activation_measure import measure_activation

    from .heapprofile import save

    def keep_profile(point: str, state: Any) -> None:
        if profiles is None:
            return
        import httpx

        from crdscope.lab.controlplane import admin_tls

        with httpx.Client(base_url=state.server, verify=admin_tls(state.pki_dir), timeout=300) as client:
            say(f"heap profile: {save(client, profiles / f'{name}-activation-{point}.pb.gz')}")

    selection = selection_of(documents)
    wait_for_memory(3.0 + 0.01 * len(documents))
    say(f"activation: {name}: {len(documents)} CRDs as MRDs on {minor}")
    load_before = os.getloadavg()
    measured = measure_activation(selection, minor, say=say, lab_name=f"calib-{os.getpid()}", at_point=keep_profile)
    after = {**measured.after, "activation_seconds": measured.activation_seconds,
             "load_average_before": load_before, "load_average_after": os.getloadavg()}
    held = (after.get("live_heap_bytes") or 0) - (measured.before.get("live_heap_bytes") or 0)
    say(f"activation: {name}: {len(documents)} CRDs Established {measured.activation_seconds:.0f} s after the MRAP, "
        f"held +{held / 2**20:.0f} MiB, RSS +{(after['rss_bytes'] - measured.before['rss_bytes']) / 2**20:.0f} MiB")
    return {"kubernetes": measured.kubernetes_version, "crossplane": measured.crossplane_version,
            "names": [crd.name for crd in selection.crds],
            "points": [{"files": 0, **measured.before, "activation_seconds": 0.0},
                       {"files": len(documents), **after}]}


def _set_documents(chosen: CalibrationSet) -> tuple[list[Path], list[dict[str, Any]]]:
    """A calibration set's files that become MRDs, and their documents."""
    files = materialise(chosen)
    kept = [(path, document) for path in files for document in crd_documents([path])]
    return [path for path, _ in kept], [document for _, document in kept]


def measure(sets: tuple[CalibrationSet, ...], minor: str, profiles: bool = False) -> Path:
    """Every set through Crossplane on labs of ``minor``; the raw file's path (each set kept when measured)."""
    raw: dict[str, Any] = {"when": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "machine": machine(),
                           "path": "activation", "sets": []}
    directory = cache_dir() / "calibration"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"activation-raw-{raw['when'].replace(':', '')}.json"
    profile_dir = BENCH_DIR / "results" / "profiles" / f"{_stamp()}-{minor}" if profiles else None
    for chosen in sets:
        files, documents = _set_documents(chosen)
        measured = measure_through_crossplane(chosen.name, documents, minor, profile_dir)
        raw["sets"].append({"set": chosen.__dict__, "files": [str(p) for p in files], **measured})
        raw["kubernetes"] = measured["kubernetes"]
        path.write_text(json.dumps(raw, indent=1))
    (BENCH_DIR / "results").mkdir(exist_ok=True)
    shutil.copy(path, BENCH_DIR / "results" / f"calibration-{path.name}")
    return path


# --------------------------------------------------------------------------- held out


def held_out_documents(name: str) -> tuple[list[dict[str, Any]], str]:
    """A held-out set's CRDs that become MRDs, and how ``crdscope estimate`` names its source."""
    for check, origin, seed, props in HELD_OUT:
        if check != name:
            continue
        if origin.startswith("synthetic:"):
            from crdscope.loader.synthetic import synthetic_documents

            return ([d for d in synthetic_documents(int(origin.split(":")[1]), seed=seed, schema_props=props)
                     if becomes_mrd(str(d["metadata"]["name"]))], f"{origin} --seed {seed} --schema-props {props}")
        return crd_documents(crd_files(crd_dir(origin, None))), f"../shared/crds/{origin}.tar.xz"
    raise BenchError(f"{name}: not a held-out set (one of: {', '.join(h[0] for h in HELD_OUT)})")


def measure_held_out(minor: str, names: list[str] | None = None, profiles: bool = False) -> list[Path]:
    """Each held-out set through Crossplane on a fresh lab of ``minor``; the answer files written."""
    stamp = _stamp()
    written = []
    for name, _, _, _ in HELD_OUT:
        if names and name not in names:
            continue
        documents, source = held_out_documents(name)
        profile_dir = BENCH_DIR / "results" / "profiles" / f"{stamp}-{minor}" if profiles else None
        measured = measure_through_crossplane(name, documents, minor, profile_dir)
        path = BENCH_DIR / "results" / f"activation-check-{stamp}-{minor}-{name}.json"
        path.write_text(json.dumps({"set": name, "source": source, "machine": machine(), **measured}, indent=1))
        written.append(path)
    return written


def check_rows() -> list[dict[str, Any]]:
    """Every kept held-out file: memory held, RSS and activation time predicted by today's activation
    coefficients (the path's own) against measured."""
    from crdscope.costmodel.model import ACTIVATION, estimate

    rows = []
    cache: dict[str, list[Any]] = {}
    for path in sorted((BENCH_DIR / "results").glob("activation-check-*.json")):
        match = CHECK_FILE.match(path.name)
        if not match:
            continue
        minor, name = match.group(2), match.group(3)
        if name not in cache:
            cache[name] = list(selection_of(held_out_documents(name)[0]).crds)
        document = json.loads(path.read_text())
        before, after = document["points"]
        predicted = estimate(cache[name], minor, path=ACTIVATION, target=_cluster())
        rows.append(_check_row(minor, name, path.name, predicted, before, after))
    return rows


def _cluster() -> Any:
    """A Crossplane cluster: it holds CRDs already (the one-time cost of a server's first CRDs is paid)."""
    from crdscope.costmodel.model import Target

    return Target(crds=1)


def _check_row(minor: str, name: str, file: str, predicted: Any, before: dict[str, Any],
               after: dict[str, Any]) -> dict[str, Any]:
    from crdscope.costmodel.measure import INSTALL_GOAL, MEMORY_GOAL

    mib = float(1 << 20)
    held = predicted.live_heap_bytes
    measured_held = (after["live_heap_bytes"] - before["live_heap_bytes"]) / mib \
        if after.get("live_heap_bytes") and before.get("live_heap_bytes") else None
    measured_rss = (after["rss_bytes"] - before["rss_bytes"]) / mib
    row = {"minor": minor, "set": name, "crds": predicted.crds, "file": file, "model": predicted.path_note,
           "held_predicted_mib": held.value / mib if held else None, "held_measured_mib": measured_held,
           "rss_predicted_mib": predicted.memory_bytes.value / mib, "rss_low_mib": predicted.memory_bytes.low / mib,
           "rss_high_mib": predicted.memory_bytes.high / mib, "rss_measured_mib": measured_rss,
           "seconds_predicted": predicted.install_seconds.value, "seconds_measured": after["activation_seconds"],
           "load_average": after.get("load_average_before")}
    row["held_error"] = _error(row["held_predicted_mib"], measured_held)
    row["rss_error"] = _error(row["rss_predicted_mib"], measured_rss)
    row["seconds_error"] = _error(row["seconds_predicted"], row["seconds_measured"])
    row["rss_inside"] = row["rss_low_mib"] <= measured_rss <= row["rss_high_mib"]
    row["met"] = (row["held_error"] is not None and abs(row["held_error"]) <= MEMORY_GOAL
                  and row["seconds_error"] is not None and abs(row["seconds_error"]) <= INSTALL_GOAL)
    return row


def _error(predicted: float | None, measured: float | None) -> float | None:
    return None if predicted is None or not measured else (predicted - measured) / measured


def check_table(rows: list[dict[str, Any]]) -> str:
    """The held-out table of RESULTS.md."""
    def error(value: float | None) -> str:
        return "-" if value is None else f"{value:+.1%}"

    def mib(value: float | None) -> str:
        return "-" if value is None else f"{value:,.0f}"

    lines = ["| minor | set (CRDs) | results file | memory held MiB: predicted / measured / error "
             "| RSS added MiB: predicted (interval) / measured / error, in interval "
             "| MRAP to all Established s: predicted / measured / error | load avg (1 min) | goals met |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        load = "-" if not r["load_average"] else f"{r['load_average'][0]:.1f}"
        lines.append(
            f"| {r['minor']} | {r['set']} ({r['crds']}) | {r['file']} | {mib(r['held_predicted_mib'])} / "
            f"{mib(r['held_measured_mib'])} / {error(r['held_error'])} | {mib(r['rss_predicted_mib'])} "
            f"({mib(r['rss_low_mib'])}-{mib(r['rss_high_mib'])}) / {mib(r['rss_measured_mib'])} / "
            f"{error(r['rss_error'])}, {'yes' if r['rss_inside'] else 'no'} | {r['seconds_predicted']:.0f} / "
            f"{r['seconds_measured']:.0f} / {error(r['seconds_error'])} | {load} | {'yes' if r['met'] else 'no'} |")
    return "\n".join(lines)


def fit(raw_paths: list[Path], command: str) -> list[str]:
    """Fit the activation path from raw files into ``costmodel/coefficients.json`` (files of one minor
    together: a minor measured in several sittings); the minors."""
    from .calibrate import merged_raws

    minors = []
    for names, raw in merged_raws(raw_paths):
        minor, entry = fit_activation(raw, source=" + ".join(names), command=command)
        write_activation(minor, entry)
        say(f"activation fitted for {minor}: " + "; ".join(
            f"{name} {figure['terms']} rms {figure['relative_rms']:.1%} loso {figure['leave_one_set_out']}"
            for name, figure in entry["figures"].items()))
        minors.append(minor)
    return minors
