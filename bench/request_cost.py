"""Benchmark: what the monitor's requests cost the API server, request by request, on a loaded lab.

``python -m bench request_cost [--kubernetes 1.26] [--rounds 15] [--size N]``: a fresh lab, the AWS
set (``../shared/crds/provider-aws.tar.xz``) installed with ``crdscope load``; once the server is
idle, each request below in turn, round after round (the order rotates), each timed by the API
server's own CPU seconds (``/proc``) over the request and one second after it:

- ``crd_list_json`` / ``crd_list_protobuf``: every CRD from the watch cache (``resourceVersion=0``,
  uncompressed).  The monitor's CRD watch receives every CRD three times or more during an install
  (created, names accepted, established), schema and all, and the server marshals each event for
  each watcher in the encoding it asked for: a full list is that marshalling of one copy of the set.
- ``metrics``: ``/metrics`` as the monitor scrapes it (gzip), the one scrape its probes share.
- ``apis``: ``/apis`` as the discovery probe reads it.

Multiplied by the requests the footprint benchmark counted by path, this attributes what watching
costs the server.  Full collections of a heap of many GiB come and go with the allocations, so
the figures are medians and means over many rounds, not one request.
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
PROTOBUF = "application/vnd.kubernetes.protobuf"
#: name -> (path, query, headers, the media type the answer must have).
REQUESTS: dict[str, tuple[str, dict[str, str], dict[str, str], str]] = {
    "crd_list_json": (CRD_LIST, {"resourceVersion": "0"},
                      {"Accept": "application/json", "Accept-Encoding": "identity"}, "application/json"),
    "crd_list_protobuf": (CRD_LIST, {"resourceVersion": "0"},
                          {"Accept": PROTOBUF, "Accept-Encoding": "identity"}, PROTOBUF),
    "metrics": ("/metrics", {}, {"Accept-Encoding": "gzip"}, "text/plain"),
    "apis": ("/apis", {}, {"Accept": "application/json"}, "application/json"),
}
#: The server's CPU is read this long after the answer's last byte (its goroutines finish writing).
SETTLE_SECONDS = 1.0
#: Between requests: what one request leaves behind (a collection) falls outside the next one's window.
GAP_SECONDS = 2.0


def one_request(client: httpx.Client, pid: int, name: str) -> dict[str, float]:
    """One request: the server's CPU seconds, the wall seconds and the MB received (as sent)."""
    path, params, headers, expected = REQUESTS[name]
    before, started = process_cpu_seconds(pid), time.monotonic()
    received = 0
    with client.stream("GET", path, params=params, headers=headers) as response:
        if response.status_code != 200:
            raise BenchError(f"{name}: GET {path} answered {response.status_code}")
        if not response.headers.get("content-type", "").startswith(expected):
            answered = response.headers.get("content-type")
            raise BenchError(f"{name}: asked for {expected}, the server answered {answered}")
        for chunk in response.iter_raw():
            received += len(chunk)
    wall = time.monotonic() - started
    time.sleep(SETTLE_SECONDS)
    return {"cpu_s": round(process_cpu_seconds(pid) - before, 3), "wall_s": round(wall, 3),
            "mb": round(received / 1e6, 3)}


def measure(state: LabState, rounds: int) -> dict[str, list[dict[str, float]]]:
    """``rounds`` rounds of every request (the order rotates by one each round)."""
    pid = state.components["apiserver"].pid
    names = list(REQUESTS)
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    with httpx.Client(base_url=state.server, verify=admin_tls(state.pki_dir), timeout=600) as client:
        for round_number in range(rounds):
            shift = round_number % len(names)
            for name in names[shift:] + names[:shift]:
                time.sleep(GAP_SECONDS)
                runs[name].append(one_request(client, pid, name))
            say(f"  round {round_number + 1}/{rounds}: "
                + ", ".join(f"{name} {runs[name][-1]['cpu_s']:.2f} s" for name in names))
    return runs


def summarize(runs: dict[str, list[dict[str, float]]], crds: int) -> dict[str, Any]:
    """Per request the server's CPU seconds (min/median/max, and the mean), its size, and the
    ratio of the CRD list in protobuf to the one in JSON."""
    figures: dict[str, Any] = {"crds": crds}
    for name, values in runs.items():
        cpu = [v["cpu_s"] for v in values]
        figures[f"{name}_server_cpu_s"] = stats(cpu)
        figures[f"{name}_server_cpu_mean_s"] = round(statistics.fmean(cpu), 3)
        figures[f"{name}_mb"] = stats([v["mb"] for v in values])["median"]
        figures[f"{name}_wall_s"] = stats([v["wall_s"] for v in values])
    json_median = figures["crd_list_json_server_cpu_s"]["median"]
    figures["crd_list_protobuf_vs_json_cpu_median_x"] = (
        round(figures["crd_list_protobuf_server_cpu_s"]["median"] / json_median, 3) if json_median else None)
    json_mean = figures["crd_list_json_server_cpu_mean_s"]
    figures["crd_list_protobuf_vs_json_cpu_mean_x"] = (
        round(figures["crd_list_protobuf_server_cpu_mean_s"] / json_mean, 3) if json_mean else None)
    figures["runs"] = runs
    return figures


def run(kubernetes: str | None, rounds: int, size: int | None) -> Result:
    """Install the set into a fresh lab and measure; the lab is torn down afterwards."""
    directory = crd_dir(SET, size)
    total = len(crd_files(directory))
    wait_for_memory(memory_for(total, total))
    with fresh_lab(kubernetes) as state:
        say(f"request_cost: installing {total} CRDs into {state.kubernetes_version}")
        seconds, _ = run_timed(load_argv(directory, state), timeout=3600)
        say(f"request_cost: installed in {seconds:.0f} s")
        say("request_cost: waiting for the API server to go idle (OpenAPI publication)")
        wait_until_idle(state)
        runs = measure(state, rounds)
        version = state.kubernetes_version
    return Result("request_cost", version, f"{SET} {total}", figures=summarize(runs, total),
                  notes=["each request in turn, round after round; the server's CPU over the request and 1 s after"])


def main(argv: list[str] | None = None) -> int:
    """``python -m bench request_cost [--kubernetes MINOR] [--rounds N] [--size N] [--output DIR]``."""
    parser = argparse.ArgumentParser(prog="python -m bench request_cost", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubernetes", default=None, metavar="MINOR", help="e.g. 1.26 [default: the newest]")
    parser.add_argument("--rounds", type=int, default=15, help="rounds of every request [default: 15]")
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
