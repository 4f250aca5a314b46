"""Benchmark: what watching an install with crdscope costs the API server (the monitor must not change
what it measures).

``python -m bench footprint [--kubernetes 1.37,1.26] [--pairs N] [--size N] [--modes LIST] [--quick]``:
per run a fresh lab (``--kubernetes``: each listed minor in turn, default the newest), then the AWS
set (``../shared/crds/provider-aws.tar.xz``; ``--size N``: its first N CRDs) installed with
``crdscope load DIR`` at its default pace, under one watch mode:

- ``quiet``: nobody watching;
- ``headless``: ``crdscope watch --headless --record FILE`` (default settings, the lab's admin context);
- ``tui``: the full ``crdscope watch --record FILE`` in a real terminal (a tmux pane of 200x50);
- ``off:NAME``: the headless watch with the cadence ``NAME`` of ``[cadences]`` switched off, to
  attribute the cost probe by probe (``off:openapi_v2``, ``off:throttling``, ...);
- ``headless:VARIANT`` / ``tui:VARIANT``: the watch with a config.toml of its own: ``old-defaults``
  (the cadences before the footprint work, :data:`OLD_CADENCES`: ``openapi_v2 = 60.0`` ...) or one
  given with ``--config-variant VARIANT=TOML``.

A watch starts before the load (the load starts once its first samples are in and the API server is
idle again) and stops (SIGINT; the TUI: its ``q`` key) after the after-window: 60 s (``--quick``: 15 s)
after the load exited.  Modes alternate run by run (quiet, headless, tui, quiet, ...) for ``--pairs``
rounds; pair i is the i-th quiet run with the i-th run of a watched mode.

Per run: the install time (the load's process, which exits once every CRD is Established); the API
server's CPU seconds (``/proc/<pid>/stat``) during the install and during the after-window; its RSS
(``/proc/<pid>/status``) every second, at the end of the install and at the end of the after-window;
its MiB per CRD, fitted by the benchmark with crdscope's own estimator
(:class:`crdscope.probes.fit.LinearFit` of RSS over the CRDs stored, counted by a one-item LIST
every few seconds in every mode alike) and, in watched runs, the last ``health.mib_per_crd`` the watch
recorded; the monitor's own requests and bytes by path and by origin, from the last ``footprint``
sample of its recording (null when the recording has none), and over the after-window its requests
and bytes per second and its process's CPU seconds.

Goals (medians of pairwise ratios, per watched mode): install time <= 1.02x quiet; API server CPU
during the install <= 1.02x; RSS at the end of the install and at the end of the after-window
within the quiet runs' own spread (min..max; needs two quiet runs); the MiB per CRD crdscope reported
within 5% of the quiet run's own fit.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Collection, Iterator

import httpx

from crdscope.lab.binaries import ensure_binaries
from crdscope.lab.controlplane import Lab, LabState, admin_tls
from crdscope.probes.errors import CrdscopeError
from crdscope.probes.fit import LinearFit
from crdscope.probes.settings import Cadences, load_settings
from crdscope.session.recorder import part_path

from .common import (BenchError, Options, Result, append_row, isolate_environment, median_at_most,
                     process_cpu_seconds, ratios, run_timed, say, size_label, stats)
from .discovery import crdscope_command
from .labs import memory_for, wait_for_memory, wait_until_idle
from .overhead import memory_bytes
from .versions import SET, _crd_count, first_crds, unpack_whole_set

DEFAULT_MODES = ("quiet", "headless", "tui")
DEFAULT_PAIRS = 3
AFTER_SECONDS = 60.0
QUICK_AFTER_SECONDS = 15.0
QUICK_SIZE = 150
#: The API server's RSS is read this often from /proc (free: no request).
RSS_SECONDS = 1.0
#: The CRDs stored are counted this often (one ``limit=1`` LIST, the same in every mode): the
#: benchmark's own requests stay well under the monitor's.
COUNT_SECONDS = 5.0
#: Probes whose first sample means the watch has sent its start-up requests (first discovery, the
#: CRD list, the OpenAPI index, the first /metrics scrape).
FIRST_SAMPLES = ("version", "inventory", "discovery", "openapi", "health")
WATCH_START_TIMEOUT_SECONDS = 300.0
#: After the watch's start-up burst the API server settles again before the load starts.
WATCH_IDLE_TIMEOUT_SECONDS = 180.0
STOP_TIMEOUT_SECONDS = 60.0
#: How long the steady window waits for the walk that follows a settled install.
WALK_WAIT_SECONDS = 120.0
LOAD_TIMEOUT_SECONDS = 3 * 3600.0
TMUX_SIZE = (200, 50)
TMUX_SESSION = "footprint"
#: ``off:NAME`` sets cadence NAME to this: a cadence of 0 means "again at once" for most probes (the
#: scheduler re-arms a probe when its run ends), so the probe runs once as the watch starts, before
#: the load, and never again.  Cadences in :data:`ZERO_TURNS_OFF` read 0 as off and get 0.
NEVER_SECONDS = 1e9
ZERO_TURNS_OFF = ("openapi_v2",)
#: ``/openapi/v2`` is fetched from the openapi probe's runs: switching the probe off switches it off too.
ALSO_OFF = {"openapi": ("openapi_v2",)}
#: The cadences before the footprint work (crdscope 2026-12-04, b4b0197): /openapi/v2 fetched at most
#: once a minute after a CRD change, canaries every 15 s, no slower idle cadence for discovery and
#: the OpenAPI index (an idle cadence equal to the busy one).
#: The cadences of b4b0197 (before issue 24): v2 once a minute after a change, latency every 15 s,
#: no idle cadences (each ``*_idle`` equal to the busy one).  What cadences cannot bring back: the
#: walk's waiting for an install to settle, the v3 document budget, 30 s Lease reads, 2 s heartbeats.
OLD_CADENCES = {"openapi_v2": 60.0, "latency": 15.0, "latency_idle": 15.0, "discovery_idle": 10.0,
                "openapi_idle": 10.0, "throttling_idle": 10.0, "health_idle": 10.0, "version_idle": 30.0}


def old_defaults() -> str:
    """The config.toml of ``headless:old-defaults``: :data:`OLD_CADENCES`, those this crdscope knows
    (a cadence added since has no old value; one removed since cannot be set)."""
    known = {f.name for f in dataclasses.fields(Cadences)}
    return "[cadences]\n" + "".join(f"{name} = {value}\n" for name, value in OLD_CADENCES.items() if name in known)


#: Config variants every run knows (``headless:NAME``); ``--config-variant NAME=TOML`` adds more.
VARIANTS = {"old-defaults": old_defaults()}
#: Figures of the JSON result that are too big for a row of RESULTS.md.
RAW_FIGURES = ("runs", "modes")
MIB = 2**20


@dataclass(frozen=True)
class Mode:
    """How one run is watched: ``watch`` is "" (nobody), "headless" or "tui"; ``config`` a config.toml."""

    name: str
    watch: str = ""
    config: str = ""


def off_config(cadence: str) -> str:
    """The config.toml of ``off:CADENCE``."""
    names = (cadence, *ALSO_OFF.get(cadence, ()))
    lines = [f"{name} = {0.0 if name in ZERO_TURNS_OFF else NEVER_SECONDS}" for name in names]
    return "[cadences]\n" + "\n".join(lines) + "\n"


def check_config(text: str, what: str) -> None:
    """Fail early (before any lab starts) on a config.toml crdscope would refuse."""
    with tempfile.TemporaryDirectory(prefix="crdscope-bench-config-") as directory:
        path = Path(directory) / "config.toml"
        path.write_text(text)
        try:
            load_settings(path)
        except CrdscopeError as exc:
            raise BenchError(f"{what}: {exc}") from None


def parse_modes(text: str, variants: dict[str, str]) -> tuple[Mode, ...]:
    """``quiet,headless,tui,off:openapi_v2,headless:old-defaults`` -> modes (quiet must be one)."""
    cadences = [f.name for f in dataclasses.fields(Cadences)]
    modes = []
    for name in (part.strip() for part in text.split(",")):
        if not name:
            continue
        watch, _, detail = name.partition(":")
        if name == "quiet":
            modes.append(Mode(name))
        elif watch == "off" and detail:
            if detail not in cadences:
                raise BenchError(f"{name}: no cadence {detail!r} (one of: {', '.join(cadences)})")
            modes.append(Mode(name, "headless", off_config(detail)))
        elif watch in ("headless", "tui") and not detail:
            modes.append(Mode(name, watch))
        elif watch in ("headless", "tui") and detail in variants:
            modes.append(Mode(name, watch, variants[detail]))
        else:
            raise BenchError(f"unknown mode {name!r}: quiet, headless, tui, off:CADENCE, headless:VARIANT or "
                             f"tui:VARIANT (variants: {', '.join(variants)})")
    if "quiet" not in [mode.name for mode in modes]:
        raise BenchError("the modes must include quiet (every figure is a ratio to it)")
    if len({mode.name for mode in modes}) != len(modes):
        raise BenchError(f"a mode is named twice in {text!r}")
    for mode in modes:
        if mode.config:
            check_config(mode.config, mode.name)
    return tuple(modes)


def parse_variant(text: str) -> tuple[str, str]:
    """``NAME=TOML`` (``\\n`` for newlines) or ``NAME=@FILE`` -> (name, config.toml text)."""
    name, equals, value = text.partition("=")
    if not equals or not name.strip() or ":" in name or "," in name:
        raise BenchError(f"--config-variant {text!r}: NAME=TOML (or NAME=@FILE) expected")
    body = Path(value[1:]).read_text() if value.startswith("@") else value.replace("\\n", "\n")
    return name.strip(), body if body.endswith("\n") else body + "\n"


# --------------------------------------------------------------------------- measuring the server


@dataclass
class ServerSampler:
    """The API server's RSS every second and, every few seconds, the CRDs stored with the RSS
    beside them (the points of the benchmark's own MiB-per-CRD fit); in threads of their own."""

    state: LabState
    pid: int
    #: (Unix seconds, RSS bytes)
    rss: list[tuple[float, int]] = field(default_factory=list)
    #: (Unix seconds, CRDs stored, RSS bytes)
    points: list[tuple[float, float, int]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> None:
        """Start sampling; returns once the first CRD count is in (the fit's point before the load)."""
        for target in (self._rss, self._counts):
            thread = threading.Thread(target=target, daemon=True)
            thread.start()
            self.threads.append(thread)
        deadline = time.monotonic() + 60
        while not self.points:
            if time.monotonic() > deadline:
                raise BenchError("the API server did not answer a one-item CRD list in 60 s")
            time.sleep(0.1)

    def finish(self) -> None:
        """Stop sampling (safe to call twice)."""
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=60)

    def _rss(self) -> None:
        while True:
            rss = rss_bytes(self.pid)
            if rss:
                self.rss.append((time.time(), rss))
            if self.stop.wait(RSS_SECONDS):  # a cadence, not a wait for a condition
                return

    def _counts(self) -> None:
        with httpx.Client(base_url=self.state.server, verify=admin_tls(self.state.pki_dir), timeout=30) as client:
            while True:
                crds = _crd_count(client)
                rss = rss_bytes(self.pid)
                if crds is not None and rss:
                    self.points.append((time.time(), crds, rss))
                if self.stop.wait(COUNT_SECONDS):  # a cadence, not a wait for a condition
                    return

    def mib_per_crd(self) -> tuple[float | None, float | None]:
        """(slope MiB per CRD, R²) of RSS over the CRDs stored: crdscope's estimator (one mean RSS per
        distinct count), so that the figure it reports and this one differ only in their points."""
        fit = LinearFit()
        for _, crds, rss in self.points:
            fit.add(crds, rss)
        result = fit.result()
        return (result.slope / MIB, result.r2) if result else (None, None)

    def series(self, since: float) -> list[list[float]]:
        """The RSS samples from ``since`` on: [seconds after it, MiB]."""
        return [[round(at - since, 1), round(rss / MIB)] for at, rss in self.rss if at >= since]


def rss_bytes(pid: int) -> int:
    """VmRSS of a process (0 when it is gone)."""
    try:
        return memory_bytes(pid)[0]
    except (OSError, ValueError):
        return 0


def cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU seconds of a process so far (None when it is gone)."""
    if pid is None:
        return None
    try:
        return process_cpu_seconds(pid)
    except (OSError, ValueError, IndexError):
        return None


def _difference(after: float | None, before: float | None) -> float | None:
    return round(after - before, 3) if after is not None and before is not None else None


# --------------------------------------------------------------------------- the watch


def recorded_samples(first: Path, probes: Collection[str] | None = None) -> list[dict[str, Any]]:
    """The sample records (``{"type", "probe", "data"}``) of a recording and its later parts, oldest
    first, only those of ``probes`` if given; a torn line (a watch stopped mid-write) is left out."""
    found: list[dict[str, Any]] = []
    number, path = 1, first
    while path.exists():
        with open(path, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if (isinstance(record, dict) and record.get("type") == "sample"
                        and (probes is None or record.get("probe") in probes)):
                    found.append(record)
        number += 1
        path = part_path(first, number)
    return found


class Watch:
    """``crdscope watch`` on a lab, recording to a file: headless, or the TUI in a tmux pane.

    It runs as a person's would: the lab's admin context, a config, data and state directory of its
    own (``config.toml`` only for modes that set one), and the lab's home, so that it knows it
    watches crdscope's lab as ``crdscope watch`` beside ``crdscope lab up`` does.
    """

    def __init__(self, mode: Mode, state: LabState, lab_home: Path, directory: Path) -> None:
        self.mode = mode
        self.directory = directory
        self.recording = directory / "recording.jsonl"
        self.stdout = directory / "stdout.txt"
        self.stderr = directory / "stderr.txt"
        self.socket = directory / "tmux.sock"
        self.env = {"XDG_CONFIG_HOME": str(directory / "config"), "XDG_DATA_HOME": str(directory / "data"),
                    "XDG_STATE_HOME": str(directory / "state"), "CRDSCOPE_LAB_HOME": str(lab_home)}
        self.argv = [*crdscope_command(), "watch", *(["--headless"] if mode.watch == "headless" else []),
                     "--record", str(self.recording), "--kubeconfig", state.kubeconfig,
                     "--context", state.admin_context]
        self.process: subprocess.Popen[bytes] | None = None
        self.pid: int | None = None
        self.exit_code: int | None = None
        #: How the watch ended: "SIGINT" (headless) or "q" (the TUI) when it stopped as asked.
        self.stopped_by = ""

    def start(self) -> None:
        """Start the watch (its config.toml first, when the mode has one)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.mode.config:
            config = self.directory / "config" / "crdscope" / "config.toml"
            config.parent.mkdir(parents=True)
            config.write_text(self.mode.config)
        env = {**os.environ, **self.env}
        if self.mode.watch == "headless":
            with open(self.stdout, "wb") as out, open(self.stderr, "wb") as err:
                self.process = subprocess.Popen(self.argv, stdout=out, stderr=err, env=env)
            self.pid = self.process.pid
            return
        # The TUI draws on a terminal: a tmux pane on a server of its own (its own socket, so that no
        # other tmux is touched); `exec` makes the pane's process crdscope itself, whose pid is read.
        width, height = TMUX_SIZE
        done = subprocess.run(
            ["tmux", "-S", str(self.socket), "new-session", "-d", "-x", str(width), "-y", str(height),
             "-s", TMUX_SESSION, "-P", "-F", "#{pane_pid}",
             *(f"-e{name}={value}" for name, value in self.env.items()), "exec " + shlex.join(self.argv)],
            capture_output=True, text=True, env=env, timeout=60)
        if done.returncode != 0:
            raise BenchError(f"tmux new-session failed: {done.stderr.strip() or done.returncode}")
        self.pid = int(done.stdout.strip())

    def alive(self) -> bool:
        """True while the watch's process runs."""
        if self.process is not None:
            return self.process.poll() is None
        if self.pid is None:
            return False
        try:  # the pane's process is tmux's child, not ours: a zombie is gone too
            return Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except (OSError, IndexError):
            return False

    def check_alive(self) -> None:
        """A :class:`BenchError` with its last words when the watch is gone."""
        if not self.alive():
            raise BenchError(f"crdscope watch ({self.mode.name}) exited early: {self.last_words()}")

    def last_words(self) -> str:
        """The last line the watch wrote to stderr or to its log (the TUI's stderr is its screen)."""
        for path in (self.stderr, self.directory / "state" / "crdscope" / "crdscope.log"):
            with contextlib.suppress(OSError):
                lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
                if lines:
                    return lines[-1][:300]
        return "no output"

    def wait_ready(self) -> float:
        """Wait until the recording holds a sample of each of :data:`FIRST_SAMPLES`; the seconds waited."""
        started = time.monotonic()
        while True:
            self.check_alive()
            seen = {record["probe"] for record in recorded_samples(self.recording, FIRST_SAMPLES)}
            if seen >= set(FIRST_SAMPLES):
                return time.monotonic() - started
            if time.monotonic() - started > WATCH_START_TIMEOUT_SECONDS:
                missing = ", ".join(sorted(set(FIRST_SAMPLES) - seen))
                raise BenchError(f"crdscope watch ({self.mode.name}) had no {missing} sample after "
                                 f"{WATCH_START_TIMEOUT_SECONDS:.0f}s")
            time.sleep(0.5)

    def cpu_seconds(self) -> float | None:
        """The watch process's CPU seconds so far (None once it is gone)."""
        return cpu_seconds(self.pid) if self.alive() else None

    def stop(self) -> None:
        """Stop the watch as a person would (Ctrl-C; the TUI's ``q``), then harder; never leaves a process
        or a tmux server behind.  Safe to call twice."""
        if self.process is not None:
            if self.process.poll() is None:
                self.process.send_signal(signal.SIGINT)
                self.stopped_by = "SIGINT"
                try:
                    self.exit_code = self.process.wait(timeout=STOP_TIMEOUT_SECONDS)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.stopped_by = "SIGKILL"
                    self.exit_code = self.process.wait()
            else:
                self.exit_code = self.process.returncode
            return
        if self.pid is None:
            if self.socket.exists():  # a tmux server whose session never told its pane's pid
                self._tmux("kill-server")
            return
        try:
            if self.alive():
                self._tmux("send-keys", "-t", TMUX_SESSION, "q")
                self.stopped_by = "q"
                if not self._wait_gone(STOP_TIMEOUT_SECONDS):
                    self.stopped_by = "SIGTERM"
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(self.pid, signal.SIGTERM)
                    if not self._wait_gone(10):
                        self.stopped_by = "SIGKILL"
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(self.pid, signal.SIGKILL)
        finally:
            self._tmux("kill-server")  # no-op once the pane's exit ended the session and the server
            self.pid = None

    def _wait_gone(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.alive():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)
        return True

    def _tmux(self, *args: str) -> None:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run(["tmux", "-S", str(self.socket), *args], capture_output=True, timeout=30)

    def keep(self, target: Path, label: str) -> None:
        """Copy the recording (all its parts) to ``target`` as ``<label>*.jsonl``."""
        target.mkdir(parents=True, exist_ok=True)
        number, path = 1, self.recording
        while path.exists():
            shutil.copy(path, target / f"{label}{'' if number == 1 else f'.part{number}'}.jsonl")
            number += 1
            path = part_path(self.recording, number)


def recording_figures(recording: Path, load_started: float, load_ended: float) -> dict[str, Any]:
    """What the watch recorded: its last ``footprint`` sample (the contract of probes/footprint.py),
    its requests and bytes during the install (between the last footprint sample before the load and
    the first after it: the probe's cadence, 5 s, is the resolution) and per second over the
    after-window, and the last MiB per CRD it reported."""
    records = recorded_samples(recording, ("footprint", "health"))
    figures: dict[str, Any] = {}
    health = [r["data"] for r in records if r["probe"] == "health" and r["data"].get("mib_per_crd") is not None]
    if health:
        last = health[-1]
        figures.update(mib_per_crd_reported=last["mib_per_crd"], reported_r2=last.get("r2"),
                       reported_crds=last.get("crds"), reported_fit_points=last.get("fit_points"))
    else:
        figures["mib_per_crd_reported"] = None
    prints = [r["data"] for r in records if r["probe"] == "footprint" and not r["data"].get("error")]
    if not prints:
        figures["footprint"] = None
        figures["footprint_note"] = "the recording holds no footprint sample"
        return figures
    last = prints[-1]
    # The whole sample (requests_total, bytes_total, per second, by_path, by_origin, held_back, openapi_v2 ...).
    figures["footprint"] = {key: value for key, value in last.items() if key not in ("timestamp", "error")}
    before = [p for p in prints if p.get("timestamp", 0) <= load_started]
    after = [p for p in prints if p.get("timestamp", 0) >= load_ended]
    if before and after:
        for key, name in (("requests_total", "install_requests"), ("bytes_total", "install_bytes")):
            if isinstance(after[0].get(key), int | float) and isinstance(before[-1].get(key), int | float):
                figures[name] = after[0][key] - before[-1][key]
    # Over the after-window: the first sample at or after the load's exit and the last one.
    if len(after) >= 2 and after[-1]["timestamp"] > after[0]["timestamp"]:
        span = after[-1]["timestamp"] - after[0]["timestamp"]
        figures["after_footprint_span_s"] = round(span, 1)
        for key, name in (("requests_total", "after_requests_per_s"), ("bytes_total", "after_bytes_per_s")):
            if isinstance(after[-1].get(key), int | float) and isinstance(after[0].get(key), int | float):
                figures[name] = round((after[-1][key] - after[0][key]) / span, 3)
    return figures


# --------------------------------------------------------------------------- one run


@dataclass(frozen=True)
class Plan:
    """What every run of one Kubernetes version does."""

    minor: str | None
    directory: Path
    total: int
    modes: tuple[Mode, ...]
    pairs: int
    after_seconds: float
    keep_recordings: Path | None = None
    #: Headless runs watch this much longer after the after-window: the monitor's steady state on a
    #: cluster holding the whole set (its CPU, resident memory, requests and bytes per second).
    steady_seconds: float = 0.0


def load_argv(directory: Path, state: LabState) -> list[str]:
    """``crdscope load DIR`` at its default pace on the lab's admin context (a new run: nothing resumed)."""
    return [*crdscope_command(), "load", str(directory), "--json", "--new-run", "--kubeconfig", state.kubeconfig,
            "--context", state.admin_context]


def measure_run(plan: Plan, mode: Mode, pair: int, binaries: Any) -> dict[str, Any]:
    """One fresh lab, installed under ``mode``; the run's raw figures (``failed`` says why a run is
    not comparable)."""
    wait_for_memory(memory_for(plan.total, plan.total))
    figures: dict[str, Any] = {"mode": mode.name, "pair": pair, "crds": plan.total, "failed": None}
    with tempfile.TemporaryDirectory(prefix="crdscope-bench-footprint-") as home:
        lab = Lab(Path(home) / "lab")
        state = lab.up(binaries, say=say)
        watch: Watch | None = None
        sampler: ServerSampler | None = None
        try:
            pid = state.apiservers()[0].pid
            figures["kubernetes"] = state.kubernetes_version
            wait_until_idle(state)
            before = cpu_seconds(pid)
            if mode.watch:
                watch = Watch(mode, state, lab.home, Path(home) / "watch")
                watch.start()
                figures["watch_ready_s"] = round(watch.wait_ready(), 1)
            # The watch's start-up requests are not the install's: the load starts once they settled.  A
            # quiet run waits the same way, so that every load starts on an API server of about one age.
            wait_until_idle(state, WATCH_IDLE_TIMEOUT_SECONDS)
            if mode.watch:
                figures["apiserver_cpu_watch_start_s"] = _difference(cpu_seconds(pid), before)
            sampler = ServerSampler(state, pid)
            sampler.start()
            cpu_start, watch_start = cpu_seconds(pid), watch.cpu_seconds() if watch else None
            load_started = time.time()
            seconds, done = run_timed(load_argv(plan.directory, state), timeout=LOAD_TIMEOUT_SECONDS,
                                      env={"XDG_STATE_HOME": str(Path(home) / "load-state")}, check=False)
            load_ended = time.time()
            cpu_end, rss_end = cpu_seconds(pid), rss_bytes(pid)
            watch_end = watch.cpu_seconds() if watch else None
            if watch is not None and not watch.alive():
                figures["failed"] = f"crdscope watch ({mode.name}) exited during the install: {watch.last_words()}"
            figures["install_s"] = round(seconds, 2)
            figures["load"] = _load_summary(done)
            if figures["failed"] is None and (done.returncode != 0
                                              or figures["load"].get("established") != plan.total):
                figures["failed"] = (f"crdscope load exited {done.returncode} with "
                                     f"{figures['load'].get('established')} of {plan.total} CRDs Established")
                say(f"footprint: {mode.name}: FAILED: {figures['failed']}")
            time.sleep(plan.after_seconds)  # deliberate: the 60 s after-window is measured
            cpu_after, rss_after = cpu_seconds(pid), rss_bytes(pid)
            watch_after = watch.cpu_seconds() if watch else None
            sampler.finish()
            own, own_r2 = sampler.mib_per_crd()
            figures.update(
                apiserver_cpu_install_s=_difference(cpu_end, cpu_start),
                apiserver_cpu_after_s=_difference(cpu_after, cpu_end),
                apiserver_rss_end_mib=round(rss_end / MIB, 1) if rss_end else None,
                apiserver_rss_after_mib=round(rss_after / MIB, 1) if rss_after else None,
                apiserver_rss_peak_install_mib=round(max(
                    (rss for at, rss in sampler.rss if load_started <= at <= load_ended), default=0) / MIB, 1) or None,
                mib_per_crd_own=round(own, 3) if own is not None else None,
                own_r2=round(own_r2, 4) if own_r2 is not None else None,
                own_fit_points=len(sampler.points),
                rss_mib_every_second=sampler.series(load_started),
            )
            if watch is not None and mode.watch == "headless" and plan.steady_seconds > 0:
                figures.update(steady_figures(watch, plan.steady_seconds))
            if watch is not None:
                figures.update(watch_cpu_install_s=_difference(watch_end, watch_start),
                               watch_cpu_after_s=_difference(watch_after, watch_end))
                watch.stop()
                figures["watch_exit"] = watch.exit_code  # None for the TUI (tmux's child, not ours)
                figures["watch_stopped_by"] = watch.stopped_by
                figures.update(recording_figures(watch.recording, load_started, load_ended))
                if plan.keep_recordings is not None:
                    watch.keep(plan.keep_recordings, f"{state.kubernetes_version}-{_slug(mode.name)}-pair{pair}")
        finally:
            if sampler is not None:
                sampler.finish()
            if watch is not None:
                watch.stop()
            lab.down()
    say(f"footprint: {mode.name} pair {pair}: install {figures.get('install_s')}s, API server CPU "
        f"{figures.get('apiserver_cpu_install_s')}s + {figures.get('apiserver_cpu_after_s')}s after, RSS "
        f"{figures.get('apiserver_rss_end_mib')} -> {figures.get('apiserver_rss_after_mib')} MiB, MiB/CRD own "
        f"{figures.get('mib_per_crd_own')}" + (f", reported {figures.get('mib_per_crd_reported')}, monitor "
                                               f"requests {(figures.get('footprint') or {}).get('requests_total')}"
                                               if mode.watch else ""))
    return figures


def steady_figures(watch: Watch, seconds: float) -> dict[str, Any]:
    """The monitor at rest on the loaded cluster, over ``seconds`` after the after-window: its CPU
    (share of a core), its resident memory at the end, and its requests and bytes per second (the
    first and last footprint samples of the window)."""
    # The install settled at the end of the after-window: the legacy walk that follows a settled
    # change (once, 2+N requests) is not the steady state; the window starts once it is done.
    walks = [r["data"].get("legacy_walks", 0) for r in recorded_samples(watch.recording, ("footprint",))]
    deadline = time.monotonic() + WALK_WAIT_SECONDS
    while time.monotonic() < deadline:
        latest = [r["data"].get("legacy_walks", 0) for r in recorded_samples(watch.recording, ("footprint",))]
        if latest and walks and latest[-1] > walks[-1]:
            break
        time.sleep(1.0)
    started, cpu_before = time.time(), watch.cpu_seconds()
    time.sleep(seconds)  # deliberate: the steady state is measured over this window
    elapsed = time.time() - started
    cpu_after = watch.cpu_seconds()
    figures: dict[str, Any] = {"steady_s": round(elapsed, 1)}
    if cpu_before is not None and cpu_after is not None:
        figures["steady_cpu_pct_of_core"] = round((cpu_after - cpu_before) / elapsed * 100, 2)
    if watch.pid is not None:
        figures["steady_rss_mb"] = round(rss_bytes(watch.pid) / 1e6, 1)
    prints = [r["data"] for r in recorded_samples(watch.recording, ("footprint",))
              if r["data"].get("timestamp", 0) >= started and not r["data"].get("error")]
    if len(prints) >= 2 and prints[-1]["timestamp"] > prints[0]["timestamp"]:
        span = prints[-1]["timestamp"] - prints[0]["timestamp"]
        figures["steady_requests_per_s"] = round((prints[-1]["requests_total"] - prints[0]["requests_total"]) / span, 3)
        figures["steady_kb_per_s"] = round((prints[-1]["bytes_total"] - prints[0]["bytes_total"]) / span / 1e3, 2)
        first = prints[0]["by_origin"]
        figures["steady_by_origin_per_min"] = {
            origin: round((tally["requests"] - first.get(origin, {}).get("requests", 0)) / span * 60, 2)
            for origin, tally in prints[-1]["by_origin"].items()}
    return figures


def _load_summary(done: subprocess.CompletedProcess) -> dict[str, Any]:
    """The figures of the load's ``--json`` summary (or why there is none)."""
    try:
        summary = json.loads(done.stdout)
    except ValueError:
        lines = done.stderr.strip().splitlines() or ["no output"]
        return {"established": None, "error": lines[-1]}
    return {k: summary.get(k) for k in ("elapsed_seconds", "established", "failed", "retries_429", "retries_5xx",
                                         "limiter_waited_seconds")}


def _slug(name: str) -> str:
    return name.replace(":", "-").replace("/", "-")


def alternate_runs(plan: Plan) -> Iterator[dict[str, Any]]:
    """Every run of the plan, modes alternating within each pair."""
    binaries = ensure_binaries(kubernetes=plan.minor, progress=say)
    for pair in range(1, plan.pairs + 1):
        for mode in plan.modes:
            say(f"footprint: Kubernetes {plan.minor or 'newest'}, {plan.total} CRDs, pair {pair}/{plan.pairs}, "
                f"{mode.name}")
            try:
                yield measure_run(plan, mode, pair, binaries)
            except BenchError as exc:  # one run that could not be measured; the others still are
                say(f"footprint: {mode.name} pair {pair}: FAILED: {exc}")
                yield {"mode": mode.name, "pair": pair, "crds": plan.total, "failed": str(exc)}


# --------------------------------------------------------------------------- figures


def series(runs: list[dict[str, Any]], mode: str, key: str) -> list[float | None]:
    """A figure of every run of ``mode``, in order (None for a failed run or an absent figure)."""
    return [None if run["failed"] else run.get(key) for run in runs if run["mode"] == mode]


def footprint_series(runs: list[dict[str, Any]], mode: str, key: str, scale: float = 1.0) -> list[float | None]:
    """A figure of the runs' last footprint sample (None where a recording had none)."""
    values: list[float | None] = []
    for run in runs:
        if run["mode"] == mode:
            value = (run.get("footprint") or {}).get(key)
            values.append(value / scale if isinstance(value, int | float) and not run["failed"] else None)
    return values


def within_spread(values: list[float | None], reference: list[float | None]) -> bool | None:
    """The median of ``values`` within min..max of ``reference`` (None: fewer than two references)."""
    measured = [v for v in values if v is not None]
    spread = [v for v in reference if v is not None]
    if len(spread) < 2 or not measured:
        return None
    return min(spread) <= statistics.median(measured) <= max(spread)


def summarise(plan: Plan, runs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, bool | None], list[str]]:
    """(figures, goals, notes) of one Kubernetes version's runs."""
    figures: dict[str, Any] = {}
    goals: dict[str, bool | None] = {}
    notes: list[str] = []

    def quiet(key: str) -> list[float | None]:
        return series(runs, "quiet", key)

    for key, name in (("install_s", "install_s"), ("apiserver_cpu_install_s", "cpu_install_s"),
                      ("apiserver_cpu_after_s", "cpu_after_s"), ("apiserver_rss_end_mib", "rss_end_mib"),
                      ("apiserver_rss_after_mib", "rss_after_mib"), ("mib_per_crd_own", "mib_per_crd_own")):
        figures[f"quiet_{name}"] = stats(quiet(key))
    after = f"{plan.after_seconds:.0f} s later"
    for mode in (m for m in plan.modes if m.watch):
        m = mode.name

        def watched(key: str, mode_name: str = m) -> list[float | None]:
            return series(runs, mode_name, key)

        install = ratios(watched("install_s"), quiet("install_s"))
        cpu = ratios(watched("apiserver_cpu_install_s"), quiet("apiserver_cpu_install_s"))
        reported_vs_quiet = ratios(watched("mib_per_crd_reported"), quiet("mib_per_crd_own"))
        figures.update({
            f"{m}_install_x": stats(install),
            f"{m}_cpu_install_x": stats(cpu),
            f"{m}_cpu_after_x": stats(ratios(watched("apiserver_cpu_after_s"), quiet("apiserver_cpu_after_s"))),
            f"{m}_rss_end_x": stats(ratios(watched("apiserver_rss_end_mib"), quiet("apiserver_rss_end_mib"))),
            f"{m}_rss_after_x": stats(ratios(watched("apiserver_rss_after_mib"), quiet("apiserver_rss_after_mib"))),
            f"{m}_rss_end_mib": stats(watched("apiserver_rss_end_mib")),
            f"{m}_rss_after_mib": stats(watched("apiserver_rss_after_mib")),
            f"{m}_cpu_watch_start_s": stats(watched("apiserver_cpu_watch_start_s")),
            f"{m}_mib_per_crd_reported": stats(watched("mib_per_crd_reported")),
            f"{m}_mib_per_crd_own": stats(watched("mib_per_crd_own")),
            f"{m}_reported_vs_quiet_own": stats(reported_vs_quiet),
            f"{m}_reported_vs_own": stats(ratios(watched("mib_per_crd_reported"), watched("mib_per_crd_own"))),
            f"{m}_requests": stats(footprint_series(runs, m, "requests_total")),
            f"{m}_mb": stats(footprint_series(runs, m, "bytes_total", 1e6)),
            f"{m}_install_requests": stats(watched("install_requests")),
            f"{m}_install_mb": stats([v / 1e6 if v is not None else None for v in watched("install_bytes")]),
            f"{m}_after_req_per_s": stats(watched("after_requests_per_s")),
            f"{m}_after_kb_per_s": stats([v / 1e3 if v is not None else None
                                          for v in watched("after_bytes_per_s")]),
            f"{m}_watch_cpu_install_s": stats(watched("watch_cpu_install_s")),
            f"{m}_watch_cpu_after_s": stats(watched("watch_cpu_after_s")),
            f"{m}_steady_cpu_pct_of_core": stats(watched("steady_cpu_pct_of_core")),
            f"{m}_steady_rss_mb": stats(watched("steady_rss_mb")),
            f"{m}_steady_requests_per_s": stats(watched("steady_requests_per_s")),
            f"{m}_steady_kb_per_s": stats(watched("steady_kb_per_s")),
        })
        if any(v is not None for v in watched("steady_requests_per_s")):
            steady = [v for v in watched("steady_requests_per_s") if v is not None]
            cpu_share = [v for v in watched("steady_cpu_pct_of_core") if v is not None]
            rss = [v for v in watched("steady_rss_mb") if v is not None]
            goals[f"{m}: steady < 0.5 requests/s"] = statistics.median(steady) < 0.5
            goals[f"{m}: steady < 1% of a core"] = statistics.median(cpu_share) < 1.0 if cpu_share else None
            goals[f"{m}: steady RSS < 110 MB"] = statistics.median(rss) < 110 if rss else None
        goals[f"{m}: install <= 1.02x quiet"] = median_at_most(install, 1.02)
        goals[f"{m}: API server CPU during install <= 1.02x"] = median_at_most(cpu, 1.02)
        goals[f"{m}: RSS at end within quiet spread"] = within_spread(
            watched("apiserver_rss_end_mib"), quiet("apiserver_rss_end_mib"))
        goals[f"{m}: RSS {after} within quiet spread"] = within_spread(
            watched("apiserver_rss_after_mib"), quiet("apiserver_rss_after_mib"))
        goals[f"{m}: MiB/CRD reported within 5% of quiet"] = median_at_most(
            [abs(r - 1) for r in reported_vs_quiet], 0.05)
        if all(v is None for v in footprint_series(runs, m, "requests_total")):
            notes.append(f"{m}: no footprint sample in any recording (probes/footprint.py not there yet?): "
                         "the monitor's requests and bytes are null")
    if len([v for v in quiet("apiserver_rss_end_mib") if v is not None]) < 2:
        notes.append("fewer than two quiet runs: the RSS goals (within the quiet runs' spread) are not judged")
    for run in runs:
        if run["failed"]:
            notes.append(f"{run['mode']} pair {run['pair']} failed: {run['failed']}")
    figures["after_s"] = plan.after_seconds
    figures["pairs"] = plan.pairs
    figures["modes"] = {mode.name: mode.config or ("" if mode.watch else "nobody watching") for mode in plan.modes}
    figures["runs"] = runs
    return figures, goals, notes


