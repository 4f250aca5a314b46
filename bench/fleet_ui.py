"""How fast the fleet screen answers keys while N clusters deliver samples: ``python -m bench fleet_ui``.

``python -m bench fleet_ui [--clusters 1,5,20] [--warmup 20] [--quiet-seconds 30] [--rounds 3]
[--presses 40] [--recording PATH] [--no-results-md]``

Issue 28: the fleet screen stays responsive with 20 clusters (key to frame p99 under 100 ms)
and the monitor's own CPU stays under 1% of a core per cluster.  ``bench fleet`` measures the
headless fleet watch against real API servers; this measures the TUI, as ``bench ui_latency``
does for one cluster.

**The clusters are a recording replayed as N clusters at real-time speed**, so samples arrive
as in a live watch (every monitor probe at its default cadence, about three samples a second
per cluster).  The recording, ``bench/data/busy-install.jsonl.xz``, is 200 s of a lab's monitor
while the loader installed CRDs (41 to 213, ~85 a minute, every inventory sample listing the
install in progress).  Each cluster plays it from its own offset (so the clusters do not
deliver in step) and loops it for as long as the run lasts.  Each sample reaches the app as a
fresh copy (as a live probe builds a new one), and the CPU of making that copy is left out of
the figures.  What is not measured: the probes' own network and parsing (``bench fleet``).

Each fleet size runs in a process of its own (``--one N``: CPU and memory are that process's
alone): the app (``CrdscopeApp`` on the fleet screen, even for one cluster, which a real watch
would open on its monitor) runs headless in a 160x40 terminal.  After ``--warmup`` seconds:

* a quiet window of ``--quiet-seconds`` without keys: the process's CPU as % of one core, in
  total and per cluster, and the samples and fleet redraws per second;
* ``--rounds`` rounds of ``--presses`` keys a person's pace apart, cycling ``o`` (next sort
  column), Down (Up from the last row; not at one cluster), Enter (the selected cluster's
  monitor) and Escape (back): per press the time from handing the key to Pilot until the app
  wrote the frame that shows it (the new sort, the moved selection, the monitor with its
  panels, the fleet again; frames encoded as for a terminal, ``bench.ui_latency.FrameHook``);
  the event loop's worst stall, and the same timer in a process of its own (the machine floor).
  One cycle before the rounds is reported apart (``first_keys_ms``): the first Enter builds the
  first monitor screen and imports its panels, once per session;
* the process's resident memory at the end, in total and per cluster (less what it held
  before the app started).

Goals at the largest fleet: key p99 under 100 ms, CPU per cluster under 1% of a core.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crdscope.base.samples import Sample, percentile

if TYPE_CHECKING:
    from crdscope.session.replay import ReplayFeed

from .common import BENCH_DIR, BenchError, Options, Result, isolate_environment, say, stats
from .ui_latency import FRAME_TIMEOUT_SECONDS, FrameHook, MachineFloor, StallMeter

CLUSTERS = (1, 5, 20)
RECORDING = BENCH_DIR / "data" / "busy-install.jsonl.xz"
TERMINAL_SIZE = (160, 40)
GAP_SECONDS = 0.25
KEY_P99_GOAL_MS = 100.0
CPU_PER_CLUSTER_GOAL = 1.0
#: The keys of one cycle ("move": Down, or Up from the last row).
CYCLE = ("o", "move", "enter", "escape")


@dataclasses.dataclass(frozen=True)
class Plan:
    """How long each phase of one fleet size lasts."""

    warmup: float = 20.0
    quiet_seconds: float = 30.0
    rounds: int = 3
    presses: int = 40

    def seconds(self) -> float:
        """An upper bound of the run (the replay loops at least this long)."""
        return self.warmup + self.quiet_seconds + self.rounds * self.presses * (GAP_SECONDS + 1.0) + 60


class Copies:
    """CPU seconds spent copying samples for the app (left out of its figures)."""

    def __init__(self) -> None:
        self.cpu_seconds = 0.0


def copying_feed(recording: Any, copies: Copies) -> ReplayFeed:
    """A real-time replay of ``recording`` whose sinks each get a fresh copy of every sample."""
    from crdscope.session.replay import ReplayFeed

    class CopyingReplayFeed(ReplayFeed):
        def add_sink(self, sink: Any) -> None:
            def copied(sample: Sample) -> Any:
                started = time.process_time()
                fresh = type(sample).from_json(sample.to_json())
                copies.cpu_seconds += time.process_time() - started
                return sink(fresh)

            super().add_sink(copied)

    return CopyingReplayFeed(recording, speed=1.0)


def as_cluster(recording: Any, index: int, clusters: int, seconds: float) -> Any:
    """``recording`` as cluster ``index`` of ``clusters``: started ``index/clusters`` of the way in,
    looped for ``seconds``, named ``cluster-NN``."""
    from crdscope.session.recorder import ClusterInfo

    start = recording.start
    period = recording.end - start + 1.0
    offset = period * index / clusters
    loops = math.ceil((seconds + offset) / period) + 1
    samples = [dataclasses.replace(sample, timestamp=sample.timestamp + loop * period - offset)
               for loop in range(loops) for sample in recording.samples
               if sample.timestamp + loop * period - offset >= start]
    name = f"cluster-{index + 1:02d}"
    cluster = ClusterInfo(server=f"https://127.0.0.1:{41000 + index}", context=name,
                          kubernetes_version=recording.cluster.kubernetes_version)
    return dataclasses.replace(recording, cluster=cluster, samples=samples)


def rss_mib_now() -> float:
    """This process's resident memory now."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def fleet_app(recording: Any, clusters: int, plan: Plan, copies: Copies) -> Any:
    """The monitor on ``clusters`` replayed clusters, opening on the fleet screen."""
    from crdscope.tui import app as app_module
    from crdscope.tui.app import CrdscopeApp
    from crdscope.session.replay import replay_core
    from crdscope.tui.sessions import ClusterSession

    class FleetApp(CrdscopeApp):
        # Textual reads a relative CSS_PATH beside the module of the class: this one's is bench/.
        CSS_PATH = str(Path(app_module.__file__).parent / str(CrdscopeApp.CSS_PATH))

        @property
        def fleet(self) -> bool:  # one cluster too: the fleet screen is what is measured
            return True

    sessions = [ClusterSession(replay_core(copying_feed(as_cluster(recording, i, clusters, plan.seconds()), copies)))
                for i in range(clusters)]
    return FleetApp(sessions=sessions)


