"""Benchmark 1: discovery, crdscope against ``kubectl api-resources`` and against the floor.

On one lab per size (the AWS set), in alternating runs:

* ``kubectl_cold``: ``kubectl api-resources`` with a fresh ``--cache-dir`` (a process: wall time);
* ``crdscope_cli_aggregated`` / ``crdscope_cli_legacy``: ``crdscope probe discovery [--legacy]
  --json`` as a process (wall time, Python start-up included);
* ``crdscope_aggregated`` / ``crdscope_legacy``: the same probe in this process on a fresh
  client, its own ``seconds`` (what the monitor pays on every run);
* ``floor_aggregated``: the same aggregated documents (``/api``, ``/apis``, client-go's Accept
  list) fetched raw on a fresh connection, bodies read and not parsed;
* ``floor_legacy``: the legacy walk's 2+N requests raw, every group-version at once, no
  client-side limit.

Goals (medians of pairwise ratios): the aggregated probe within 1.2x of its floor
(in-process against in-process: both exclude process start-up, so the ratio is
crdscope's own client cost); the aggregated probe at most half of kubectl's cold time,
judged on the CLI (a process against a process: what a person at a shell waits for;
the in-process ratio is reported beside it); the legacy walk within 1.5x of its floor.
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import tempfile
import time
from pathlib import Path
from collections.abc import Iterator

import httpx

from crdscope.connection.cluster import Cluster, ssl_context
from crdscope.probes.discovery import once as discovery_once
from crdscope.connection.discovery_docs import ACCEPT_AGGREGATED, ACCEPT_LEGACY, group_version_path
from crdscope.connection.kubeconfig import load_config

from .common import (BenchError, Options, Result, alternate, compile_sources, median_at_most, ratios, run_timed,
                     size_label, stats)
from .labs import ADMIN_CONTEXT, each_shared_lab

SET = "provider-aws"


def crdscope_command() -> list[str]:
    """The ``crdscope`` a person runs: the console script beside this interpreter."""
    compile_sources()  # timed as installed: with bytecode
    script = Path(sys.executable).with_name("crdscope")
    return [str(script)] if script.exists() else [sys.executable, "-m", "crdscope.cli.main"]


class Contenders:
    """The discovery contenders against one lab; each call is one timed run (seconds)."""

    def __init__(self, kubeconfig: str) -> None:
        self.kubeconfig = kubeconfig
        self.config = load_config(kubeconfig, ADMIN_CONTEXT)
        #: resources each contender found, run by run (they must agree)
        self.resources: dict[str, list[int]] = {}
        #: requests the legacy walks sent
        self.walk_requests: list[int] = []
        #: the probe's own seconds as the CLI reported them
        self.cli_probe_seconds: dict[str, list[float]] = {"aggregated": [], "legacy": []}
        #: CPU seconds (user + system) of each process run, by contender: on a shared, busy
        #: machine wall times swing with the load, CPU time much less
        self.cpu_seconds: dict[str, list[float]] = {}

    def _found(self, name: str, resources: int) -> None:
        self.resources.setdefault(name, []).append(resources)

    def _process(self, name: str, argv: list[str], env: dict[str, str] | None = None):
        """run_timed, keeping the process's CPU seconds under ``name``."""
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        timed_run = run_timed(argv, env=env)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        self.cpu_seconds.setdefault(name, []).append(used)
        return timed_run

    def kubectl_cold(self) -> float:
        with tempfile.TemporaryDirectory(prefix="crdscope-bench-kubectl-") as cache:
            argv = ["kubectl", f"--kubeconfig={self.kubeconfig}", f"--context={ADMIN_CONTEXT}",
                    f"--cache-dir={cache}", "api-resources", "--no-headers"]
            seconds, done = self._process("kubectl_cold", argv)
        self._found("kubectl", sum(1 for line in done.stdout.splitlines() if line.strip()))
        return seconds

    def crdscope_cli(self, legacy: bool) -> float:
        argv = [*crdscope_command(), "probe", "discovery", "--json", "--kubeconfig", self.kubeconfig,
                "--context", ADMIN_CONTEXT, *(["--legacy"] if legacy else [])]
        with tempfile.TemporaryDirectory(prefix="crdscope-bench-cache-") as cache:
            mode = "legacy" if legacy else "aggregated"
            seconds, done = self._process(f"crdscope_cli_{mode}", argv, env={"KUBECACHEDIR": cache})
        sample = json.loads(done.stdout)
        self._found(f"crdscope_cli_{mode}", sample["resources"])
        self.cli_probe_seconds[mode].append(sample["seconds"])
        return seconds

    def crdscope_in_process(self, legacy: bool) -> float:
        async def probe():
            async with Cluster(self.config) as cluster:
                return await discovery_once(cluster, legacy=legacy)

        sample = asyncio.run(probe())
        if sample.error:
            raise BenchError(f"crdscope discovery probe failed: {sample.error}")
        self._found(f"crdscope_{'legacy' if legacy else 'aggregated'}", sample.resources)
        if legacy:
            self.walk_requests.append(sample.requests)
        return sample.seconds

    def _client(self, limits: httpx.Limits) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.config.server, verify=ssl_context(self.config), http2=True,
                                 limits=limits, timeout=300, trust_env=False)

    def floor_aggregated(self) -> float:
        async def fetch() -> float:
            async with self._client(httpx.Limits()) as client:
                started = time.perf_counter()
                for path in ("/api", "/apis"):
                    response = await client.get(path, headers={"Accept": ACCEPT_AGGREGATED})
                    response.raise_for_status()
                return time.perf_counter() - started

        return asyncio.run(fetch())

    def floor_legacy(self) -> float:
        async def fetch() -> float:
            unlimited = httpx.Limits(max_connections=None, max_keepalive_connections=None)
            async with self._client(unlimited) as client:
                started = time.perf_counter()
                api = await client.get("/api", headers={"Accept": ACCEPT_LEGACY})
                apis = await client.get("/apis", headers={"Accept": ACCEPT_LEGACY})
                paths = [group_version_path(version) for version in api.json().get("versions", [])]
                paths += [group_version_path(version["groupVersion"])
                          for group in apis.json().get("groups", []) for version in group.get("versions", [])]
                answers = await asyncio.gather(*(client.get(path, headers={"Accept": ACCEPT_LEGACY})
                                                 for path in paths))
                seconds = time.perf_counter() - started
                failed = [a.request.url.path for a in answers if a.status_code != 200]
                if failed:
                    raise BenchError(f"legacy floor: {failed[0]} answered an error")
                return seconds

        return asyncio.run(fetch())


