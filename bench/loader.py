"""Benchmark 2: the loader, time until every CRD of a set is Established.

Each run gets a fresh lab (nothing left over from an earlier run can make a load skip
or finish early); per size:

1. a sweep of ``crdscope load --profile burst --concurrency C`` (and a steady
   ``--rate``), one run each, finds the fastest pace this API server sustains
   (at the first size only; later sizes reuse its setting);
2. alternating runs of ``crdscope_default`` (``crdscope load DIR`` at its defaults),
   ``kubectl`` (``kubectl apply --server-side -f DIR`` then ``kubectl wait --for
   condition=established crd --all``) and ``crdscope_best`` (the sweep's fastest setting).
   The whole set gets ``Options.whole_set_runs`` rounds (``--whole-set-runs``): one takes a
   quarter of an hour or more, kubectl's most of it.

Every contender is timed as a process, from its start until it exits, which for
``crdscope load`` is when its CRD watch saw the last CRD Established and for kubectl
when ``kubectl wait`` returned.  Beside that wall time, ``server_*`` is when the server
says the last CRD became Established (the latest ``Established`` lastTransitionTime,
whole seconds), which shows how much of kubectl's time is ``kubectl wait`` itself.
Goals (medians of pairwise ratios): crdscope at its defaults at most half of kubectl's
time, and within 1.2x of the best sustained pace.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from collections.abc import Callable, Iterator

from .common import BenchError, Options, Result, median_at_most, ratios, run_timed, say, size_label, stats
from .discovery import SET, crdscope_command
from .labs import ADMIN_CONTEXT, crd_dir, crd_files, established_times, fresh_lab, memory_for, wait_for_memory

#: (label, extra arguments of ``crdscope load``) tried to find the best sustained pace.  Measured
#: on this 2-core machine: more applies in flight make the server slower, not faster.
SWEEP: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("burst c=2", ("--profile", "burst", "--concurrency", "2")),
    ("steady rate=10 c=4", ("--rate", "10", "--concurrency", "4")),
    ("steady rate=40 c=16", ("--rate", "40", "--concurrency", "16")),
)
QUICK_SWEEP = SWEEP[1:2]
LOAD_TIMEOUT_SECONDS = 3600.0


class Run:
    """Timed loads into fresh labs: wall seconds, and when the server says each was done.

    A load that ends with CRDs not Established (``crdscope load`` gives up on a CRD 120 s
    after applying it) is a failed run: it is counted and described, not timed.
    """

    def __init__(self, directory: Path, expected: int) -> None:
        self.directory = directory
        self.expected = expected
        #: contender -> server-side seconds until the last CRD was Established (successful runs)
        self.server_seconds: dict[str, list[float]] = {}
        #: the same, run by run (None for a failed run), for pairwise ratios
        self.server_by_run: dict[str, list[float | None]] = {}
        #: contender -> the loader's own summary figures (crdscope), phase times (kubectl)
        self.summaries: dict[str, list[dict]] = {}
        #: contender -> why its failed runs failed
        self.failures: dict[str, list[str]] = {}
        self.kubernetes = ""

    def timed(self, name: str, load: Callable[[str], float]) -> float | None:
        """A fresh lab, ``load(kubeconfig)`` timed; None when not every CRD ended Established."""
        wait_for_memory(memory_for(self.expected, self.expected))
        with fresh_lab() as state:
            self.kubernetes = state.kubernetes_version
            started = time.time()
            seconds = load(state.kubeconfig)
            established = {crd: when for crd, when in established_times(state).items() if when is not None}
        if len(established) != self.expected:
            reason = f"{len(established)} of {self.expected} CRDs Established after {seconds:.0f}s"
            self.failures.setdefault(name, []).append(reason)
            self.server_by_run.setdefault(name, []).append(None)
            say(f"loader {self.expected} CRDs: {name} FAILED: {reason}")
            return None
        # lastTransitionTime has whole seconds: the last one can read up to 1 s before ``started``.
        server = max(0.0, max(established.values()) - started)
        self.server_seconds.setdefault(name, []).append(server)
        self.server_by_run.setdefault(name, []).append(server)
        say(f"loader {self.expected} CRDs: {name} {seconds:.1f}s")
        return seconds

    def crdscope(self, name: str, arguments: tuple[str, ...] = ()) -> Callable[[], float | None]:
        def load(kubeconfig: str) -> float:
            with tempfile.TemporaryDirectory(prefix="crdscope-bench-state-") as state_home:
                # Its own state dir: no run record of an earlier run can be resumed.
                seconds, done = run_timed([*crdscope_command(), "load", str(self.directory), "--kubeconfig",
                                           kubeconfig, "--context", ADMIN_CONTEXT, "--json", "--new-run",
                                           *arguments], env={"XDG_STATE_HOME": state_home},
                                          timeout=LOAD_TIMEOUT_SECONDS, check=False)
            try:
                summary = json.loads(done.stdout)
            except ValueError:
                lines = done.stderr.strip().splitlines() or ["no output"]
                raise BenchError(f"crdscope load exited {done.returncode}: {lines[-1]}") from None
            self.summaries.setdefault(name, []).append(
                {k: summary[k] for k in ("elapsed_seconds", "established", "failed", "retries_429",
                                         "retries_5xx", "limiter_waited_seconds")})
            if summary["failures"]:
                first = summary["failures"][0]
                self.failures.setdefault(name, []).append(
                    f"crdscope load failed {summary['failed']} CRDs, e.g. {first['name']}: {first['reason']}")
            return seconds

        return lambda: self.timed(name, load)

    def kubectl(self) -> float | None:
        def load(kubeconfig: str) -> float:
            base = ["kubectl", f"--kubeconfig={kubeconfig}", f"--context={ADMIN_CONTEXT}"]
            applied, _ = run_timed([*base, "apply", "--server-side", "-f", str(self.directory)],
                                   timeout=LOAD_TIMEOUT_SECONDS)
            waited, _ = run_timed([*base, "wait", "--for=condition=established",
                                   f"--timeout={LOAD_TIMEOUT_SECONDS:.0f}s", "crd", "--all"],
                                  timeout=LOAD_TIMEOUT_SECONDS)
            self.summaries.setdefault("kubectl", []).append({"apply_seconds": applied, "wait_seconds": waited})
            return applied + waited

        return self.timed("kubectl", load)


def sweep(run: Run, quick: bool) -> tuple[str, tuple[str, ...], dict[str, float | None]]:
    """One run of each sweep setting; the fastest one's label and arguments, and every time."""
    times: dict[str, float | None] = {}
    settings = QUICK_SWEEP if quick else SWEEP
    for label, arguments in settings:
        times[label] = run.crdscope(f"sweep {label}", arguments)()
    timed = {label: seconds for label, seconds in times.items() if seconds is not None}
    if not timed:
        raise BenchError(f"every sweep setting failed: {run.failures}")
    best = min(timed, key=timed.get)
    return best, dict(settings)[best], times


