"""Benchmark: a one-shot command's start against kubectl, on a cluster you name, before and after a change.

``python -m bench oneshot --kubeconfig K --context C [--against CRDSCOPE] [--runs 15] [--no-results-md]``

In alternating runs against the same cluster, as processes (what a person at a shell waits for;
wall and CPU seconds, Python start-up included):

* ``kubectl_cold``: ``kubectl api-resources`` with a fresh ``--cache-dir``;
* ``crdscope``: this checkout's ``crdscope probe discovery --json``;
* ``against`` (with ``--against``): the same command of another crdscope, e.g. a virtualenv of the
  main branch's code (``git archive main | tar -x -C DIR``, then ``python3 -m venv DIR/.venv &&
  DIR/.venv/bin/pip install -e DIR``): before and after a change in one sitting, under the same load;
* ``..._offline``: each crdscope's one-shots that talk to no cluster, ``crdscope rules`` and ``crdscope
  estimate synthetic:50 --kubernetes 1.37 --json`` one after the other (what they cost is their imports).

Each crdscope's bytecode is written first (as an install does: see :func:`bench.common.compile_sources`).
Beside the timed runs, alternating too, each crdscope's imports as ``python -X importtime`` counts
them (the command run to its end: every module it loads, the ones loaded while it runs included).

Figures: min/median/max of each contender's wall and CPU seconds, each crdscope against kubectl (run i
over run i), and its import milliseconds and module count.  The ratio to kubectl is the issue's figure
(issue 45: 2.2x at 300 CRDs); on a busy machine wall times swing with the load, CPU much less.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from .common import PACKAGES, BenchError, Options, Result, alternate, isolate_environment, ratios, run_timed, stats
from .discovery import crdscope_command

#: A top-level line of ``-X importtime`` (no indentation before the module's name).
_TOP_LEVEL = re.compile(r"^import time:\s+\d+ \|\s+(\d+) \| (\S.*)$")


def interpreter_of(command: list[str]) -> str:
    """The Python a crdscope command runs on: the ``python`` beside its console script."""
    if len(command) > 1:  # [python, -m, crdscope.cli.main]
        return command[0]
    return str(Path(command[0]).with_name("python"))


def compile_tree(python: str) -> None:
    """Write the bytecode of the crdscope that ``python`` imports (wherever its editable install points)."""
    where = subprocess.run([python, "-c", "import crdscope.base, os; print(os.path.dirname(os.path.dirname("
                                          "os.path.abspath(crdscope.base.__file__))))"],
                           capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    for package in PACKAGES:
        if (Path(where) / package).is_dir():
            subprocess.run([python, "-m", "compileall", "-q", str(Path(where) / package)], check=True, timeout=600)


class Contenders:
    """The timed commands against one cluster; each call is one run (wall seconds), CPU kept beside."""

    def __init__(self, kubeconfig: str, context: str) -> None:
        self.kubeconfig = kubeconfig
        self.context = context
        self.cpu: dict[str, list[float]] = {}
        self.imports_ms: dict[str, list[float]] = {}
        self.modules: dict[str, list[int]] = {}
        self.resources: dict[str, set[int]] = {}

    def _timed(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> tuple[float, str]:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        seconds, done = run_timed(argv, env=env)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.cpu.setdefault(name, []).append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        return seconds, done.stdout

    def kubectl_cold(self) -> float:
        with tempfile.TemporaryDirectory(prefix="crdscope-bench-kubectl-") as cache:
            seconds, out = self._timed("kubectl_cold", [
                "kubectl", f"--kubeconfig={self.kubeconfig}", f"--context={self.context}", f"--cache-dir={cache}",
                "api-resources", "--no-headers"])
        self.resources.setdefault("kubectl_cold", set()).add(sum(1 for line in out.splitlines() if line.strip()))
        return seconds

    def _probe_argv(self, command: list[str]) -> list[str]:
        return [*command, "probe", "discovery", "--json", "--kubeconfig", self.kubeconfig, "--context", self.context]

    def crdscope(self, name: str, command: list[str]) -> Callable[[], float]:
        def run() -> float:
            with tempfile.TemporaryDirectory(prefix="crdscope-bench-cache-") as cache:
                seconds, out = self._timed(name, self._probe_argv(command), env={"KUBECACHEDIR": cache})
            self.resources.setdefault(name, set()).add(json.loads(out)["resources"])
            return seconds
        return run

    def offline(self, name: str, command: list[str]) -> Callable[[], float]:
        """``rules`` then ``estimate --kubernetes``: one-shots that send no request."""
        def run() -> float:
            rules, _ = self._timed(name, [*command, "rules"])
            estimate, _ = self._timed(f"{name}_estimate", [*command, "estimate", "synthetic:50", "--kubernetes", "1.37",
                                                            "--json"])
            self.cpu[name][-1] += self.cpu.pop(f"{name}_estimate")[-1]
            return rules + estimate
        return run

    def imports(self, name: str, command: list[str]) -> Callable[[], float]:
        """One run under ``-X importtime``: the sum of its top-level imports (milliseconds)."""
        python = interpreter_of(command)

        def run() -> float:
            argv = [python, "-X", "importtime", "-m", "crdscope.cli.main", *self._probe_argv([])]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
            if done.returncode != 0:
                raise BenchError(f"{name}: probe discovery exited {done.returncode}: {done.stderr.strip()[-200:]}")
            lines = [line for line in done.stderr.splitlines() if line.startswith("import time:")]
            total = sum(int(m[1]) for line in lines if (m := _TOP_LEVEL.match(line))) / 1000
            self.imports_ms.setdefault(name, []).append(total)
            self.modules.setdefault(name, []).append(len(lines) - 1)  # the header line is not a module
            return total
        return run


def server_version(kubeconfig: str, context: str) -> str:
    """The cluster's Kubernetes version, as kubectl reads it ("" when it cannot)."""
    done = subprocess.run(["kubectl", f"--kubeconfig={kubeconfig}", f"--context={context}", "version", "-o", "json"],
                          capture_output=True, text=True, timeout=60)
    try:
        return str(json.loads(done.stdout)["serverVersion"]["gitVersion"])
    except (ValueError, KeyError):
        return ""