#: (label, figure per run, how it prints) of the table printed at the end.
TABLE_ROWS = (
    ("install (s)", "install_s", "{:.1f}"),
    ("API server CPU, install (s)", "apiserver_cpu_install_s", "{:.1f}"),
    ("API server CPU, after-window (s)", "apiserver_cpu_after_s", "{:.1f}"),
    ("API server CPU, watch start-up (s)", "apiserver_cpu_watch_start_s", "{:.1f}"),
    ("API server RSS, end of install (MiB)", "apiserver_rss_end_mib", "{:.0f}"),
    ("API server RSS, end of after-window (MiB)", "apiserver_rss_after_mib", "{:.0f}"),
    ("MiB/CRD, benchmark's own fit", "mib_per_crd_own", "{:.2f}"),
    ("MiB/CRD, crdscope reported", "mib_per_crd_reported", "{:.2f}"),
    ("monitor requests (whole run)", ("footprint", "requests_total"), "{:.0f}"),
    ("monitor MB of answers (whole run)", ("footprint", "bytes_total"), "{:.2f}"),
    ("monitor requests, install", "install_requests", "{:.0f}"),
    ("monitor MB of answers, install", "install_bytes", "{:.2f}"),
    ("monitor requests/s, after-window", "after_requests_per_s", "{:.2f}"),
    ("monitor KB/s of answers, after-window", "after_bytes_per_s", "{:.1f}"),
    ("watch CPU, install (s)", "watch_cpu_install_s", "{:.1f}"),
    ("watch CPU, after-window (s)", "watch_cpu_after_s", "{:.1f}"),
    ("steady: monitor % of a core", "steady_cpu_pct_of_core", "{:.2f}"),
    ("steady: monitor RSS (MB)", "steady_rss_mb", "{:.0f}"),
    ("steady: monitor requests/s", "steady_requests_per_s", "{:.2f}"),
    ("steady: monitor KB/s", "steady_kb_per_s", "{:.1f}"),
)