class MoveCounter:
    """Counts runs of the fleet screen's move action (Down/Up): a frame after one shows the move."""

    def __init__(self, fleet: Any) -> None:
        self.runs = 0
        original = fleet.action_move

        def counted(step: int) -> None:
            original(step)
            self.runs += 1

        fleet.action_move = counted  # Textual looks actions up on the instance


def expectation(fleet: Any, moves: MoveCounter, step: str) -> tuple[str, Callable[[Any], bool]]:
    """The key of ``step`` and what the frame that answers it shows."""
    from crdscope.tui.fleet_figures import COLUMNS
    from crdscope.tui.screens.monitor import MonitorScreen

    if step == "o":
        wanted = (fleet.sort_index + 1) % len(COLUMNS)
        return "o", lambda screen: screen is fleet and fleet.sort_index == wanted
    if step == "move":
        names = [row.name for row in fleet.rows]
        runs = moves.runs
        key = "up" if names and fleet.selected == names[-1] else "down"
        return key, lambda screen: screen is fleet and moves.runs > runs
    if step == "enter":
        target = fleet.selected_session()
        return "enter", lambda screen: (isinstance(screen, MonitorScreen) and screen.store is target.store
                                        and bool(screen.panels()))
    return "escape", lambda screen: screen is fleet


