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

import sys
import tempfile
from pathlib import Path

from crdscope.lab.binaries import ensure_binaries
from crdscope.lab.controlplane import Lab

from .common import Options, Result, alternate, median_at_most, ratios, run_timed, stats
from .discovery import crdscope_command

GOAL_SECONDS = 0.150


def run(options: Options) -> Result:
    runs = max(options.runs, 5)
    with tempfile.TemporaryDirectory(prefix="crdscope-bench-cli-") as home:
        lab = Lab(Path(home))
        state = lab.up(ensure_binaries())
        try:
            env = {"CRDSCOPE_LAB_HOME": home}
            crdscope = crdscope_command()
            times = alternate({
                "python_floor": lambda: run_timed([sys.executable, "-c", "pass"])[0],
                "crdscope_help": lambda: run_timed([*crdscope, "--help"])[0],
                "crdscope_lab_status": lambda: run_timed([*crdscope, "lab", "status"], env=env)[0],
                "kubectl_version": lambda: run_timed(["kubectl", "version", "--client"])[0],
            }, runs)
        finally:
            lab.down()
    figures: dict = {f"{name}_s": stats(values) for name, values in times.items()}
    figures["help_vs_kubectl"] = stats(ratios(times["crdscope_help"], times["kubectl_version"]))
    figures["lab_status_vs_kubectl"] = stats(ratios(times["crdscope_lab_status"], times["kubectl_version"]))
    result = Result("cli", state.kubernetes_version, "no CRDs", figures)
    result.goals["--help < 150 ms"] = median_at_most(times["crdscope_help"], GOAL_SECONDS)
    result.goals["lab status < 150 ms"] = median_at_most(times["crdscope_lab_status"], GOAL_SECONDS)
    return result
