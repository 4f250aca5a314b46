"""Shared benchmark plumbing: alternating runs, statistics, the machine, results files.

This machine is shared and noisy, so absolute times drift; every benchmark
alternates its contenders run by run (A B A B ...) and reports ratios
measured pair by pair, with min/median/max over at least five runs.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_MD = BENCH_DIR / "RESULTS.md"
SHARED_CRDS = BENCH_DIR.parent.parent / "shared" / "crds"


@dataclass
class Options:
    """How a benchmark run is sized and where it writes."""

    quick: bool = False  # smoke sizes (tests run these)
    runs: int = 5
    output: Path = BENCH_DIR / "results"
    append_results_md: bool = True
    sizes: tuple[int | None, ...] = (500, None)  # None = the whole set


def stats(values: list[float]) -> dict[str, float]:
    """min / median / max (and n) of a list of figures."""
    if not values:
        return {"n": 0}
    return {"n": len(values), "min": min(values), "median": statistics.median(values), "max": max(values)}


def alternate(contenders: dict[str, Callable[[], float]], runs: int) -> dict[str, list[float]]:
    """Run each contender ``runs`` times, interleaved (A B C A B C ...), collecting seconds."""
    results: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(runs):
        for name, run in contenders.items():
            results[name].append(run())
    return results


def ratios(numerator: list[float], denominator: list[float]) -> list[float]:
    """Pairwise ratios of two interleaved series (run i of one over run i of the other)."""
    return [a / b for a, b in zip(numerator, denominator) if b > 0]


def timed(function: Callable[[], Any]) -> float:
    """Wall seconds of one call."""
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory_gib = 0.0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                memory_gib = int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(memory_gib, 1),
            "kernel": platform.release(), "python": platform.python_version(),
            "kubectl": kubectl_version()}


def kubectl_version() -> str:
    try:
        out = subprocess.run(["kubectl", "version", "--client", "-o", "json"], capture_output=True,
                             text=True, timeout=20).stdout
        return json.loads(out)["clientVersion"]["gitVersion"]
    except (OSError, ValueError, KeyError, subprocess.TimeoutExpired):
        return ""


@dataclass
class Result:
    """One benchmark's outcome: figures, goals and whether each was met."""

    name: str
    kubernetes: str
    sizes: str
    figures: dict[str, Any] = field(default_factory=dict)
    goals: dict[str, bool | None] = field(default_factory=dict)  # None: not measured
    notes: list[str] = field(default_factory=list)

    def write(self, options: Options) -> Path:
        """Write the JSON result and (unless disabled) append a row to RESULTS.md."""
        options.output.mkdir(parents=True, exist_ok=True)
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        document = {"name": self.name, "when": stamp, "machine": machine(), "kubernetes": self.kubernetes,
                    "sizes": self.sizes, "quick": options.quick, "figures": self.figures,
                    "goals": self.goals, "notes": self.notes}
        path = options.output / f"{self.name}-{stamp}.json"
        path.write_text(json.dumps(document, indent=2, default=str))
        if options.append_results_md and not options.quick:
            append_row(document)
        return path


def _goal_text(goals: dict[str, bool | None]) -> str:
    marks = {True: "met", False: "MISSED", None: "n/a"}
    return "; ".join(f"{name}: {marks[value]}" for name, value in goals.items()) or "-"


def append_row(document: dict[str, Any]) -> None:
    """Append one row to bench/RESULTS.md (created with its header when absent)."""
    if not RESULTS_MD.exists():
        RESULTS_MD.write_text(
            "# Benchmark results\n\nRows are appended by `make bench`; each links its JSON in "
            "`bench/results/`. Figures are min/median/max over alternating runs.\n\n"
            "| when | benchmark | machine | Kubernetes | sizes | figures | goals |\n"
            "|---|---|---|---|---|---|---|\n"
        )
    m = document["machine"]
    figures = "; ".join(f"{k}: {_short(v)}" for k, v in document["figures"].items())
    row = (f"| {document['when']} | {document['name']} | {m['cores']} cores, {m['memory_gib']} GiB, "
           f"{m['cpu'][:40]} | {document['kubernetes']} | {document['sizes']} | {figures} | "
           f"{_goal_text(document['goals'])} |\n")
    with RESULTS_MD.open("a") as handle:
        handle.write(row)


def _short(value: Any) -> str:
    if isinstance(value, dict) and {"min", "median", "max"} <= set(value):
        return f"{value['min']:.3g}/{value['median']:.3g}/{value['max']:.3g}"
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)
