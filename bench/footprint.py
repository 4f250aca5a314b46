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
(:class:`crdscope.base.fit.LinearFit` of RSS over the CRDs stored, counted by a one-item LIST
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
import dataclasses
import json
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Iterator

import httpx

from crdscope.lab.binaries import ensure_binaries
from crdscope.lab.controlplane import Lab, LabState, admin_tls
from crdscope.base.errors import CrdscopeError
from crdscope.base.fit import LinearFit
from crdscope.base.settings import Cadences, load_settings

from .common import (BenchError, Options, Result, append_row, isolate_environment, run_timed, say, size_label)
from .discovery import crdscope_command
from .labs import memory_for, wait_for_memory, wait_until_idle
from .footprint_figures import summarise, table
from .footprint_watch import Watch, cpu_seconds, recording_figures, rss_bytes, steady_figures
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
#: After the watch's start-up burst the API server settles again before the load starts.
WATCH_IDLE_TIMEOUT_SECONDS = 180.0
LOAD_TIMEOUT_SECONDS = 3 * 3600.0
#: ``off:NAME`` sets cadence NAME to this: a cadence of 0 means "again at once" for most probes (the
#: scheduler re-arms a probe when its run ends), so the probe runs once as the watch starts, before
#: the load, and never again.  Cadences in :data:`ZERO_TURNS_OFF` read 0 as off and get 0.
NEVER_SECONDS = 1e9
ZERO_TURNS_OFF = ("openapi_v2", "responsiveness_ping")
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


def _difference(after: float | None, before: float | None) -> float | None:
    return round(after - before, 3) if after is not None and before is not None else None


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
    #: The watch runs at this niceness: in the lab it shares the API server's cores, which a monitor on an
    #: operator's machine does not; 19 leaves the server (and the loader) every cycle they want.
    watch_nice: int = 0


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
                watch = Watch(mode, state, lab.home, Path(home) / "watch", nice=plan.watch_nice)
                figures["watch_nice"] = plan.watch_nice
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
                # [seconds after the load started, CRDs stored, RSS MiB]: the points of its own fit, to
                # set beside the ones crdscope fitted (its recording's health samples).
                own_points=[[round(at - load_started, 1), crds, round(rss / MIB, 1)]
                            for at, crds, rss in sampler.points],
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


def run(options: Options, minors: list[str | None], size: int | None, modes: tuple[Mode, ...], pairs: int,
        after_seconds: float, keep_recordings: Path | None = None,
        steady_seconds: float = 0.0, watch_nice: int = 0) -> Iterator[tuple[Result, str]]:
    """One Result per Kubernetes version, with the table printed for it."""
    directory = first_crds(size) if size else unpack_whole_set()
    total = len(list(directory.glob("*.yaml")))
    for minor in minors:
        plan = Plan(minor, directory, total, modes, pairs, after_seconds, keep_recordings, steady_seconds, watch_nice)
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
    parser.add_argument("--watch-nice", type=int, default=0, choices=range(20), metavar="N",
                        help="run the watch at niceness N (0-19): it then takes no cycle the co-located API "
                             "server wants, as a monitor on another machine would not [default: 0]")
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
    for result, printed in run(options, minors, size, modes, pairs, after, args.keep_recordings,
                               args.steady_seconds, args.watch_nice):
        path = write(result, options)
        print(json.dumps({"benchmark": result.name, "kubernetes": result.kubernetes, "sizes": result.sizes,
                          "result": str(path), "goals": result.goals}), flush=True)
        print(f"\nfootprint: {result.kubernetes}, {result.sizes}, {pairs} pair(s), after-window {after:.0f} s"
              f"\n{printed}\n" + "\n".join(f"  {goal}: {({True: 'met', False: 'MISSED', None: 'n/a'})[met]}"
                                            for goal, met in result.goals.items())
              + "".join(f"\n  note: {note}" for note in result.notes) + "\n", flush=True)
    return 0
