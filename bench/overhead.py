"""Benchmark 3: what ``crdscope watch --headless`` costs the machine and the API server.

Against a lab holding the set, crdscope watches with every probe at its default
cadence for 5 minutes (``quick``: 30 s), as the lab's restricted user (the least
privilege the probes need).  Steady state is everything after the first minute
(``quick``: 10 s), cut into one-minute windows (``quick``: 10 s):

* CPU seconds per minute of crdscope's process (``/proc/<pid>/stat``, user + system);
* resident memory (``/proc/<pid>/status``): the peak after the first minute
  (sampled every second; the goal) and ``VmHWM``, the peak of the whole run;
* requests per second counted by the server: a FlowSchema of its own matches
  crdscope's user, so ``apiserver_flowcontrol_dispatched_requests_total{flow_schema=...}``
  (plus rejected) counts exactly its requests;
* bytes per second: counted in crdscope's process at the transport (the server has no
  per-client byte figure), see :mod:`bench.overhead_child`.  Its request count is
  reported beside the server's as a cross-check.

The process is crdscope's CLI run through :mod:`bench.overhead_child`, with its own
config, state and kubectl cache directories.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Iterator

import httpx

from crdscope.lab.controlplane import LabState, admin_tls
from crdscope.lab.rbac import RESTRICTED_USER
from crdscope.connection.metrics import parse_text

from .common import BENCH_DIR, BenchError, Options, Result, process_cpu_seconds, size_label, stats
from .discovery import SET
from .labs import RESTRICTED_CONTEXT, each_shared_lab, kubectl

FLOW_SCHEMA = "crdscope-bench"
DISPATCHED = "apiserver_flowcontrol_dispatched_requests_total"
REJECTED = "apiserver_flowcontrol_rejected_requests_total"
START_TIMEOUT_SECONDS = 120.0


@dataclass(frozen=True)
class Plan:
    """How long to watch, when steady state starts and how long a window is (seconds)."""

    duration: float
    warmup: float
    window: float

    @classmethod
    def for_options(cls, options: Options) -> Plan:
        return cls(30.0, 10.0, 10.0) if options.quick else cls(300.0, 60.0, 60.0)


@dataclass(frozen=True)
class Snapshot:
    """Counters at one moment: process CPU, server-side requests, client-side requests and bytes."""

    seconds: float
    cpu_seconds: float
    server_requests: float
    client_requests: int
    client_bytes: int
    #: "GET /path" -> client requests so far, and bytes received so far
    paths: dict[str, int] = field(default_factory=dict)
    path_bytes: dict[str, int] = field(default_factory=dict)


@dataclass
class Watched:
    snapshots: list[Snapshot] = field(default_factory=list)
    rss_steady_bytes: list[int] = field(default_factory=list)
    peak_rss_bytes: int = 0
    output: str = ""


def flow_schema(user: str) -> dict:
    """A FlowSchema that matches every request of ``user`` first: precedence 2, the lowest
    allowed beside ``exempt`` (1, only ``system:masters``), with ties broken by name
    (``crdscope-bench`` sorts before ``probes``, which would take ``/livez`` and ``/readyz``)."""
    return {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "FlowSchema",
        "metadata": {"name": FLOW_SCHEMA},
        "spec": {
            "matchingPrecedence": 2,
            "priorityLevelConfiguration": {"name": "global-default"},
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [{
                "subjects": [{"kind": "User", "user": {"name": user}}],
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                   "clusterScope": True, "namespaces": ["*"]}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            }],
        },
    }


def server_requests(state: LabState) -> float:
    """Requests the server classified into :data:`FLOW_SCHEMA` so far (dispatched + rejected)."""
    with httpx.Client(base_url=state.server, verify=admin_tls(state.pki_dir), timeout=120) as client:
        response = client.get("/metrics")
        response.raise_for_status()
    scrape = parse_text(response.content, [DISPATCHED, REJECTED])
    return sum(scrape.total(name, flow_schema=FLOW_SCHEMA) or 0.0 for name in (DISPATCHED, REJECTED))


def memory_bytes(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process in bytes."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            key, amount = line.split(":", 1)
            values[key] = int(amount.split()[0]) * 1024
    return values.get("VmRSS", 0), values.get("VmHWM", 0)


class Child:
    """crdscope's headless watch in a process of its own, with a byte meter."""

    def __init__(self, state: LabState, directory: Path) -> None:
        self.counts = directory / "counts.jsonl"
        self.stdout = directory / "stdout.txt"
        self.stderr = directory / "stderr.txt"
        env = {**os.environ, "PYTHONPATH": str(BENCH_DIR.parent),
               **{name: str(directory / name.lower()) for name in ("XDG_CONFIG_HOME", "XDG_STATE_HOME",
                                                                   "XDG_DATA_HOME", "KUBECACHEDIR")}}
        argv = [sys.executable, "-m", "bench.overhead_child", str(self.counts), "watch", "--headless",
                "--kubeconfig", state.kubeconfig, "--context", RESTRICTED_CONTEXT]
        with open(self.stdout, "wb") as out, open(self.stderr, "wb") as err:
            self.process = subprocess.Popen(argv, stdout=out, stderr=err, env=env, cwd=BENCH_DIR.parent)
        self.started = time.monotonic()

    @property
    def pid(self) -> int:
        return self.process.pid

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def wait_watching(self) -> None:
        """Return once the watch printed its first line (its signal handler is in place)."""
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while "watching" not in self.stdout.read_text(errors="replace"):
            self.check_alive()
            if time.monotonic() > deadline:
                raise BenchError(f"crdscope watch did not start in {START_TIMEOUT_SECONDS:.0f}s")
            time.sleep(0.2)

    def check_alive(self) -> None:
        if self.process.poll() is not None:
            lines = self.stderr.read_text(errors="replace").strip().splitlines() or ["no output"]
            raise BenchError(f"crdscope watch exited {self.process.returncode}: {lines[-1]}")

    def counters(self) -> dict:
        """Ask the child for its counters (SIGUSR1) and read its answer."""
        before = self._lines()
        os.kill(self.pid, signal.SIGUSR1)
        deadline = time.monotonic() + 30
        while len(self._lines()) <= len(before):
            self.check_alive()
            if time.monotonic() > deadline:
                raise BenchError("crdscope watch did not report its counters")
            time.sleep(0.02)
        return json.loads(self._lines()[-1])

    def _lines(self) -> list[str]:
        try:
            return [line for line in self.counts.read_text().splitlines() if line.endswith("}")]
        except FileNotFoundError:
            return []

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def watch(state: LabState, plan: Plan) -> Watched:
    """Run the watch for ``plan.duration``, taking snapshots at the warm-up's end and every window."""
    kubectl(state, "--context=crdscope-lab", "apply", "--server-side", "-f", "-",
            input_text=json.dumps(flow_schema(RESTRICTED_USER)))
    watched = Watched()
    marks = [plan.warmup + plan.window * k for k in range(int((plan.duration - plan.warmup) // plan.window) + 1)]
    with tempfile.TemporaryDirectory(prefix="crdscope-bench-watch-") as home:
        child = Child(state, Path(home))
        try:
            child.wait_watching()
            for mark in marks:
                while child.elapsed() < mark:
                    child.check_alive()
                    rss, peak = memory_bytes(child.pid)
                    watched.peak_rss_bytes = max(watched.peak_rss_bytes, peak)
                    if child.elapsed() >= plan.warmup:
                        watched.rss_steady_bytes.append(rss)
                    time.sleep(min(1.0, max(0.0, mark - child.elapsed())))
                counters = child.counters()
                watched.snapshots.append(Snapshot(
                    child.elapsed(), process_cpu_seconds(child.pid), server_requests(state), counters["requests"],
                    counters["bytes"], counters["paths"], counters["path_bytes"]))
            watched.peak_rss_bytes = max(watched.peak_rss_bytes, memory_bytes(child.pid)[1])
        finally:
            child.stop()
            watched.output = child.stdout.read_text(errors="replace")
            kubectl(state, "--context=crdscope-lab", "delete", "flowschema", FLOW_SCHEMA, "--ignore-not-found")
    return watched


def per_window(snapshots: list[Snapshot], field_name: str) -> list[float]:
    """Per-second rates of one counter in each window between consecutive snapshots."""
    return [(getattr(b, field_name) - getattr(a, field_name)) / (b.seconds - a.seconds)
            for a, b in itertools.pairwise(snapshots) if b.seconds > a.seconds]


def steady_paths(first: Snapshot, last: Snapshot, top: int = 6, *, by_bytes: bool = False) -> list[tuple[str, int]]:
    """The paths crdscope requested most (``by_bytes``: received most from) between two snapshots."""
    before, after = (first.path_bytes, last.path_bytes) if by_bytes else (first.paths, last.paths)
    counts = {path: count - before.get(path, 0) for path, count in after.items()}
    return sorted(((path, count) for path, count in counts.items() if count), key=lambda item: -item[1])[:top]


def run(options: Options) -> Iterator[Result]:
    plan = Plan.for_options(options)
    for size, state, total in each_shared_lab(SET, options.chosen_sizes(), "overhead"):
        watched = watch(state, plan)
        first, last = watched.snapshots[0], watched.snapshots[-1]
        span = last.seconds - first.seconds
        cpu_per_minute = (last.cpu_seconds - first.cpu_seconds) / span * 60
        requests_per_s = (last.server_requests - first.server_requests) / span
        bytes_per_s = (last.client_bytes - first.client_bytes) / span
        steady_rss_mb = max(watched.rss_steady_bytes, default=0) / 1e6
        figures = {
            "watched_s": round(last.seconds, 1),
            "steady_s": round(span, 1),
            "cpu_s_per_min": round(cpu_per_minute, 3),
            "cpu_pct_of_core": round(cpu_per_minute / 60 * 100, 2),
            "cpu_s_per_min_windows": stats([rate * 60 for rate in per_window(watched.snapshots, "cpu_seconds")]),
            "steady_peak_rss_mb": round(steady_rss_mb, 1),
            "run_peak_rss_mb": round(watched.peak_rss_bytes / 1e6, 1),
            "server_req_per_s": round(requests_per_s, 3),
            "server_req_per_s_windows": stats(per_window(watched.snapshots, "server_requests")),
            "client_req_per_s": round((last.client_requests - first.client_requests) / span, 3),
            "client_kb_per_s": round(bytes_per_s / 1e3, 2),
            "client_kb_per_s_windows": stats([rate / 1e3 for rate in per_window(watched.snapshots,
                                                                                "client_bytes")]),
            "first_minute_server_requests": round(first.server_requests),
            "first_minute_client_mb": round(first.client_bytes / 1e6, 2),
        }
        result = Result("overhead", state.kubernetes_version, size_label(SET, size, total), figures)
        # Issue 24's steady-state goals (they were 3% of a core, 150 MB, 1 request/s before it).
        result.goals["cpu < 1% of a core"] = cpu_per_minute / 60 < 0.01
        result.goals["steady RSS < 110 MB"] = steady_rss_mb < 110
        result.goals["< 0.5 request/s"] = requests_per_s < 0.5
        result.goals["< 50 KB/s"] = bytes_per_s < 50e3
        figures["busiest_paths_per_min"] = ", ".join(f"{path} {count / span * 60:.1f}"
                                                     for path, count in steady_paths(first, last))
        figures["heaviest_paths_kb_per_s"] = ", ".join(f"{path} {count / span / 1e3:.1f}"
                                                       for path, count in steady_paths(first, last, by_bytes=True))
        failures = [line for line in watched.output.splitlines() if "fail" in line.lower() or "error" in line.lower()]
        if failures:
            result.notes.append(f"{len(failures)} event lines about failures, e.g. {failures[0][:200]}")
        yield result
