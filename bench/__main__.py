"""``python -m bench [--quick] [--runs N] [--output DIR] [NAME ...]``: run the benchmarks.

NAME is any of: discovery, loader, overhead, ui_latency, metrics_parse (default: all).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

from .common import Options

BENCHMARKS = ["discovery", "loader", "overhead", "ui_latency", "metrics_parse"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("names", nargs="*", metavar="NAME", help=", ".join(BENCHMARKS))
    parser.add_argument("--quick", action="store_true", help="smoke sizes (what `make test` runs)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument("--no-results-md", action="store_true", help="do not append to bench/RESULTS.md")
    args = parser.parse_args(argv)
    options = Options(quick=args.quick, runs=max(1, args.runs), append_results_md=not args.no_results_md)
    if args.output:
        options.output = args.output
    unknown = [n for n in args.names if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark {', '.join(unknown)} (one of: {', '.join(BENCHMARKS)})")
    # A missed goal is a finding recorded in RESULTS.md, not a failure of the run.
    for name in args.names or BENCHMARKS:
        module = importlib.import_module(f"bench.{name}")
        result = module.run(options)
        path = result.write(options)
        print(json.dumps({"benchmark": name, "result": str(path), "goals": result.goals}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