def measure(kubeconfig: str, context: str, against: str | None, runs: int) -> Result:
    mine = crdscope_command()
    commands = {"crdscope": mine, **({"against": [against]} if against else {})}
    for command in commands.values():
        compile_tree(interpreter_of(command))
    contenders = Contenders(kubeconfig, context)
    for name, command in commands.items():  # a first run of each: the page cache, not what a run costs
        contenders.crdscope(name, command)()
    contenders.kubectl_cold()
    contenders.cpu.clear()
    timed: dict[str, Callable[[], float]] = {"kubectl_cold": contenders.kubectl_cold}
    timed.update({name: contenders.crdscope(name, command) for name, command in commands.items()})
    timed.update({f"{name}_offline": contenders.offline(f"{name}_offline", command)
                  for name, command in commands.items()})
    times = alternate(timed, runs)
    alternate({f"{name}_imports": contenders.imports(name, command) for name, command in commands.items()}, runs)
    figures: dict = {}
    for name in timed:
        figures[f"{name}_s"] = stats(times[name])
        figures[f"{name}_cpu_s"] = stats(contenders.cpu[name])
    for name in commands:
        figures[f"{name}_vs_kubectl"] = stats(ratios(times[name], times["kubectl_cold"]))
        figures[f"{name}_cpu_vs_kubectl"] = stats(ratios(contenders.cpu[name], contenders.cpu["kubectl_cold"]))
        figures[f"{name}_imports_ms"] = stats(contenders.imports_ms[name])
        figures[f"{name}_modules"] = max(contenders.modules[name])
    if against:
        for what in ("", "_offline"):
            figures[f"crdscope{what}_vs_against"] = stats(ratios(times[f"crdscope{what}"], times[f"against{what}"]))
            figures[f"crdscope{what}_cpu_vs_against"] = stats(ratios(contenders.cpu[f"crdscope{what}"],
                                                                     contenders.cpu[f"against{what}"]))
    found = {name: sorted(values) for name, values in contenders.resources.items()}
    result = Result("oneshot", server_version(kubeconfig, context), f"{context}: {found['kubectl_cold']} resources",
                    figures)
    if len({value for values in found.values() for value in values}) != 1:
        result.notes.append(f"contenders disagree on the number of resources: {found}")
    if against:
        result.notes.append(f"against: {against}")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench oneshot", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--context", required=True)
    parser.add_argument("--against", default=None, metavar="CRDSCOPE",
                        help="another crdscope console script to time beside this checkout's")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument("--no-results-md", action="store_true", help="do not append to bench/RESULTS.md")
    args = parser.parse_args(argv)
    isolate_environment()  # crdscope at its code defaults: no config.toml of the user's
    options = Options(runs=max(3, args.runs), append_results_md=not args.no_results_md)
    if args.output:
        options.output = args.output
    result = measure(args.kubeconfig, args.context, args.against, options.runs)
    path = result.write(options)
    print(json.dumps(result.figures, indent=1, default=str))
    print(f"bench: oneshot: {path}", file=sys.stderr)
    return 0
