"""Benchmark: what one copy of every CRD costs the API server to send, in JSON and in protobuf.

``python -m bench crd_encoding [--kubernetes 1.26] [--rounds 15] [--size N]``: a fresh lab, the AWS
set (``../shared/crds/provider-aws.tar.xz``) installed with ``crdscope load``; once the server is
idle, full CRD lists from its watch cache (``resourceVersion=0``, no pagination, no compression) in
JSON and in protobuf, alternating, each timed by the API server's own CPU seconds (``/proc``) over
the request and one second after it.

Why: the monitor's CRD watch receives every CRD three times or more during an install (created,
names accepted, established), schema and all, and the server marshals each event for each watcher
in the encoding it asked for.  A full list is the same marshalling of one copy of the set, which is
what this measures.  Full collections of a heap of many GiB come and go with the allocations, so the
figures are medians and means over many alternating rounds, not one request.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import httpx

from crdscope.lab.controlplane import LabState, admin_tls

from .common import BenchError, Options, Result, isolate_environment, process_cpu_seconds, run_timed, say, stats
from .footprint import load_argv
from .labs import crd_dir, crd_files, fresh_lab, memory_for, wait_for_memory, wait_until_idle

SET = "provider-aws"
CRD_LIST = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
ENCODINGS = {"json": "application/json", "protobuf": "application/vnd.kubernetes.protobuf"}
#: The server's CPU is read this long after the answer's last byte (its goroutines finish writing).
SETTLE_SECONDS = 1.0
#: Between requests: what one request leaves behind (a collection) falls outside the next one's window.
GAP_SECONDS = 2.0


def one_list(client: httpx.Client, pid: int, encoding: str) -> dict[str, float]:
    """One full list in ``encoding``: the server's CPU seconds, the wall seconds and the MB received."""
    before, started = process_cpu_seconds(pid), time.monotonic()
    received = 0
    with client.stream("GET", CRD_LIST, params={"resourceVersion": "0"},
                       headers={"Accept": ENCODINGS[encoding], "Accept-Encoding": "identity"}) as response:
        if response.status_code != 200:
            raise BenchError(f"list CRDs in {encoding} answered {response.status_code}")
        if not response.headers.get("content-type", "").startswith(ENCODINGS[encoding]):
            raise BenchError(f"asked for {encoding}, the server answered {response.headers.get('content-type')}")
        for chunk in response.iter_raw():
            received += len(chunk)
    wall = time.monotonic() - started
    time.sleep(SETTLE_SECONDS)
    return {"cpu_s": round(process_cpu_seconds(pid) - before, 3), "wall_s": round(wall, 3),
            "mb": round(received / 1e6, 2)}


def measure(state: LabState, rounds: int) -> dict[str, list[dict[str, float]]]:
    """``rounds`` alternating pairs of full lists (the order flips every round)."""
    pid = state.components["apiserver"].pid
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in ENCODINGS}
    with httpx.Client(base_url=state.server, verify=admin_tls(state.pki_dir), timeout=600) as client:
        for round_number in range(rounds):
            order = list(ENCODINGS) if round_number % 2 == 0 else list(reversed(ENCODINGS))
            for encoding in order:
                time.sleep(GAP_SECONDS)
                runs[encoding].append(one_list(client, pid, encoding))
            say(f"  round {round_number + 1}/{rounds}: "
                + ", ".join(f"{e} {runs[e][-1]['cpu_s']:.2f} s" for e in ENCODINGS))
    return runs


def summarize(runs: dict[str, list[dict[str, float]]], crds: int) -> dict[str, Any]:
    """Per encoding the server's CPU seconds (min/median/max, mean), and the ratios protobuf/JSON."""
    figures: dict[str, Any] = {"crds": crds}
    for encoding, values in runs.items():
        cpu = [v["cpu_s"] for v in values]
        figures[f"{encoding}_server_cpu_s"] = stats(cpu)
        figures[f"{encoding}_server_cpu_mean_s"] = round(statistics.fmean(cpu), 3)
        figures[f"{encoding}_mb"] = values[0]["mb"]
        figures[f"{encoding}_wall_s"] = stats([v["wall_s"] for v in values])
    figures["protobuf_vs_json_cpu_median_x"] = round(
        figures["protobuf_server_cpu_s"]["median"] / figures["json_server_cpu_s"]["median"], 3)
    figures["protobuf_vs_json_cpu_mean_x"] = round(
        figures["protobuf_server_cpu_mean_s"] / figures["json_server_cpu_mean_s"], 3)
    figures["runs"] = runs
    return figures


def run(kubernetes: str | None, rounds: int, size: int | None) -> Result:
    """Install the set into a fresh lab and measure; the lab is torn down afterwards."""
    directory = crd_dir(SET, size)
    total = len(crd_files(directory))
    wait_for_memory(memory_for(total, total))
    with fresh_lab(kubernetes) as state:
        say(f"crd_encoding: installing {total} CRDs into {state.kubernetes_version}")
        seconds, _ = run_timed(load_argv(directory, state), timeout=3600)
        say(f"crd_encoding: installed in {seconds:.0f} s")
        say("crd_encoding: waiting for the API server to go idle (OpenAPI publication)")
        wait_until_idle(state)
        runs = measure(state, rounds)
        version = state.kubernetes_version
    return Result("crd_encoding", version, f"{SET} {total}", figures=summarize(runs, total),
                  notes=["full CRD lists from the watch cache (resourceVersion=0), uncompressed, alternating"])


def main(argv: list[str] | None = None) -> int:
    """``python -m bench crd_encoding [--kubernetes MINOR] [--rounds N] [--size N] [--output DIR]``."""
    parser = argparse.ArgumentParser(prog="python -m bench crd_encoding", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubernetes", default=None, metavar="MINOR", help="e.g. 1.26 [default: the newest]")
    parser.add_argument("--rounds", type=int, default=15, help="alternating pairs of lists [default: 15]")
    parser.add_argument("--size", type=int, default=None, help="the first N CRDs of the AWS set [default: all]")
    parser.add_argument("--output", type=Path, default=None, help="directory of the JSON result")
    parser.add_argument("--no-results-md", action="store_true", help="do not append to bench/RESULTS.md")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    options = Options(append_results_md=not args.no_results_md)
    if args.output:
        options.output = args.output
    isolate_environment()
    result = run(args.kubernetes, args.rounds, args.size)
    path = result.write(options)
    figures = result.figures
    print(json.dumps({"benchmark": result.name, "kubernetes": result.kubernetes, "result": str(path),
                      **{k: v for k, v in figures.items() if k != "runs"}}, indent=1), flush=True)
    return 0