def figures_of(load: Run, times: dict[str, list[float | None]], best_label: str,
               swept: dict[str, float | None]) -> dict:
    """The loader's figures for one size (None entries are failed runs)."""
    total = load.expected
    figures: dict = {f"{name}_s": stats(values) for name, values in times.items()}
    figures.update({f"server_{name}_s": stats(load.server_seconds.get(name, [])) for name in times})
    figures.update({
        "default_vs_kubectl": stats(ratios(times["crdscope_default"], times["kubectl"])),
        # The same pairs by the server's clock: kubectl's wall time includes `kubectl wait`.
        "server_default_vs_kubectl": stats(ratios(load.server_by_run["crdscope_default"],
                                                  load.server_by_run["kubectl"])),
        "default_vs_best": stats(ratios(times["crdscope_default"], times["crdscope_best"])),
        "best_setting": best_label,
        **{f"{name}_crds_per_s": stats([total / t for t in times[f"{name}"] if t])
           for name in ("crdscope_best", "crdscope_default", "kubectl")},
        "sweep": ", ".join(f"{label} {seconds:.1f}s" if seconds else f"{label} failed"
                           for label, seconds in swept.items()) or "-",
        **{f"kubectl_{phase}_s": stats([s[f"{phase}_seconds"] for s in load.summaries.get("kubectl", [])])
           for phase in ("apply", "wait")},
        "crdscope_retries_429": sum(entry["retries_429"] for name, entries in load.summaries.items()
                                    if name != "kubectl" for entry in entries),
        "failed_runs": sum(len(reasons) for reasons in load.failures.values()),
    })
    return figures


#: The sweep's outcome in this process: (label, arguments, the sizes it ran on), kept for
#: later sizes (``python -m bench`` runs the whole set last, in a step of its own).
_best: list[tuple[str, tuple[str, ...], str]] = []


def run(options: Options) -> Iterator[Result]:
    for size in options.chosen_sizes():
        directory = crd_dir(SET, size)
        total = len(crd_files(directory))
        load = Run(directory, total)
        notes = []
        swept: dict[str, float | None] = {}
        if not _best:
            label, arguments, swept = sweep(load, options.quick)
            _best.append((label, arguments, size_label(SET, size, total)))
        else:
            notes.append(f"best setting from the {_best[0][2]} sweep")
        best = _best[0]
        runs = options.runs if size is not None else min(options.runs, options.whole_set_runs)
        if runs < options.runs:
            notes.append(f"{runs} round(s) on the whole set, to stay within the bench's time budget")
        contenders = {"crdscope_default": load.crdscope("crdscope_default"),
                      "kubectl": load.kubectl,
                      "crdscope_best": load.crdscope("crdscope_best", best[1])}
        times: dict[str, list[float | None]] = {name: [] for name in contenders}
        for _ in range(runs):
            for name, contender in contenders.items():
                times[name].append(contender())
        result = Result("loader", load.kubernetes, size_label(SET, size, total),
                        figures_of(load, times, best[0], swept), notes=notes)
        for name, reasons in load.failures.items():
            result.notes.append(f"{name}: {len(reasons)} failed run(s): {reasons[0]}")
        result.goals["default <= 0.5x kubectl"] = median_at_most(
            ratios(times["crdscope_default"], times["kubectl"]), 0.5)
        result.goals["default <= 1.2x best sustained pace"] = median_at_most(
            ratios(times["crdscope_default"], times["crdscope_best"]), 1.2)
        yield result