def table(plan: Plan, runs: list[dict[str, Any]]) -> str:
    """Medians per mode, and for watched modes the median of the pairwise ratios to quiet."""
    def values(mode: str, key: str | tuple[str, str]) -> list[float | None]:
        if isinstance(key, tuple):
            scale = 1e6 if key[1] == "bytes_total" else 1.0
            return footprint_series(runs, mode, key[1], scale)
        scale = {"after_bytes_per_s": 1e3, "install_bytes": 1e6}.get(key, 1.0)
        return [v / scale if v is not None else None for v in series(runs, mode, key)]

    heads = [mode.name for mode in plan.modes]
    rows = [["figure (median)", *heads]]
    for label, key, form in TABLE_ROWS:
        row = [label]
        quiet = values("quiet", key)
        for mode in heads:
            mine = values(mode, key)
            present = [v for v in mine if v is not None]
            if not present:
                row.append("-")
                continue
            cell = form.format(statistics.median(present))
            paired = ratios(mine, quiet) if mode != "quiet" else []
            if paired:
                cell += f" ({statistics.median(paired):.3f}x)"
            row.append(cell)
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
                     for row in rows)


def run(options: Options, minors: list[str | None], size: int | None, modes: tuple[Mode, ...], pairs: int,
        after_seconds: float, keep_recordings: Path | None = None,
        steady_seconds: float = 0.0) -> Iterator[tuple[Result, str]]:
    """One Result per Kubernetes version, with the table printed for it."""
    directory = first_crds(size) if size else unpack_whole_set()
    total = len(list(directory.glob("*.yaml")))
    for minor in minors:
        plan = Plan(minor, directory, total, modes, pairs, after_seconds, keep_recordings, steady_seconds)
        runs = list(alternate_runs(plan))
        kubernetes = next((r["kubernetes"] for r in runs if r.get("kubernetes")), minor or "")
        figures, goals, notes = summarise(plan, runs)
        result = Result("footprint", kubernetes, size_label(SET, size, total), figures, goals, notes)
        yield result, table(plan, runs)


