"""Benchmark: what viewers cost a collector and its API server (``crdscope attach`` on ``watch --serve-view``).

``python -m bench viewers [--phase-seconds 60] [--settle-seconds 20] [--warmup-seconds 120] [--viewers 0,1,10]
[--kubernetes MINOR] [--output DIR]``: a fresh lab (no CRDs; default: the newest Kubernetes), a token
file (a random string, mode 0600) and one collector, ``crdscope watch --headless --serve-view
127.0.0.1:0 --serve-metrics 127.0.0.1:0`` on the lab's admin context (the ports it printed are read
from its stdout).  Once its exporter shows a footprint sample, ``--warmup-seconds`` let it go quiet
(no CRD change for ``cadences.settle``, 60 s from its start: every probe on its idle cadence).

Then, for each viewer count in order (default 0, 1, 10), a phase: that many ``crdscope attach URL
--headless --no-record`` processes (no screen, no request to any API server: they read the
collector's stream), waited for until each printed "attached to" and the exporter's
``crdscope_footprint_viewers`` equals the count, then ``--settle-seconds`` of rest (each new viewer
is sent the state so far), then over ``--phase-seconds``:

- the requests the API server served: the delta of the sum of every ``apiserver_request_total``
  series of the lab's ``/metrics`` (read with the admin certificate) between the phase's start and
  end, and by verb and resource.  The server's own background (lease renewals) and the bench's one
  read (the start read is in the end read's count) are in every phase alike; the collector's own
  count (``crdscope_footprint_requests_total``, a footprint sample every 5 s), by origin too, is
  beside it: it tells a probe's cadence that fell into one window from a request a viewer caused;
- the collector's CPU seconds (``/proc``, every thread) as a share of one core;
- the footprint's own figure at the phase's end, ``crdscope_footprint_viewer_cpu_share`` (the CPU its
  view server spent encoding for and writing to viewers, over the last 60 s), and the same from its
  counter ``crdscope_footprint_viewer_cpu_seconds_total`` over the phase;
- the viewers' own CPU (summed over their processes), for information.

The viewers are stopped (SIGTERM) before the next phase.  Reported per phase: the server's request
count, per minute, its ratio to the 0-viewer phase, the collector's CPU share, that share minus the
0-viewer phase's divided by the viewers (the CPU a viewer costs the collector), and the footprint's
self-reported share.  Goals (the issue): with 1 and 10 viewers the server serves the same requests as
with none (within 5%), and a viewer costs the collector at most 0.5% of a core.

The monitor's idle cadences run 20 s to 120 s apart and are counted from the end of each run, not on a
clock: a phase of 60 s holds one more or one fewer run of a probe by chance (a GET /version every
120 s, four latency canaries every 60 s).  Longer phases (``--phase-seconds 240``) average that out.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from crdscope.base.labrecord import admin_tls
from crdscope.connection.metrics import Scrape, parse_text
from crdscope.lab.binaries import ensure_binaries
from crdscope.lab.controlplane import Lab, LabState

from .common import (BenchError, Options, Result, append_row, isolate_environment, process_cpu_seconds,
                     say, scrape_metrics)
from .labs import wait_until_idle

PHASE_SECONDS = 60.0
SETTLE_SECONDS = 20.0
#: After the collector's first footprint sample: its first minute is busy (every probe on its busy
#: cadence until no CRD changed for ``cadences.settle``, 60 s, and the waits then running out).
WARMUP_SECONDS = 120.0
VIEWER_COUNTS = (0, 1, 10)
#: The goals (the issue): the server's requests within 5% of none's; a viewer at most 0.5% of a core.
REQUESTS_TOLERANCE = 0.05
CPU_PER_VIEWER_LIMIT = 0.005
COLLECTOR_START_TIMEOUT = 300.0
VIEWERS_TIMEOUT = 120.0
STOP_TIMEOUT = 30.0
SERVER_COUNTER = "apiserver_request_total"
VIEWERS_SERIES = "crdscope_footprint_viewers"
VIEWER_SHARE_SERIES = "crdscope_footprint_viewer_cpu_share"
VIEWER_CPU_SERIES = "crdscope_footprint_viewer_cpu_seconds_total"
OWN_REQUESTS_SERIES = "crdscope_footprint_requests_total"
OWN_BY_ORIGIN_SERIES = "crdscope_footprint_origin_requests_total"
SERVING_VIEW = re.compile(r"serving the view on (\S+)")
SERVING_METRICS = re.compile(r"serving metrics on http://[^\s/]+:(\d+)/metrics")


def crdscope(*args: str) -> list[str]:
    """``crdscope ARGS`` as this interpreter runs it."""
    return [sys.executable, "-m", "crdscope.cli.main", *args]


def last_line(*paths: Path) -> str:
    """The last non-empty line of the first of ``paths`` that has one (a process's last words)."""
    for path in paths:
        with contextlib.suppress(OSError):
            lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
            if lines:
                return lines[-1][:300]
    return "no output"


def until(predicate: Callable[[], Any], timeout: float, what: str, check: Callable[[], None] = lambda: None,
          interval: float = 0.5) -> Any:
    """Poll ``predicate`` until it is truthy (``check`` first each time: a process gone is a BenchError);
    BenchError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        check()
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise BenchError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def stop_all(processes: list[subprocess.Popen[bytes]], grace: float = STOP_TIMEOUT,
             signum: int = signal.SIGTERM) -> list[int]:
    """Signal every process at once, then wait for each (SIGKILL after ``grace``); their exit codes."""
    for process in processes:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signum)
    deadline = time.monotonic() + grace
    codes = []
    for process in processes:
        try:
            codes.append(process.wait(timeout=max(0.1, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            process.kill()
            codes.append(process.wait())
    return codes


class Collector:
    """``crdscope watch --headless --serve-view --serve-metrics`` on the lab, its output in files."""

    def __init__(self, state: LabState, token_file: Path, directory: Path, duration_seconds: float) -> None:
        self.directory = directory
        self.stdout = directory / "collector.out"
        self.stderr = directory / "collector.err"
        self.env = {**os.environ, "XDG_STATE_HOME": str(directory / "collector-state")}
        self.argv = crdscope("watch", "--headless", "--serve-view", "127.0.0.1:0", "--token-file", str(token_file),
                             "--serve-metrics", "127.0.0.1:0", "--kubeconfig", state.kubeconfig,
                             "--context", state.admin_context, "--duration", f"{int(duration_seconds)}s")
        self.process: subprocess.Popen[bytes] | None = None
        self.view_url = ""
        self.metrics_port = 0
        self.exit_code: int | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.stdout, "wb") as out, open(self.stderr, "wb") as err:
            self.process = subprocess.Popen(self.argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=self.env)

    def check_alive(self) -> None:
        if self.process is None or self.process.poll() is not None:
            code = None if self.process is None else self.process.returncode
            raise BenchError(f"the collector exited ({code}): {last_line(self.stderr, self.stdout)}")

    def wait_ready(self) -> float:
        """Wait until it printed both addresses and its exporter shows a footprint sample; seconds waited."""
        started = time.monotonic()

        def addresses() -> bool:
            text = self.stdout.read_text(errors="replace") if self.stdout.exists() else ""
            view, metrics = SERVING_VIEW.search(text), SERVING_METRICS.search(text)
            if view and metrics:
                self.view_url, self.metrics_port = view.group(1), int(metrics.group(1))
                return True
            return False

        until(addresses, COLLECTOR_START_TIMEOUT, "the collector's 'serving the view on' line", self.check_alive)
        left = COLLECTOR_START_TIMEOUT - (time.monotonic() - started)
        until(lambda: self.scrape().has(VIEWERS_SERIES), max(left, 10.0),
              f"{VIEWERS_SERIES} on the collector's exporter", self.check_alive)
        return time.monotonic() - started

    def scrape(self) -> Scrape:
        """The exporter's series now (empty while it does not answer)."""
        return parse_text(scrape_metrics(self.metrics_port) if self.metrics_port else "")

    def stop(self) -> None:
        """Ctrl-C as a person would, then harder; safe to call twice."""
        if self.process is not None and self.exit_code is None:
            self.exit_code = stop_all([self.process], grace=60.0, signum=signal.SIGINT)[0]


class Viewers:
    """``count`` headless viewers of the collector, each with its output and state directory of its own."""

    def __init__(self, count: int, url: str, token_file: Path, directory: Path) -> None:
        self.outputs = [directory / f"viewer-{i}.out" for i in range(count)]
        self.processes: list[subprocess.Popen[bytes]] = []
        directory.mkdir(parents=True, exist_ok=True)
        for i, output in enumerate(self.outputs):
            env = {**os.environ, "XDG_STATE_HOME": str(directory / f"viewer-{i}-state")}
            with open(output, "wb") as out:
                self.processes.append(subprocess.Popen(
                    crdscope("attach", url, "--token-file", str(token_file), "--headless", "--no-record"),
                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env))
        self.exit_codes: list[int] = []

    def check_alive(self) -> None:
        for process, output in zip(self.processes, self.outputs, strict=True):
            if process.poll() is not None:
                raise BenchError(f"a viewer exited ({process.returncode}): {last_line(output)}")

    def attached(self) -> bool:
        """Every viewer printed its "attached to" line."""
        return all(output.exists() and "attached to" in output.read_text(errors="replace") for output in self.outputs)

    def cpu_seconds(self) -> float:
        self.check_alive()
        return sum(process_cpu_seconds(process.pid) for process in self.processes)

    def lines(self) -> list[int]:
        """Lines each viewer printed so far."""
        return [len(output.read_text(errors="replace").splitlines()) if output.exists() else 0
                for output in self.outputs]

    def stop(self) -> None:
        if self.processes and not self.exit_codes:
            self.exit_codes = stop_all(self.processes)


class ServerCounter:
    """``apiserver_request_total`` of the lab's ``/metrics``, read as the admin."""

    def __init__(self, state: LabState) -> None:
        self.client = httpx.Client(base_url=state.server, verify=admin_tls(Path(state.pki_dir)), timeout=60)

    def read(self) -> dict[tuple[str, str], float]:
        """(verb, resource) -> requests so far (the resource with its subresource, or the path's kind)."""
        response = self.client.get("/metrics")
        if response.status_code != 200:
            raise BenchError(f"the lab's /metrics answered {response.status_code}")
        scrape = parse_text(response.content, (SERVER_COUNTER,))
        if not scrape.has(SERVER_COUNTER):
            raise BenchError(f"the lab's /metrics has no {SERVER_COUNTER}")
        counts: dict[tuple[str, str], float] = {}
        for labels, value in scrape.series(SERVER_COUNTER):
            resource = labels.get("resource") or "(non-resource)"
            if labels.get("subresource"):
                resource += "/" + labels["subresource"]
            key = (labels.get("verb", ""), resource)
            counts[key] = counts.get(key, 0.0) + value
        return counts

    def close(self) -> None:
        self.client.close()


def _share(seconds: float, wall: float) -> float:
    return seconds / wall if wall > 0 else 0.0


def by_origin(before: Scrape, after: Scrape) -> dict[str, int]:
    """The collector's own requests between two scrapes of its exporter, by part of the monitor."""
    then = before.by(OWN_BY_ORIGIN_SERIES, "origin")
    deltas = {origin: int(count - then.get((origin,), 0.0)) for (origin,), count in
              after.by(OWN_BY_ORIGIN_SERIES, "origin").items()}
    return {origin: delta for origin, delta in sorted(deltas.items()) if delta}


def measure_phase(count: int, collector: Collector, counter: ServerCounter, directory: Path, token_file: Path,
                  phase_seconds: float, settle_seconds: float) -> dict[str, Any]:
    """One phase: ``count`` viewers attached and counted, a rest, then the window measured."""
    say(f"viewers: starting {count} viewer{'s' if count != 1 else ''}")
    viewers = Viewers(count, collector.view_url, token_file, directory / f"phase-{count}")
    try:
        def checks() -> None:
            collector.check_alive()
            viewers.check_alive()

        waited_from = time.monotonic()
        until(viewers.attached, VIEWERS_TIMEOUT, f"{count} viewers to attach", checks)
        until(lambda: collector.scrape().value(VIEWERS_SERIES) == count, VIEWERS_TIMEOUT,
              f"{VIEWERS_SERIES} to be {count}", checks)
        attach_seconds = time.monotonic() - waited_from
        say(f"viewers: {count} counted after {attach_seconds:.1f} s; resting {settle_seconds:.0f} s")
        time.sleep(settle_seconds)  # deliberate: each new viewer was sent the state so far
        checks()
        before = collector.scrape()  # scraped outside the CPU window: the scrape costs the collector
        cpu_before, viewers_before, lines_before = process_cpu_seconds(collector.pid), viewers.cpu_seconds(), \
            viewers.lines()
        started = time.monotonic()
        server_before = counter.read()
        say(f"viewers: measuring {phase_seconds:.0f} s with {count} viewer{'s' if count != 1 else ''}")
        time.sleep(phase_seconds)  # deliberate: the phase is measured over this window
        server_after = counter.read()
        wall = time.monotonic() - started
        checks()
        cpu_after, viewers_after, lines_after = process_cpu_seconds(collector.pid), viewers.cpu_seconds(), \
            viewers.lines()
        after = collector.scrape()
    finally:
        viewers.stop()
    if not after.has(VIEWER_SHARE_SERIES):
        names = sorted(name for name in after.samples if name.startswith("crdscope_footprint_viewer"))
        raise BenchError(f"the collector's exporter has no {VIEWER_SHARE_SERIES} (viewer series: {names})")
    by_kind = {key: server_after.get(key, 0.0) - server_before.get(key, 0.0)
               for key in set(server_after) | set(server_before)}
    by_kind = {f"{verb} {resource}": int(delta) for (verb, resource), delta in
               sorted(by_kind.items(), key=lambda item: (-item[1], item[0])) if delta}
    requests = int(sum(server_after.values()) - sum(server_before.values()))
    own_before, own_after = before.total(OWN_REQUESTS_SERIES), after.total(OWN_REQUESTS_SERIES)
    viewer_cpu_before, viewer_cpu_after = before.total(VIEWER_CPU_SERIES), after.total(VIEWER_CPU_SERIES)
    record = {
        "viewers": count, "seconds": round(wall, 2), "attach_wait_s": round(attach_seconds, 1),
        "server_requests": requests, "server_requests_per_min": round(requests * 60 / wall, 2),
        # A WATCH is counted when it ends: the API server's own informers re-watch every 5-10 minutes at
        # random, so how many end inside a window is chance (the collector watches only CRDs).
        "server_requests_without_watches": requests - sum(n for key, n in by_kind.items() if key.startswith("WATCH")),
        "server_requests_by_verb_resource": by_kind,
        "collector_requests": None if own_before is None or own_after is None else int(own_after - own_before),
        "collector_requests_by_origin": by_origin(before, after),
        "collector_cpu_share": round(_share(cpu_after - cpu_before, wall), 5),
        "footprint_viewers": after.value(VIEWERS_SERIES),
        "footprint_viewer_cpu_share": round(after.total(VIEWER_SHARE_SERIES) or 0.0, 5),
        "footprint_viewer_cpu_share_phase": None if viewer_cpu_before is None or viewer_cpu_after is None
        else round(_share(viewer_cpu_after - viewer_cpu_before, wall), 5),
        "viewers_cpu_share": round(_share(viewers_after - viewers_before, wall), 5),
        "viewer_lines": sum(lines_after) - sum(lines_before),
        "viewer_exit_codes": viewers.exit_codes,
    }
    say(f"viewers: {count}: {requests} server requests, collector {record['collector_cpu_share'] * 100:.2f}% of a "
        f"core, footprint says viewers {record['footprint_viewer_cpu_share'] * 100:.3f}%")
    return record


def summarise(phases: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, bool | None]]:
    """Figures (each keyed by the viewer count) and the goals."""
    base = next((p for p in phases if p["viewers"] == 0), None)

    def keyed(function: Callable[[dict[str, Any]], Any], with_base: bool = True) -> dict[str, Any]:
        return {str(p["viewers"]): function(p) for p in phases if with_base or p["viewers"]}

    figures: dict[str, Any] = {
        "server_requests": keyed(lambda p: p["server_requests"]),
        "server_requests_per_min": keyed(lambda p: p["server_requests_per_min"]),
        "server_requests_vs_0": keyed(lambda p: round(p["server_requests"] / base["server_requests"], 3)
                                      if base and base["server_requests"] else None),
        "server_requests_without_watches": keyed(lambda p: p["server_requests_without_watches"]),
        "collector_requests": keyed(lambda p: p["collector_requests"]),
        "collector_cpu_pct": keyed(lambda p: round(p["collector_cpu_share"] * 100, 3)),
        "collector_cpu_pct_per_viewer": keyed(
            lambda p: round((p["collector_cpu_share"] - base["collector_cpu_share"]) * 100 / p["viewers"], 3)
            if base else None, with_base=False),
        "footprint_viewer_cpu_pct": keyed(lambda p: round(p["footprint_viewer_cpu_share"] * 100, 4)),
        "footprint_viewer_cpu_pct_per_viewer": keyed(
            lambda p: round(p["footprint_viewer_cpu_share"] * 100 / p["viewers"], 4), with_base=False),
        "viewers_own_cpu_pct": keyed(lambda p: round(p["viewers_cpu_share"] * 100, 3), with_base=False),
    }
    goals: dict[str, bool | None] = {}
    for phase in phases:
        count = phase["viewers"]
        if not count:
            continue
        ratio = figures["server_requests_vs_0"][str(count)]
        goals[f"server requests with {count} within {REQUESTS_TOLERANCE:.0%} of 0"] = (
            None if ratio is None else abs(ratio - 1) <= REQUESTS_TOLERANCE)
        quiet = base["server_requests_without_watches"] if base else None
        goals[f"server requests but WATCHes with {count} within {REQUESTS_TOLERANCE:.0%} of 0"] = (
            None if not quiet else abs(phase["server_requests_without_watches"] / quiet - 1) <= REQUESTS_TOLERANCE)
        per_viewer = figures["collector_cpu_pct_per_viewer"][str(count)]
        goals[f"collector CPU per viewer <= {CPU_PER_VIEWER_LIMIT:.1%} of a core ({count})"] = (
            None if per_viewer is None else per_viewer <= CPU_PER_VIEWER_LIMIT * 100)
    return figures, goals


