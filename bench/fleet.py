"""What each watched cluster costs one crdscope process: ``python -m bench fleet``.

``python -m bench fleet [--clusters 1,5,20] [--seconds 180] [--warmup 45]``

Issue 28 asks for a fleet of 20 clusters on this 2-core machine, with the monitor's own CPU under
1% of a core per cluster.  Twenty labs are too heavy, so the fleet is **one lab with N
kube-apiservers on one etcd** (``lab up --apiservers``): each API server is a cluster of its own to
crdscope (its own context, address, connections, probe set and core), which is what crdscope's
cost depends on; only etcd, which crdscope never talks to, is shared.

For each fleet size, one ``crdscope watch --headless --context c1 ... --context cN
--serve-metrics`` runs for ``--seconds`` (its endpoint scraped every 15 s, as Prometheus
would), and after ``--warmup`` (first contact, first cold discovery) the bench reads:

* the process's CPU (user + system, ``/proc``) over the steady window, as % of one core, in
  total and per cluster;
* its resident memory at the end, in total and per cluster;
* the requests and bytes it sent each server per minute (the exporter's
  ``crdscope_footprint_requests_total`` per ``cluster``), and whether every cluster's probes are up.

Goal (issue 28): CPU per cluster under 1% of a core at 20 clusters.  The fleet screen's key
latency and the TUI's own CPU per cluster are ``python -m bench fleet_ui`` (``bench/fleet_ui.py``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

from crdscope.lab.binaries import ensure_binaries
from crdscope.lab.components import LabOptions
from crdscope.lab.controlplane import Lab, LabState, free_port

from .common import (BenchError, Options, Result, isolate_environment, process_cpu_seconds, say, scrape_metrics,
                     stop_process)

CLUSTERS = (1, 5, 20)
SCRAPE_EVERY_SECONDS = 15.0
#: The goal: the monitor's own CPU per watched cluster, % of one core.
CPU_PER_CLUSTER_GOAL = 1.0


def fleet_kubeconfig(state: LabState, path: Path) -> list[str]:
    """A kubeconfig with one context per kube-apiserver of the lab (``fleet-1`` ... ``fleet-N``),
    each straight to its server (not through haproxy), with the lab's admin credentials."""
    document = yaml.safe_load(Path(state.kubeconfig).read_text())
    admin = next(c for c in document["contexts"] if c["name"] == state.admin_context)["context"]
    ca = next(c for c in document["clusters"] if c["name"] == admin["cluster"])["cluster"]
    names: list[str] = []
    clusters, contexts = [], []
    for index, component in enumerate(state.apiservers(), start=1):
        name = f"fleet-{index}"
        clusters.append({"name": name, "cluster": {**ca, "server": f"https://127.0.0.1:{component.port}"}})
        contexts.append({"name": name, "context": {"cluster": name, "user": admin["user"]}})
        names.append(name)
    document.update(clusters=clusters, contexts=contexts)
    document["current-context"] = names[0]
    path.write_text(yaml.safe_dump(document))
    path.chmod(0o600)
    return names


def _per_cluster(text: str, name: str) -> dict[str, float]:
    """Each cluster's value of one series of the exposition."""
    return {s.labels.get("cluster", ""): s.value for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == name}


def _probes_up(text: str) -> dict[str, bool]:
    """Each cluster: whether every probe's latest run succeeded."""
    up: dict[str, bool] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "crdscope_probe_up":
                cluster = sample.labels.get("cluster", "")
                up[cluster] = up.get(cluster, True) and sample.value == 1.0
    return up


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise BenchError(f"process {pid} has no VmRSS")


