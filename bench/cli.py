"""Benchmark: start-up of the one-shot commands a person types (``crdscope --help``, ``lab status``).

In alternating runs, as processes (wall time, Python start-up included):

* ``python_floor``: ``python -c pass`` with the same interpreter (what no Python CLI can beat);
* ``crdscope_help``: ``crdscope --help``;
* ``crdscope_lab_status``: ``crdscope lab status`` against a lab of its own (no CRDs: the
  command reads the lab's state file and asks the API server whether it is ready);
* ``kubectl_version``: ``kubectl version --client``, the reference a person compares with.

Goals (medians): ``--help`` and ``lab status`` under 150 ms.  The figures depend on the
machine's load: rows say the machine was shared when it was.
"""

from __future__ import annotations

import resource
import sys
import tempfile
from pathlib import Path

from crdscope.lab.binaries import ensure_binaries
from crdscope.lab.controlplane import Lab

from .common import Options, Result, alternate, median_at_most, ratios, run_timed, stats
from .discovery import crdscope_command

GOAL_SECONDS = 0.150


class Timer:
    """Wall seconds of each process (what ``alternate`` collects) and its CPU seconds beside them:
    on a shared, busy machine wall times swing with the load, CPU time much less."""

    def __init__(self) -> None:
        self.cpu: dict[str, list[float]] = {}

    def __call__(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> float:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        seconds, _ = run_timed(argv, env=env)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.cpu.setdefault(name, []).append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        return seconds


def run(options: Options) -> Result:
    runs = max(options.runs, 5)
    with tempfile.TemporaryDirectory(prefix="crdscope-bench-cli-") as home:
        lab = Lab(Path(home))
        state = lab.up(ensure_binaries())
        try:
            env = {"CRDSCOPE_LAB_HOME": home}
            crdscope = crdscope_command()
            timer = Timer()
            times = alternate({
                "python_floor": lambda: timer("python_floor", [sys.executable, "-c", "pass"]),
                "crdscope_help": lambda: timer("crdscope_help", [*crdscope, "--help"]),
                "crdscope_lab_status": lambda: timer("crdscope_lab_status", [*crdscope, "lab", "status"], env=env),
                "kubectl_version": lambda: timer("kubectl_version", ["kubectl", "version", "--client"]),
            }, runs)
        finally:
            lab.down()
    figures: dict = {f"{name}_s": stats(values) for name, values in times.items()}
    figures["help_vs_kubectl"] = stats(ratios(times["crdscope_help"], times["kubectl_version"]))
    figures["lab_status_vs_kubectl"] = stats(ratios(times["crdscope_lab_status"], times["kubectl_version"]))
    figures.update({f"{name}_cpu_s": stats(values) for name, values in timer.cpu.items()})
    result = Result("cli", state.kubernetes_version, "no CRDs", figures)
    result.goals["--help < 150 ms"] = median_at_most(times["crdscope_help"], GOAL_SECONDS)
    result.goals["lab status < 150 ms"] = median_at_most(times["crdscope_lab_status"], GOAL_SECONDS)
    return result
