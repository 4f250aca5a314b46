"""``python -m bench [--quick] [--runs N] [--sizes LIST] [--output DIR] [NAME ...]``: run the benchmarks.

NAME is any of: discovery, loader, overhead, ui_latency, metrics_parse, cli, doctor (default: all).
``python -m bench calibrate [--help]`` fits the cost model instead (bench/calibrate.py).
``python -m bench versions [--help]`` loads the AWS set into each built Kubernetes version (bench/versions.py).
``python -m bench footprint [--help]`` measures what watching an install costs the API server (bench/footprint.py).
``python -m bench hang [--help]`` measures how soon a frozen API server is "not answering" (bench/hang.py).
``python -m bench crossplane [--help]`` installs the AWS set through real Crossplane v2 (bench/crossplane.py).
``python -m bench request_cost [--help]`` what each of the monitor's requests costs a loaded API server.
``python -m bench mrap [--help]`` the activation planner on the AWS set as MRDs with 100 Compositions (bench/mrap.py).
``python -m bench viewers [--help]`` what 0, 1 and 10 `crdscope attach` viewers cost a collector (bench/viewers.py).
``python -m bench oneshot [--help]`` `crdscope probe discovery` against kubectl's cold `api-resources` on a cluster
you name, beside another crdscope (before and after a change; bench/oneshot.py).
``python -m bench heapprofile [--help]`` two kept API-server heap profiles' top functions side by side
(bench/heapprofile.py).
``python -m bench etcd_connections [--help]`` what the API server's etcd connections grow with, per minor
(CRDs installed, kinds in use, CRD updates; bench/etcd_connections.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from .common import BenchError, Options, Result, isolate_environment
from .labs import release_shared

BENCHMARKS = ["loader", "discovery", "overhead", "ui_latency", "metrics_parse", "cli", "doctor"]
#: Benchmarks that measure one shared loaded lab per size (bench.labs.shared_lab): they run
#: size by size, so that each lab is loaded once.
SIZE_BY_SIZE = ("discovery", "overhead", "ui_latency", "doctor")
#: Runs that are not in the default set, each with its own options (``python -m bench NAME --help``):
#: name -> (module, whether SIGINT tears its labs down too; a background shell ignores SIGINT).
#: versions: a whole AWS load per Kubernetes version; footprint: fresh labs with the whole AWS set,
#: several per watch mode (hours); hang: a lab frozen 20 times (about 15 minutes); crossplane: the AWS
#: set through real Crossplane beside crdscope load and kubectl; calibrate fits the cost model; viewers: one
#: collector on an empty lab with 0, 1 and 10 `crdscope attach` viewers (about 10 minutes).
#: `make bench` runs versions, footprint and crossplane.
SEPARATE = {"versions": ("versions", False), "footprint": ("footprint", True), "hang": ("hang", True),
            "crossplane": ("crossplane", True), "calibrate": ("calibrate", False), "fleet": ("fleet", True),
            "fleet_ui": ("fleet_ui", False), "request_cost": ("request_cost", True), "mrap": ("mrap", True),
            "viewers": ("viewers", True), "oneshot": ("oneshot", False), "heapprofile": ("heapprofile", False),
            "etcd_connections": ("etcd_connections", True)}


def steps(chosen: list[str], options: Options) -> list[tuple[str, Options]]:
    """(benchmark, its options) in running order.

    The loader (a fresh lab per run) measures the partial sets first; then the shared-lab
    benchmarks size by size; the /metrics scrape comes from the last (largest) shared lab;
    the loader's whole-set round, the longest step (half an hour or more), comes last.
    """
    def sized(*sizes: int | None) -> Options:
        return dataclasses.replace(options, sizes=sizes, quick_sizes=sizes)

    partial = tuple(size for size in options.chosen_sizes() if size is not None)
    whole = tuple(size for size in options.chosen_sizes() if size is None)
    planned = [("loader", sized(*partial))] if "loader" in chosen and partial else []
    for size in options.chosen_sizes():
        planned += [(name, sized(size)) for name in SIZE_BY_SIZE if name in chosen]
    planned += [(name, options) for name in chosen if name not in ("loader", *SIZE_BY_SIZE)]
    if "loader" in chosen and whole:
        planned.append(("loader", sized(*whole)))
    return planned


def _sizes(text: str) -> tuple[int | None, ...]:
    """``500,all`` -> (500, None)."""
    try:
        return tuple(None if part.strip() == "all" else int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: sizes are whole numbers or 'all', e.g. 500,all") from None


def _interrupt(*_: object) -> None:
    # SIGTERM (and SIGINT, which a background shell ignores) tear the labs down on the way out.
    raise KeyboardInterrupt


def run_separate(name: str, separate_main: Callable[[list[str]], int], argv: list[str]) -> int:
    """Run a benchmark with its own arguments; what stops it is one line and an exit code, not a
    traceback: a run that cannot be measured (1), an interruption (130)."""
    from crdscope.base.errors import CrdscopeError

    try:
        return int(separate_main(argv))
    except (BenchError, CrdscopeError) as exc:  # CrdscopeError: a lab that did not come up
        print(f"bench: {name}: {exc}", flush=True)
        return 1
    except KeyboardInterrupt:
        print(f"bench: {name}: interrupted", flush=True)
        return 130


def main(argv: list[str] | None = None) -> int:
    args_given = sys.argv[1:] if argv is None else argv
    own = SEPARATE.get(args_given[0]) if args_given else None
    if own is not None:
        module, interrupt_on_sigint = own
        signal.signal(signal.SIGTERM, _interrupt)
        if interrupt_on_sigint:
            signal.signal(signal.SIGINT, _interrupt)
        separate_main = importlib.import_module(f"bench.{module}").main
        return run_separate(args_given[0], separate_main, args_given[1:])
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("names", nargs="*", metavar="NAME", help=", ".join(BENCHMARKS))
    parser.add_argument("--quick", action="store_true", help="smoke sizes (what `make test` runs)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument("--no-results-md", action="store_true", help="do not append to bench/RESULTS.md")
    parser.add_argument("--sizes", type=_sizes, default=None, metavar="LIST",
                        help="CRDs of the AWS set per lab, e.g. 500,all [default: 500,all]")
    parser.add_argument("--whole-set-runs", type=int, default=1, metavar="N",
                        help="loader rounds on the whole set (each takes 15 minutes or more) [default: 1]")
    args = parser.parse_args(argv)
    options = Options(quick=args.quick, runs=max(1, args.runs), append_results_md=not args.no_results_md,
                      whole_set_runs=max(1, args.whole_set_runs))
    if args.sizes:
        options.sizes = args.sizes
    if args.output:
        options.output = args.output
    unknown = [n for n in args.names if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark {', '.join(unknown)} (one of: {', '.join(BENCHMARKS)})")
    isolate_environment()
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    chosen = [name for name in BENCHMARKS if name in args.names] if args.names else BENCHMARKS
    # A missed goal is a finding recorded in RESULTS.md, not a failure of the run; a benchmark
    # that cannot run is reported and the others still run.
    failed = []
    try:
        for name, chosen_options in steps(chosen, options):
            module = importlib.import_module(f"bench.{name}")
            if name == "loader":
                release_shared()  # a lab of the whole set takes ~10 GB: never two at once
            try:
                # A benchmark returns one Result or yields one per size: each is written as it
                # comes, so a later size's failure does not lose an earlier one's figures.
                outcome = module.run(chosen_options)
                for result in [outcome] if isinstance(outcome, Result) else outcome:
                    path = result.write(options)
                    print(json.dumps({"benchmark": name, "sizes": result.sizes, "result": str(path),
                                      "goals": result.goals}), flush=True)
            except BenchError as exc:
                print(f"bench: {name}: {exc}", file=sys.stderr, flush=True)
                failed.append(name)
    except KeyboardInterrupt:
        print("bench: interrupted", file=sys.stderr, flush=True)
        return 130
    finally:
        release_shared()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