def write(result: Result, options: Options) -> Path:
    """The JSON result with every run's raw figures; RESULTS.md gets a row without them."""
    path = result.write(dataclasses.replace(options, append_results_md=False))
    if options.append_results_md and not options.quick:
        document = json.loads(path.read_text())
        document["figures"] = {k: v for k, v in document["figures"].items() if k not in RAW_FIGURES}
        append_row(document)
    return path


def main(argv: list[str] | None = None) -> int:
    """``python -m bench footprint [--kubernetes LIST] [--pairs N] [--size N] [--modes LIST] [--quick]``."""
    parser = argparse.ArgumentParser(prog="python -m bench footprint", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubernetes", default="", metavar="LIST",
                        help="comma-separated minors, e.g. 1.37,1.26 [default: the newest]")
    parser.add_argument("--pairs", type=int, default=None,
                        help=f"rounds of every mode [default: {DEFAULT_PAIRS}; --quick: 1]")
    parser.add_argument("--size", type=int, default=None,
                        help=f"the first N CRDs of the AWS set [default: all; --quick: {QUICK_SIZE}]")
    parser.add_argument("--modes", default=",".join(DEFAULT_MODES), metavar="LIST",
                        help="quiet, headless, tui, off:CADENCE, headless:VARIANT, tui:VARIANT "
                             f"[default: {','.join(DEFAULT_MODES)}]")
    parser.add_argument("--config-variant", action="append", default=[], metavar="NAME=TOML",
                        help="a config.toml for the mode headless:NAME (\\n for newlines, or NAME=@FILE); "
                             f"built in: {', '.join(VARIANTS)}")
    parser.add_argument("--after-seconds", type=float, default=None,
                        help=f"the after-window [default: {AFTER_SECONDS:.0f}; --quick: {QUICK_AFTER_SECONDS:.0f}]")
    parser.add_argument("--quick", action="store_true",
                        help=f"smoke sizes: {QUICK_SIZE} CRDs, 1 pair, a {QUICK_AFTER_SECONDS:.0f} s after-window")
    parser.add_argument("--output", type=Path, default=None, help="directory of the JSON results")
    parser.add_argument("--no-results-md", action="store_true", help="do not append to bench/RESULTS.md")
    parser.add_argument("--steady-seconds", type=float, default=0.0, metavar="S",
                        help="headless runs watch this much longer after the after-window: the monitor's "
                             "steady state on the loaded cluster [default: 0, none]")
    parser.add_argument("--keep-recordings", type=Path, default=None, metavar="DIR",
                        help="copy every watch's recording into DIR")
    args = parser.parse_args(argv)
    try:
        variants = dict(VARIANTS)
        variants.update(parse_variant(text) for text in args.config_variant)
        modes = parse_modes(args.modes, variants)
    except (BenchError, OSError) as exc:
        parser.error(str(exc))
    if modes and any(mode.watch == "tui" for mode in modes) and not shutil.which("tmux"):
        parser.error("the tui mode needs tmux (make system-deps)")
    options = Options(quick=args.quick, append_results_md=not args.no_results_md)
    if args.output:
        options.output = args.output
    isolate_environment()
    minors: list[str | None] = [m.strip() for m in args.kubernetes.split(",") if m.strip()] or [None]
    size = args.size if args.size is not None else (QUICK_SIZE if args.quick else None)
    pairs = max(1, args.pairs if args.pairs is not None else (1 if args.quick else DEFAULT_PAIRS))
    after = args.after_seconds if args.after_seconds is not None else (
        QUICK_AFTER_SECONDS if args.quick else AFTER_SECONDS)
    try:
        for result, printed in run(options, minors, size, modes, pairs, after, args.keep_recordings,
                                   args.steady_seconds):
            path = write(result, options)
            print(json.dumps({"benchmark": result.name, "kubernetes": result.kubernetes, "sizes": result.sizes,
                              "result": str(path), "goals": result.goals}), flush=True)
            print(f"\nfootprint: {result.kubernetes}, {result.sizes}, {pairs} pair(s), after-window {after:.0f} s"
                  f"\n{printed}\n" + "\n".join(f"  {goal}: {({True: 'met', False: 'MISSED', None: 'n/a'})[met]}"
                                                for goal, met in result.goals.items())
                  + "".join(f"\n  note: {note}" for note in result.notes) + "\n", flush=True)
    except (BenchError, CrdscopeError) as exc:  # CrdscopeError: a lab that did not come up
        print(f"bench: footprint: {exc}", flush=True)
        return 1
    except KeyboardInterrupt:
        print("bench: footprint: interrupted", flush=True)
        return 130
    return 0