def table(phases: list[dict[str, Any]], figures: dict[str, Any]) -> str:
    """The short table printed at the end."""
    rows = [("viewers", "server req", "req/min", "vs 0", "own req", "collector CPU", "per viewer",
             "footprint says", "viewers' CPU")]
    for p in phases:
        key = str(p["viewers"])
        per_viewer = figures["collector_cpu_pct_per_viewer"].get(key)
        ratio = figures["server_requests_vs_0"].get(key)
        rows.append((key, str(p["server_requests"]), f"{p['server_requests_per_min']:.1f}",
                     "-" if ratio is None else f"{ratio:.3f}", str(p["collector_requests"]),
                     f"{p['collector_cpu_share'] * 100:.2f}%", "-" if per_viewer is None else f"{per_viewer:.3f}%",
                     f"{p['footprint_viewer_cpu_share'] * 100:.3f}%", f"{p['viewers_cpu_share'] * 100:.2f}%"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)) for row in rows)


def write_token(path: Path) -> None:
    """A random token, mode 0600 (the collector and every viewer read it)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(secrets.token_urlsafe(32) + "\n")


def run(kubernetes: str | None, counts: list[int], phase_seconds: float, settle_seconds: float,
        warmup_seconds: float) -> tuple[str, dict[str, Any]]:
    """A fresh lab, the collector and the phases; (Kubernetes version, raw figures).  Everything is torn
    down on the way out."""
    binaries = ensure_binaries(kubernetes=kubernetes, progress=say)
    # The collector must outlive every phase (it stops by itself should the bench die without a word).
    budget = COLLECTOR_START_TIMEOUT + warmup_seconds + len(counts) * (VIEWERS_TIMEOUT * 2 + settle_seconds
                                                                      + phase_seconds + STOP_TIMEOUT)
    with tempfile.TemporaryDirectory(prefix="crdscope-bench-viewers-") as home:
        directory = Path(home)
        token_file = directory / "token"
        write_token(token_file)
        lab = Lab(directory / "lab")
        state = lab.up(binaries, say=say)
        try:
            wait_until_idle(state)
            counter = ServerCounter(state)
            collector = Collector(state, token_file, directory, max(1800.0, budget + 600))
            try:
                collector.start()
                ready = collector.wait_ready()
                say(f"viewers: collector ready after {ready:.1f} s (view {collector.view_url}, exporter port "
                    f"{collector.metrics_port}); warming up {warmup_seconds:.0f} s")
                time.sleep(warmup_seconds)  # deliberate: the collector's busy first minute is not measured
                collector.check_alive()
                phases = [measure_phase(count, collector, counter, directory, token_file, phase_seconds,
                                        settle_seconds) for count in counts]
            finally:
                collector.stop()
                counter.close()
            say(f"viewers: collector stopped (exit {collector.exit_code})")
        finally:
            lab.down()
    raw = {"phase_s": phase_seconds, "settle_s": settle_seconds, "warmup_s": warmup_seconds,
           "collector_ready_s": round(ready, 1), "collector_exit_code": collector.exit_code, "phases": phases}
    return state.kubernetes_version, raw


def _counts(text: str) -> list[int]:
    """``0,1,10`` -> [0, 1, 10]."""
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: viewer counts are whole numbers, e.g. 0,1,10") from None
    if not counts or any(count < 0 for count in counts):
        raise argparse.ArgumentTypeError(f"{text!r}: viewer counts are whole numbers, e.g. 0,1,10")
    return counts


def _short(value: Any) -> Any:
    """``{"0": 41, "1": 41}`` -> ``0: 41, 1: 41`` (a RESULTS.md cell)."""
    if isinstance(value, dict):
        return ", ".join(f"{k}: {v}" for k, v in value.items())
    return value


def main(argv: list[str] | None = None) -> int:
    """``python -m bench viewers [--phase-seconds S] [--settle-seconds S] [--viewers LIST] [--output DIR]``."""
    parser = argparse.ArgumentParser(prog="python -m bench viewers", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--phase-seconds", type=float, default=PHASE_SECONDS,
                        help=f"the measured window of each phase [default: {PHASE_SECONDS:.0f}]")
    parser.add_argument("--settle-seconds", type=float, default=SETTLE_SECONDS,
                        help=f"rest once the viewers are counted, before the window [default: {SETTLE_SECONDS:.0f}]")
    parser.add_argument("--warmup-seconds", type=float, default=WARMUP_SECONDS,
                        help=f"after the collector is up, before the first phase [default: {WARMUP_SECONDS:.0f}]")
    parser.add_argument("--viewers", type=_counts, default=list(VIEWER_COUNTS), metavar="LIST",
                        help="viewer counts, one phase each, in order [default: 0,1,10]")
    parser.add_argument("--kubernetes", default=None, metavar="MINOR", help="[default: the newest]")
    parser.add_argument("--output", type=Path, default=None, help="directory of the JSON result")
    parser.add_argument("--no-results-md", action="store_true", help="do not append to bench/RESULTS.md")
    args = parser.parse_args(argv)
    if args.phase_seconds <= 0 or args.settle_seconds < 0 or args.warmup_seconds < 0:
        parser.error("--phase-seconds must be positive, --settle-seconds and --warmup-seconds not negative")
    options = Options(append_results_md=not args.no_results_md)
    if args.output:
        options.output = args.output
    isolate_environment()
    version, raw = run(args.kubernetes, args.viewers, args.phase_seconds, args.settle_seconds, args.warmup_seconds)
    phases = raw["phases"]
    figures, goals = summarise(phases)
    notes = [f"phases of {args.phase_seconds:g} s after {args.settle_seconds:g} s of rest, in order "
             f"{','.join(map(str, args.viewers))}; server requests: the lab's apiserver_request_total (its own "
             "background and one read of the bench's in each phase alike); CPU: shares of one core; viewers are "
             "`crdscope attach --headless --no-record` processes"]
    result = Result("viewers", version, f"empty lab, viewers {','.join(map(str, args.viewers))}", figures, goals,
                    notes)
    # The JSON keeps every phase; RESULTS.md's row gets one short cell per figure.
    path = result.write(dataclasses.replace(options, append_results_md=False))
    document = json.loads(path.read_text())
    document["raw"] = raw
    path.write_text(json.dumps(document, indent=2, default=str))
    if options.append_results_md:
        append_row({**document, "figures": {k: _short(v) for k, v in figures.items()}})
    print(table(phases, figures), flush=True)
    print(json.dumps({"benchmark": "viewers", "kubernetes": version, "result": str(path), "goals": goals}),
          flush=True)
    return 0
