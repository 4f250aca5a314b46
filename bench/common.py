"""Shared benchmark plumbing: alternating runs, statistics, the machine, results files.

This machine is shared and noisy, so absolute times drift; every benchmark
alternates its contenders run by run (A B A B ...) and reports ratios
measured pair by pair, with min/median/max over at least five runs.
"""

from __future__ import annotations

import atexit
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Callable

import httpx

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_MD = BENCH_DIR / "RESULTS.md"
#: Where the notes under the results table start (profiles of missed goals).
SHARED_CRDS = BENCH_DIR.parent.parent / "shared" / "crds"


@dataclass
class Options:
    """How a benchmark run is sized and where it writes."""

    quick: bool = False  # smoke sizes (tests run these)
    runs: int = 5
    output: Path = BENCH_DIR / "results"
    append_results_md: bool = True
    sizes: tuple[int | None, ...] = (500, None)  # None = the whole set
    #: The one tiny size of a smoke run (the shared quick lab holds this many CRDs).
    quick_sizes: tuple[int | None, ...] = (50,)
    #: Loader rounds on the whole set (one takes a quarter of an hour or more).
    whole_set_runs: int = 1

    def chosen_sizes(self) -> tuple[int | None, ...]:
        """The sizes this run measures."""
        return self.quick_sizes if self.quick else self.sizes


class BenchError(Exception):
    """A benchmark cannot go on (a contender failed, a lab did not come up); one line."""


def isolate_environment() -> Path:
    """Point config, state, data and kubectl caches at a fresh directory (binaries and CRD
    sets stay in the real cache): crdscope must run at its code defaults, not the user's
    config.toml, and runs must not see each other's load records or kubectl caches."""
    home = Path(tempfile.mkdtemp(prefix="crdscope-bench-env-"))
    atexit.register(shutil.rmtree, home, True)
    for variable, name in (("XDG_CONFIG_HOME", "config"), ("XDG_STATE_HOME", "state"),
                           ("XDG_DATA_HOME", "data"), ("KUBECACHEDIR", "kube-cache"),
                           ("CRDSCOPE_LAB_HOME", "lab-home")):
        os.environ[variable] = str(home / name)
    os.environ["KUBECONFIG"] = str(home / "no-kubeconfig")
    return home


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def scrape_metrics(port: int, timeout: float = 10.0) -> str:
    """The exposition a local exporter (``--serve-metrics 127.0.0.1:PORT``) serves now; "" while it
    does not answer 200 (not listening yet, busy, gone).  The e2e tests scrape with this too."""
    try:
        response = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=timeout)
    except httpx.HTTPError:
        return ""
    return response.text if response.status_code == 200 else ""


def stop_process(process: subprocess.Popen[Any], grace: float = 30.0) -> None:
    """SIGTERM a child, SIGKILL it if it is still there after ``grace`` seconds; returns once it is reaped.
    The e2e tests stop their children with this too."""
    process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def say(line: str) -> None:
    """A progress line on stderr (a full run takes hours: poll its log)."""
    print(f"{time.strftime('%H:%M:%S')} bench: {line}", file=sys.stderr, flush=True)


#: crdscope's packages (top-level folders mapped to ``crdscope.*``; the Makefile's PACKAGES).
PACKAGES = ("base", "cli", "connection", "toolchain", "probes", "loader", "lab", "session", "findings", "costmodel",
            "themes", "tui")


def compile_sources() -> None:
    """Write crdscope's bytecode before timing a process, as an install does (pip compiles what it installs).

    A development checkout run with ``PYTHONDONTWRITEBYTECODE=1`` (this machine's shells set it)
    has no bytecode for crdscope's own modules: every timed ``crdscope`` would compile about 130
    of them first (measured: 38 ms of ``compile`` in a 0.4 s ``probe discovery``), which no
    installed crdscope does.  Python reads bytecode even where it may not write it.
    """
    import compileall

    root = BENCH_DIR.parent
    for package in PACKAGES:
        compileall.compile_dir(str(root / package), quiet=1)


def run_timed(argv: list[str], *, env: dict[str, str] | None = None, timeout: float = 3600,
              check: bool = True) -> tuple[float, subprocess.CompletedProcess]:
    """Run a process to completion; (wall seconds, the completed process).

    ``check``: a non-zero exit is a :class:`BenchError` naming the command and its last line.
    """
    started = time.perf_counter()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired:
        raise BenchError(f"{' '.join(argv[:4])} ... took longer than {timeout:.0f}s") from None
    seconds = time.perf_counter() - started
    if check and done.returncode != 0:
        lines = [line for line in (done.stderr or done.stdout).strip().splitlines() if line.strip()]
        raise BenchError(f"{' '.join(argv[:4])} ... exited {done.returncode}: "
                         f"{lines[-1] if lines else 'no output'}")
    return seconds, done


def size_label(set_name: str, size: int | None, total: int | None = None) -> str:
    """How a row names its CRD set: ``provider-aws 500 CRDs`` or ``provider-aws all 2065 CRDs``."""
    if size is None:
        return f"{set_name} all {total} CRDs" if total else f"{set_name} all CRDs"
    return f"{set_name} {size} CRDs"


def median_at_most(values: list[float], limit: float) -> bool | None:
    """A goal on the median of pairwise figures: None when nothing was measured."""
    return statistics.median(values) <= limit if values else None


def stats(values: list[float | None]) -> dict[str, float]:
    """min / median / max (and n) of a list of figures (None entries, failed runs, are left out)."""
    values = [value for value in values if value is not None]
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


def ratios(numerator: list[float | None], denominator: list[float | None]) -> list[float]:
    """Pairwise ratios of two interleaved series (run i of one over run i of the other); a pair
    with a failed run (None) is left out."""
    return [a / b for a, b in zip(numerator, denominator, strict=True) if a is not None and b]


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
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
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
    lines = RESULTS_MD.read_text().splitlines(keepends=True)
    # New rows go at the end of the rows table (the first table), whatever sections follow it.
    header = next((i for i, line in enumerate(lines) if line.startswith("| when | benchmark")), None)
    if header is None:
        lines.append(row)
    else:
        end = header
        while end < len(lines) and lines[end].startswith("|"):
            end += 1
        lines.insert(end, row)
    RESULTS_MD.write_text("".join(lines))


def _short(value: Any) -> str:
    if isinstance(value, dict) and {"min", "median", "max"} <= set(value):
        return f"{value['min']:.3g}/{value['median']:.3g}/{value['max']:.3g}"
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)
