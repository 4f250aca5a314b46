"""Benchmark 4: how fast the monitor answers keys, and how long its event loop ever stalls.

The TUI as ``crdscope watch`` builds it (``tui.launch.build_app``, every probe at its
default cadence, the loader idle) runs headless (``App.run_test``) against a lab holding
the set, in the tabs layout of a 120x40 terminal.  Once the version, inventory and
discovery probes have delivered a sample, rounds of key presses switch tabs (``2`` ... ``7``, ``1``: each press changes
the screen, none changes what the probes do).  For each press: the time from handing
the key to Pilot until the app wrote the frame showing the new tab.  Headless Textual
builds the frame but skips encoding it for a terminal; the frame hook encodes it too,
so that cost is counted.  Meanwhile a 10 ms timer in the same loop records how late it
wakes (a stall of the loop shows as lateness), and the same timer in a process of its own
measures what the machine alone does to a loop (``machine_floor_*``).

Goals: p99 key-to-frame of every press of every round under 100 ms, worst stall of
every round under 250 ms (per-round figures beside them; a round is one of the runs).
The worst stall while the monitor starts (the first CRD list, the first discovery
document) is reported beside them.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from collections.abc import Callable, Iterator
from typing import Any

from crdscope.base.samples import percentile
from crdscope.base.settings import Settings

from .common import BenchError, Options, Result, size_label, stats
from .discovery import SET
from .labs import ADMIN_CONTEXT, each_shared_lab

TERMINAL_SIZE = (120, 40)
STALL_INTERVAL_SECONDS = 0.010
#: Probes whose first sample means the monitor is up (openapi and health can take minutes on
#: the whole set; they still run during the rounds).
FIRST_SAMPLES = ("version", "inventory", "discovery")
STARTUP_TIMEOUT_SECONDS = 900.0
FRAME_TIMEOUT_SECONDS = 30.0


#: The same 10 ms timer in a process that does nothing else, run beside the rounds: how late
#: this (shared) machine alone makes a loop wake, so that crdscope's stalls can be told apart.
MACHINE_FLOOR_SCRIPT = f"""
import asyncio, json, sys, threading, time
done = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
async def main():
    late = []
    while not done.is_set():
        started = time.perf_counter()
        await asyncio.sleep({STALL_INTERVAL_SECONDS})
        late.append(time.perf_counter() - started - {STALL_INTERVAL_SECONDS})
    print(json.dumps(late))