def measure(kubeconfig: str, runs: int) -> tuple[dict[str, list[float]], Contenders]:
    """Alternating runs of every contender against one lab."""
    contenders = Contenders(kubeconfig)
    # The first in-process request imports h2 and warms TLS code: not what a run costs.
    contenders.crdscope_in_process(False)
    contenders.floor_aggregated()
    contenders.resources.clear()
    times = alternate({
        "kubectl_cold": contenders.kubectl_cold,
        "crdscope_cli_aggregated": lambda: contenders.crdscope_cli(False),
        "crdscope_aggregated": lambda: contenders.crdscope_in_process(False),
        "floor_aggregated": contenders.floor_aggregated,
        "crdscope_cli_legacy": lambda: contenders.crdscope_cli(True),
        "crdscope_legacy": lambda: contenders.crdscope_in_process(True),
        "floor_legacy": contenders.floor_legacy,
    }, runs)
    return times, contenders


def run(options: Options) -> Iterator[Result]:
    for size, state, total in each_shared_lab(SET, options.chosen_sizes(), "discovery"):
        times, contenders = measure(state.kubeconfig, options.runs)
        figures: dict = {f"{name}_s": stats(values) for name, values in times.items()}
        figures.update({
            "aggregated_vs_floor": stats(ratios(times["crdscope_aggregated"], times["floor_aggregated"])),
            "cli_aggregated_vs_kubectl": stats(ratios(times["crdscope_cli_aggregated"], times["kubectl_cold"])),
            "aggregated_vs_kubectl": stats(ratios(times["crdscope_aggregated"], times["kubectl_cold"])),
            "legacy_vs_floor": stats(ratios(times["crdscope_legacy"], times["floor_legacy"])),
            "cli_probe_seconds_aggregated": stats(contenders.cli_probe_seconds["aggregated"]),
            "legacy_requests": max(contenders.walk_requests, default=0),
        })
        cpu = contenders.cpu_seconds
        figures.update({f"{name}_cpu_s": stats(values) for name, values in cpu.items()})
        figures["cli_aggregated_cpu_vs_kubectl"] = stats(ratios(cpu["crdscope_cli_aggregated"][-options.runs:],
                                                                cpu["kubectl_cold"][-options.runs:]))
        agreed = {value for found in contenders.resources.values() for value in found}
        figures["resources"] = next(iter(agreed)) if len(agreed) == 1 else {
            name: sorted(set(found)) for name, found in contenders.resources.items()}
        result = Result("discovery", state.kubernetes_version, size_label(SET, size, total), figures)
        result.goals["aggregated <= 1.2x floor (in-process)"] = median_at_most(
            ratios(times["crdscope_aggregated"], times["floor_aggregated"]), 1.2)
        result.goals["aggregated <= 0.5x kubectl cold (CLI)"] = median_at_most(
            ratios(times["crdscope_cli_aggregated"], times["kubectl_cold"]), 0.5)
        result.goals["legacy <= 1.5x unlimited floor (in-process)"] = median_at_most(
            ratios(times["crdscope_legacy"], times["floor_legacy"]), 1.5)
        if len(agreed) != 1:
            result.notes.append(f"contenders disagree on the number of resources: {figures['resources']}")
        yield result