async def press_and_time(pilot: Any, hook: FrameHook, fleet: Any, moves: MoveCounter, step: str,
                         copies: Copies) -> tuple[float, float]:
    """Press ``step``'s key; wall and CPU seconds of this process until the frame that answers it
    was written (the rest of the wall time: waiting for a core on a busy machine)."""
    key, shows = expectation(fleet, moves, step)
    hook.expect_when(shows)
    started, started_cpu, copied = time.perf_counter(), time.process_time(), copies.cpu_seconds
    await pilot.press(key)
    try:
        await asyncio.wait_for(hook.shown.wait(), FRAME_TIMEOUT_SECONDS)
    except TimeoutError:
        raise BenchError(f"no frame answered {key} ({step}) {FRAME_TIMEOUT_SECONDS:.0f}s after pressing it") from None
    return hook.shown_at - started, hook.shown_cpu - started_cpu - (copies.cpu_seconds - copied)


async def press_rounds(pilot: Any, hook: FrameHook, meter: StallMeter, plan: Plan,
                       copies: Copies) -> tuple[dict[str, float], list[dict]]:
    """One cycle of keys (each the first of its kind: building the first monitor screen, importing
    what it needs), then ``plan.rounds`` rounds of them: per press its key-to-frame seconds; per
    round CPU and stalls."""
    app = pilot.app
    fleet = app.screen
    moves = MoveCounter(fleet)
    cycle = [step for step in CYCLE if step != "move" or len(app.sessions) > 1]
    first = {}
    for step in cycle:
        first[step], _ = await press_and_time(pilot, hook, fleet, moves, step, copies)
        await asyncio.sleep(GAP_SECONDS)
    meter.take()
    done, press = [], 0
    for _ in range(plan.rounds):
        latencies: dict[str, list[float]] = {step: [] for step in cycle}
        cpu_times: list[float] = []
        round_started, round_cpu, round_copies = time.perf_counter(), time.process_time(), copies.cpu_seconds
        for _ in range(plan.presses):
            step = cycle[press % len(cycle)]
            press += 1
            wall, cpu_time = await press_and_time(pilot, hook, fleet, moves, step, copies)
            latencies[step].append(wall)
            cpu_times.append(cpu_time)
            await asyncio.sleep(GAP_SECONDS)  # a person's pace between keys
        cpu = time.process_time() - round_cpu - (copies.cpu_seconds - round_copies)
        done.append({"latencies": latencies, "cpu": cpu_times, "busy": cpu / (time.perf_counter() - round_started),
                     "stalls": meter.take()})
    return first, done


async def quiet_window(app: Any, seconds: float, copies: Copies) -> dict[str, float]:
    """``seconds`` without keys: the app's CPU (a fraction of a core), samples and redraws per second."""
    fleet = app.screen
    samples = sum(s.core.samples for s in app.sessions)
    draws, copied = fleet.draws, copies.cpu_seconds
    started, cpu = time.perf_counter(), time.process_time()
    await asyncio.sleep(seconds)  # the window measured, not a wait for a condition
    wall = time.perf_counter() - started
    return {"busy": (time.process_time() - cpu - (copies.cpu_seconds - copied)) / wall,
            "samples_per_s": (sum(s.core.samples for s in app.sessions) - samples) / wall,
            "draws_per_s": (fleet.draws - draws) / wall}


async def measure(recording: Any, clusters: int, plan: Plan) -> dict[str, Any]:
    """One fleet of ``clusters``: warm up, a quiet window, then the rounds of keys."""
    from crdscope.tui.screens.fleet import FleetScreen

    copies = Copies()
    before = rss_mib_now()
    app = fleet_app(recording, clusters, plan, copies)
    meter = StallMeter()
    outcome: dict[str, Any] = {}
    async with app.run_test(size=TERMINAL_SIZE) as pilot:
        ticking = asyncio.create_task(meter.run())
        try:
            hook = FrameHook(app)
            await asyncio.sleep(plan.warmup)  # first samples of every cluster, first redraws
            silent = [s.name for s in app.sessions if not s.core.samples]
            if silent or not isinstance(app.screen, FleetScreen):
                raise BenchError(f"after {plan.warmup:.0f}s the fleet screen is not up or clusters "
                                 f"{', '.join(silent)} have no sample")
            meter.take()
            outcome["quiet"] = await quiet_window(app, plan.quiet_seconds, copies)
            outcome["quiet_stalls"] = meter.take()
            with MachineFloor() as floor:
                outcome["first"], outcome["rounds"] = await press_rounds(pilot, hook, meter, plan, copies)
                outcome["machine_floor"] = floor.lateness()
            outcome["rss_mib"] = rss_mib_now()
            outcome["rss_mib_before_app"] = before
        finally:
            ticking.cancel()
    return outcome