asyncio.run(main())
"""


class MachineFloor:
    """``with MachineFloor() as floor:`` runs :data:`MACHINE_FLOOR_SCRIPT` beside the rounds;
    ``floor.lateness()`` stops it and returns its wakes' lateness (killed on the way out if not)."""

    def __enter__(self) -> MachineFloor:
        self.process = subprocess.Popen([sys.executable, "-c", MACHINE_FLOOR_SCRIPT], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
        return self

    def lateness(self) -> list[float]:
        """Stop the timer; how late each of its wakes was, in seconds."""
        return list(json.loads(self.process.communicate("", timeout=60)[0]))

    def __exit__(self, *exc_info: object) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@dataclass(frozen=True)
class Plan:
    presses: int
    gap_seconds: float

    @classmethod
    def for_options(cls, options: Options) -> Plan:
        return cls(15, 0.2) if options.quick else cls(80, 0.25)


@dataclass
class StallMeter:
    """A timer in the event loop that measures how late it wakes."""

    lateness: list[float] = field(default_factory=list)

    async def run(self) -> None:
        while True:
            started = time.perf_counter()
            await asyncio.sleep(STALL_INTERVAL_SECONDS)
            self.lateness.append(time.perf_counter() - started - STALL_INTERVAL_SECONDS)

    def take(self) -> list[float]:
        """The lateness recorded since the last take."""
        taken, self.lateness = self.lateness, []
        return taken


class FrameHook:
    """Wraps ``app._display``: notes when the frame that shows an awaited state is written
    (a tab, or any condition on the screen written, :meth:`expect_when`)."""

    def __init__(self, app) -> None:
        from textual._compositor import CompositorUpdate

        self.app = app
        self.update_type = CompositorUpdate
        #: True of the screen being written once it shows what the key asked for.
        self.awaited: Callable[[Any], bool] | None = None
        self.shown = asyncio.Event()
        self.shown_at = 0.0
        self.shown_cpu = 0.0
        self.frames = 0
        original = app._display

        def display(screen, renderable) -> None:
            if renderable is not None:
                self.frames += 1
                if isinstance(renderable, self.update_type) and app.is_headless:
                    renderable.render_segments(app.console)  # what a real terminal's frame costs
                if self.awaited is not None and self.awaited(screen):
                    self.shown_at = time.perf_counter()
                    self.shown_cpu = time.process_time()
                    self.awaited = None
                    self.shown.set()
            original(screen, renderable)

        app._display = display

    def expect(self, tab: str) -> None:
        """Await the frame that shows ``tab`` active."""
        self.expect_when(lambda _screen: _active_tab(self.app) == tab)

    def expect_when(self, shows: Callable[[Any], bool]) -> None:
        """Await the first frame written while ``shows(the screen written)`` is true."""
        self.awaited = shows
        self.shown.clear()


def _active_tab(app) -> str | None:
    from textual.widgets import TabbedContent

    try:
        return app.screen.query_one(TabbedContent).active
    except Exception:  # noqa: BLE001 - no tabs on this screen (a dialog): not the awaited frame
        return None


async def _wait_first_samples(app) -> float:
    started = time.perf_counter()
    while not all(app.store.latest(name) is not None for name in FIRST_SAMPLES):
        if time.perf_counter() - started > STARTUP_TIMEOUT_SECONDS:
            missing = [name for name in FIRST_SAMPLES if app.store.latest(name) is None]
            raise BenchError(f"the monitor had no {', '.join(missing)} sample after {STARTUP_TIMEOUT_SECONDS:.0f}s")
        await asyncio.sleep(0.1)
    return time.perf_counter() - started


async def _press_rounds(pilot, hook: FrameHook, meter: StallMeter, rounds: int, plan: Plan) -> list[dict]:
    """``rounds`` rounds of tab keys: per press, key-to-frame wall and CPU seconds; per round, stalls."""
    from crdscope.tui.screens.monitor import PANELS

    keys = [str(n) for n in range(2, len(PANELS) + 1)] + ["1"]
    tabs = {key: f"tab-{PANELS[int(key) - 1].key()}" for key in keys}
    done, press = [], 0
    for _ in range(rounds):
        latencies, cpu = [], []
        round_started, round_cpu = time.perf_counter(), time.process_time()
        for _ in range(plan.presses):
            key = keys[press % len(keys)]
            press += 1
            hook.expect(tabs[key])
            started, started_cpu = time.perf_counter(), time.process_time()
            await pilot.press(key)
            try:
                await asyncio.wait_for(hook.shown.wait(), FRAME_TIMEOUT_SECONDS)
            except TimeoutError:
                raise BenchError(f"no frame showed {tabs[key]} {FRAME_TIMEOUT_SECONDS:.0f}s after "
                                 f"pressing {key}") from None
            latencies.append(hook.shown_at - started)
            cpu.append(hook.shown_cpu - started_cpu)
            await asyncio.sleep(plan.gap_seconds)  # a person's pace between keys
        busy = (time.process_time() - round_cpu) / (time.perf_counter() - round_started)
        done.append({"latencies": latencies, "cpu": cpu, "busy": busy, "stalls": meter.take()})
    return done


async def measure(kubeconfig: str, rounds: int, plan: Plan) -> dict:
    """Start the monitor, wait for its first samples, then time ``rounds`` rounds of key presses."""
    from crdscope.tui.launch import build_app

    app = build_app(kubeconfig, ADMIN_CONTEXT, record=None, settings=Settings(), layout="tabs")
    meter = StallMeter()
    outcome: dict = {}
    async with app.run_test(size=TERMINAL_SIZE) as pilot:
        ticking = asyncio.create_task(meter.run())
        try:
            hook = FrameHook(app)
            outcome["startup_s"] = await _wait_first_samples(app)
            outcome["startup_stall"] = max(meter.take(), default=0.0)
            with MachineFloor() as floor:
                outcome["rounds"] = await _press_rounds(pilot, hook, meter, rounds, plan)
                outcome["machine_floor"] = floor.lateness()
            outcome["samples"] = {name: len(app.store.history(name)) for name in ("inventory", "discovery",
                                                                                  "openapi", "health")}
        finally:
            ticking.cancel()
    return outcome


def run(options: Options) -> Iterator[Result]:
    plan = Plan.for_options(options)
    for size, state, total in each_shared_lab(SET, options.chosen_sizes(), "ui_latency"):
        outcome = asyncio.run(measure(state.kubeconfig, options.runs, plan))
        pooled = [latency for r in outcome["rounds"] for latency in r["latencies"]]
        worst = [max(r["stalls"], default=0.0) for r in outcome["rounds"]]
        p99 = percentile(pooled, 99)
        figures = {
            "presses": len(pooled),
            "key_p99_ms": round(p99 * 1000, 1),
            "key_p50_ms": round(percentile(pooled, 50) * 1000, 1),
            "key_max_ms": round(max(pooled) * 1000, 1),
            # CPU this process used from the key to its frame (the rest of the wall time: waiting
            # for the CPU on a busy machine, or the network work of probes in the same loop).
            "key_cpu_p50_ms": round(percentile([c for r in outcome["rounds"] for c in r["cpu"]], 50) * 1000, 1),
            "key_cpu_p99_ms": round(percentile([c for r in outcome["rounds"] for c in r["cpu"]], 99) * 1000, 1),
            "app_cpu_pct_of_core": stats([r["busy"] * 100 for r in outcome["rounds"]]),
            "key_p99_ms_rounds": stats([percentile(r["latencies"], 99) * 1000 for r in outcome["rounds"]]),
            "worst_stall_ms": round(max(worst) * 1000, 1),
            "worst_stall_ms_rounds": stats([w * 1000 for w in worst]),
            "stall_p99_ms": round(percentile([s for r in outcome["rounds"] for s in r["stalls"]], 99) * 1000, 1),
            "machine_floor_worst_stall_ms": round(max(outcome["machine_floor"], default=0.0) * 1000, 1),
            "machine_floor_stall_p99_ms": round(percentile(outcome["machine_floor"], 99) * 1000, 1),
            "startup_s": round(outcome["startup_s"], 1),
            "startup_worst_stall_ms": round(outcome["startup_stall"] * 1000, 1),
            "samples_during_rounds": " ".join(f"{k}={v}" for k, v in outcome["samples"].items()),
        }
        result = Result("ui_latency", state.kubernetes_version, size_label(SET, size, total), figures)
        result.goals["key p99 < 100 ms"] = p99 < 0.100
        result.goals["worst stall < 250 ms"] = max(worst) < 0.250
        result.notes.append("loader idle; tabs layout 120x40; every probe at its default cadence")
        yield result
