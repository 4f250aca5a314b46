"""The watch of the footprint benchmark: ``crdscope watch`` (headless, or the TUI in tmux) on a lab,
what its recording says, and the server and watch processes' figures from ``/proc``."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from collections.abc import Collection

from crdscope.lab.controlplane import LabState
from crdscope.session.recorder import part_path

from .common import BenchError, process_cpu_seconds
from .discovery import crdscope_command
from .overhead import memory_bytes

if TYPE_CHECKING:
    from .footprint import Mode

#: Probes whose first sample means the watch has sent its start-up requests (first discovery, the
#: CRD list, the OpenAPI index, the first /metrics scrape).
FIRST_SAMPLES = ("version", "inventory", "discovery", "openapi", "health")
WATCH_START_TIMEOUT_SECONDS = 300.0
STOP_TIMEOUT_SECONDS = 60.0
#: How long the steady window waits for the walk that follows a settled install.
WALK_WAIT_SECONDS = 120.0
TMUX_SIZE = (200, 50)
TMUX_SESSION = "footprint"


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

    def __init__(self, mode: Mode, state: LabState, lab_home: Path, directory: Path, *, nice: int = 0) -> None:
        self.mode = mode
        self.directory = directory
        self.recording = directory / "recording.jsonl"
        self.stdout = directory / "stdout.txt"
        self.stderr = directory / "stderr.txt"
        self.socket = directory / "tmux.sock"
        self.env = {"XDG_CONFIG_HOME": str(directory / "config"), "XDG_DATA_HOME": str(directory / "data"),
                    "XDG_STATE_HOME": str(directory / "state"), "CRDSCOPE_LAB_HOME": str(lab_home)}
        # `nice` execs the watch: the pid read below is crdscope's own either way.
        self.argv = [*(["nice", "-n", str(nice)] if nice else []),
                     *crdscope_command(), "watch", *(["--headless"] if mode.watch == "headless" else []),
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