def figures_of(outcome: dict[str, Any], clusters: int) -> dict[str, Any]:
    """One fleet size's figures (keys without the ``@N`` suffix)."""
    rounds = outcome["rounds"]
    pooled = [latency for r in rounds for each in r["latencies"].values() for latency in each]
    by_key = {step: [latency for r in rounds for latency in r["latencies"][step]] for step in rounds[0]["latencies"]}
    cpu = outcome["quiet"]["busy"] * 100
    return {
        "key_p50_ms": round(percentile(pooled, 50) * 1000, 1),
        "key_p99_ms": round(percentile(pooled, 99) * 1000, 1),
        "key_max_ms": round(max(pooled) * 1000, 1),
        "key_p99_ms_by_key": " ".join(f"{k}={percentile(v, 99) * 1000:.0f}" for k, v in by_key.items()),
        "key_cpu_p99_ms": round(percentile([c for r in rounds for c in r["cpu"]], 99) * 1000, 1),
        "first_keys_ms": " ".join(f"{k}={v * 1000:.0f}" for k, v in outcome["first"].items()),
        "key_p99_ms_rounds": stats([percentile([x for each in r["latencies"].values() for x in each], 99) * 1000
                                    for r in rounds]),
        "cpu_percent_of_a_core": round(cpu, 2),
        "cpu_percent_per_cluster": round(cpu / clusters, 3),
        "cpu_percent_during_keys": round(max(r["busy"] for r in rounds) * 100, 1),
        "rss_mib": round(outcome["rss_mib"]),
        "rss_mib_per_cluster": round((outcome["rss_mib"] - outcome["rss_mib_before_app"]) / clusters, 1),
        "samples_per_s": round(outcome["quiet"]["samples_per_s"], 1),
        "fleet_redraws_per_s": round(outcome["quiet"]["draws_per_s"], 2),
        "worst_stall_ms": round(max(s for r in rounds for s in [*r["stalls"], 0.0]) * 1000, 1),
        "machine_floor_worst_stall_ms": round(max(outcome["machine_floor"], default=0.0) * 1000, 1),
    }


def run_one(clusters: int, plan: Plan, recording_path: Path) -> dict[str, Any]:
    """Measure one fleet size in this process: its figures and the recording's Kubernetes version."""
    from crdscope.session.replay import read_recording  # .xz and .gz are read as they are

    recording = read_recording(recording_path)
    if len(recording.samples) < 2:
        raise BenchError(f"{recording_path} holds fewer than two samples")
    outcome = asyncio.run(measure(recording, clusters, plan))
    return {"figures": figures_of(outcome, clusters), "kubernetes": recording.cluster.kubernetes_version}


def run_child(clusters: int, plan: Plan, recording: Path) -> dict[str, Any]:
    """One fleet size in a process of its own (``--one N``); its JSON answer."""
    argv = [sys.executable, "-m", "bench.fleet_ui", "--one", str(clusters), "--warmup", str(plan.warmup),
            "--quiet-seconds", str(plan.quiet_seconds), "--rounds", str(plan.rounds),
            "--presses", str(plan.presses), "--recording", str(recording)]
    try:
        done = subprocess.run(argv, stdout=subprocess.PIPE, text=True, cwd=BENCH_DIR.parent,
                              timeout=plan.seconds() + 600)
    except subprocess.TimeoutExpired:
        raise BenchError(f"the fleet of {clusters} took longer than {plan.seconds() + 600:.0f}s") from None
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise BenchError(f"the fleet of {clusters} exited {done.returncode} (its error is above)")
    answer: dict[str, Any] = json.loads(lines[-1])
    return answer