def measure_fleet(kubeconfig: Path, contexts: list[str], seconds: float, warmup: float) -> dict[str, Any]:
    """One headless fleet watch of ``contexts``; its CPU, memory and requests per cluster."""
    port = free_port()
    argv = [sys.executable, "-m", "crdscope.cli.main", "watch", "--headless", "--duration", f"{seconds + 30:.0f}s",
            "--serve-metrics", f"127.0.0.1:{port}", *[arg for c in contexts for arg in ("--context", c)]]
    process = subprocess.Popen(argv, env={**os.environ, "KUBECONFIG": str(kubeconfig)},
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        started = time.monotonic()
        next_scrape = started
        cpu_start = requests_start = None
        window_start = 0.0
        text = ""
        while time.monotonic() - started < seconds:
            if process.poll() is not None:
                raise BenchError(f"the fleet watch of {len(contexts)} exited {process.returncode}: "
                                 f"{(process.stderr.read() if process.stderr else '').strip()[-300:]}")
            now = time.monotonic()
            if now >= next_scrape:
                text = scrape_metrics(port) or text
                next_scrape = now + SCRAPE_EVERY_SECONDS
            if cpu_start is None and now - started >= warmup and text:
                cpu_start = process_cpu_seconds(process.pid)
                requests_start = _per_cluster(text, "crdscope_footprint_requests_total")
                window_start = now
            time.sleep(1.0)  # the bench's own cadence, not a wait for a condition
        text = scrape_metrics(port) or text
        window = time.monotonic() - window_start
        if cpu_start is None or requests_start is None:
            raise BenchError("the fleet watch served no metrics within the warm-up")
        cpu_percent = (process_cpu_seconds(process.pid) - cpu_start) / window * 100
        memory = rss_mib(process.pid)
        requests_end = _per_cluster(text, "crdscope_footprint_requests_total")
        per_minute = [(requests_end.get(c, 0.0) - requests_start.get(c, 0.0)) / window * 60 for c in contexts]
        up = _probes_up(text)
    finally:
        stop_process(process)
    n = len(contexts)
    return {"clusters": n, "window_s": round(window), "cpu_percent_of_a_core": round(cpu_percent, 2),
            "cpu_percent_per_cluster": round(cpu_percent / n, 3), "rss_mib": round(memory),
            "rss_mib_per_cluster": round(memory / n, 1),
            "requests_per_minute_per_cluster_median": round(statistics.median(per_minute), 1),
            "clusters_all_probes_up": sum(1 for c in contexts if up.get(c))}


def run(options: Options, sizes: tuple[int, ...], seconds: float, warmup: float) -> Result:
    """One lab of max(sizes) API servers; a fleet watch per size, smallest first."""
    binaries = ensure_binaries(progress=say)
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="crdscope-bench-fleet-") as home:
        lab = Lab(Path(home) / "lab")
        state = lab.up(binaries, say=say, options=LabOptions(apiservers=max(sizes)))
        try:
            contexts = fleet_kubeconfig(state, Path(home) / "fleet.kubeconfig")
            for n in sorted(sizes):
                say(f"fleet: watching {n} clusters for {seconds:.0f} s")
                measured = measure_fleet(Path(home) / "fleet.kubeconfig", contexts[:n], seconds, warmup)
                say(f"fleet: {measured}")
                for key, value in measured.items():
                    if key != "clusters":
                        figures[f"{key}@{n}"] = value
            kubernetes = state.kubernetes_version
        finally:
            lab.down()
    largest = max(sizes)
    goals = {f"monitor CPU per cluster < {CPU_PER_CLUSTER_GOAL:g}% of a core at {largest} clusters":
             figures[f"cpu_percent_per_cluster@{largest}"] < CPU_PER_CLUSTER_GOAL}
    return Result("fleet", kubernetes, f"{','.join(map(str, sorted(sizes)))} clusters (API servers on one etcd)",
                  figures, goals)


def main(argv: list[str] | None = None) -> int:
    """``python -m bench fleet [--clusters 1,5,20] [--seconds 180] [--warmup 45]``."""
    parser = argparse.ArgumentParser(prog="python -m bench fleet", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clusters", default=",".join(map(str, CLUSTERS)), help="fleet sizes (default 1,5,20)")
    parser.add_argument("--seconds", type=float, default=180.0, help="each watch's length (default 180)")
    parser.add_argument("--warmup", type=float, default=45.0, help="left out of the window (default 45)")
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument("--no-results-md", action="store_true", help="do not append to bench/RESULTS.md")
    args = parser.parse_args(argv)
    try:
        sizes = tuple(int(part) for part in args.clusters.split(",") if part.strip())
    except ValueError:
        parser.error(f"--clusters {args.clusters!r}: whole numbers, e.g. 1,5,20")
    if not sizes or min(sizes) < 1 or args.warmup >= args.seconds:
        parser.error("--clusters needs sizes of at least 1, and --warmup must be shorter than --seconds")
    options = Options(append_results_md=not args.no_results_md)
    if args.output:
        options.output = args.output
    isolate_environment()
    result = run(options, sizes, args.seconds, args.warmup)
    print(result.write(options), flush=True)
    return 0