def run(options: Options, sizes: tuple[int, ...], plan: Plan, recording: Path) -> Result:
    """Each fleet size, smallest first, each in a process of its own."""
    figures: dict[str, Any] = {}
    kubernetes = ""
    for n in sorted(sizes):
        say(f"fleet_ui: {n} clusters for about {plan.warmup + plan.quiet_seconds:.0f} s and "
            f"{plan.rounds}x{plan.presses} keys")
        answer = run_child(n, plan, recording)
        say(f"fleet_ui: {answer['figures']}")
        kubernetes = answer["kubernetes"]
        figures.update({f"{key}@{n}": value for key, value in answer["figures"].items()})
    largest = max(sizes)
    goals: dict[str, bool | None] = {
        f"key p99 < {KEY_P99_GOAL_MS:g} ms at {largest} clusters": figures[f"key_p99_ms@{largest}"] < KEY_P99_GOAL_MS,
        f"monitor CPU per cluster < {CPU_PER_CLUSTER_GOAL:g}% of a core at {largest} clusters":
            figures[f"cpu_percent_per_cluster@{largest}"] < CPU_PER_CLUSTER_GOAL,
    }
    result = Result("fleet_ui", kubernetes, f"{','.join(map(str, sorted(sizes)))} clusters (a recording of "
                    f"{recording.name} replayed as each, real time)", figures, goals)
    result.notes.append(f"fleet screen 160x40; keys {', '.join(CYCLE)} every {GAP_SECONDS}s; warm-up "
                        f"{plan.warmup:g}s, quiet window {plan.quiet_seconds:g}s, {plan.rounds}x{plan.presses} keys; "
                        "CPU excludes the probes' network and parsing (bench fleet measures those)")
    return result


def main(argv: list[str] | None = None) -> int:
    """``python -m bench fleet_ui [--clusters 1,5,20] ...`` (``--one N``: one size, JSON on stdout)."""
    parser = argparse.ArgumentParser(prog="python -m bench fleet_ui", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clusters", default=",".join(map(str, CLUSTERS)), help="fleet sizes (default 1,5,20)")
    parser.add_argument("--warmup", type=float, default=Plan.warmup, help="seconds before measuring (default 20)")
    parser.add_argument("--quiet-seconds", type=float, default=Plan.quiet_seconds,
                        help="the window without keys that CPU is measured over (default 30)")
    parser.add_argument("--rounds", type=int, default=Plan.rounds, help="rounds of keys (default 3)")
    parser.add_argument("--presses", type=int, default=Plan.presses, help="keys per round (default 40)")
    parser.add_argument("--recording", type=Path, default=RECORDING,
                        help="the recording replayed as each cluster (.jsonl or .jsonl.xz; default "
                             "bench/data/busy-install.jsonl.xz)")
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument("--no-results-md", action="store_true", help="do not append to bench/RESULTS.md")
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        sizes = tuple(int(part) for part in args.clusters.split(",") if part.strip())
    except ValueError:
        parser.error(f"--clusters {args.clusters!r}: whole numbers, e.g. 1,5,20")
    if not sizes or min(sizes) < 1 or args.rounds < 1 or args.presses < 1 or min(args.warmup, args.quiet_seconds) <= 0:
        parser.error("--clusters needs sizes of at least 1; --rounds and --presses at least 1; "
                     "--warmup and --quiet-seconds more than 0")
    if not args.recording.is_file():
        parser.error(f"--recording {args.recording}: no such file")
    plan = Plan(warmup=args.warmup, quiet_seconds=args.quiet_seconds, rounds=args.rounds, presses=args.presses)
    if args.one is not None:
        print(json.dumps(run_one(args.one, plan, args.recording.resolve())), flush=True)
        return 0
    options = Options(append_results_md=not args.no_results_md)
    if args.output:
        options.output = args.output
    isolate_environment()
    result = run(options, sizes, plan, args.recording.resolve())
    print(result.write(options), flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"bench: fleet_ui: {exc}", file=sys.stderr, flush=True)
        sys.exit(1)
