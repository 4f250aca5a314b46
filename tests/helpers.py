"""Test helpers: waiting on conditions with deadlines (never fixed sleeps), timing keys."""

from __future__ import annotations

import asyncio
import dataclasses
import contextlib
import time
from pathlib import Path
from typing import Any, TypeVar
from collections.abc import Awaitable, Callable, Iterator

T = TypeVar("T")


def condition_true(item: dict, kind: str) -> bool:
    """True when an object's status lists condition ``kind`` as "True".

    A freshly created object may have no status, or ``conditions: null``, as kubectl prints it.
    """
    return any(c.get("type") == kind and c.get("status") == "True"
               for c in (item.get("status") or {}).get("conditions") or [])


def established(item: dict) -> bool:
    """True when a CRD (or MRD) as kubectl returns it says Established=True."""
    return condition_true(item, "Established")


def wait_for(predicate: Callable[[], T], *, timeout: float = 30.0, interval: float = 0.1,
             message: str = "condition") -> T:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {message} (last: {last!r})")


def elapse(seconds: float, what: str) -> None:
    """Let ``seconds`` of wall time pass: a measurement window (requests counted over a minute), where
    the time itself is the quantity measured, never a stand-in for a condition (use :func:`wait_for`)."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        time.sleep(min(left, 1.0))


async def async_wait_for(predicate: Callable[[], Awaitable[T] | T], *, timeout: float = 30.0,
                         interval: float = 0.1, message: str = "condition") -> T:
    """Async variant of :func:`wait_for`; ``predicate`` may be sync or async."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if asyncio.iscoroutine(last):
            last = await last
        if last:
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {message} (last: {last!r})")


class KeyTimer:
    """Times key presses from sending the key until its action runs (see :func:`timed_action`)."""

    def __init__(self, app: Any, action: Callable[[], Any]) -> None:
        self.app = app
        self.action = action
        self.answered: list[float] = []
        #: Seconds from each press to its action, in press order.
        self.timings: list[float] = []

    def run_action(self) -> None:
        self.answered.append(time.perf_counter())
        self.action()

    async def press(self, key: str, *, timeout: float = 10.0) -> float:
        """Press ``key`` and wait until its action ran; returns how long that took."""
        pressed = time.perf_counter()
        self.app.simulate_key(key)
        await async_wait_for(lambda: len(self.answered) > len(self.timings), timeout=timeout, interval=0.002,
                             message="the key's action")
        self.timings.append(self.answered[-1] - pressed)
        return self.timings[-1]


@contextlib.contextmanager
def timed_action(app: Any, action: str) -> Iterator[KeyTimer]:
    """Wrap the app's ``action_<action>`` so that presses of its key can be timed; restored on exit.

    Textual's bindings look the action up on the instance, so the wrapper replaces it there.
    """
    name = f"action_{action}"
    timer = KeyTimer(app, getattr(app, name))
    setattr(app, name, timer.run_action)
    try:
        yield timer
    finally:
        delattr(app, name)  # the class's own method again


def lab_app(handle: Any, *, load: int = 120, size: str = "tabs") -> Any:
    """The monitor as ``crdscope lab`` opens it, loading a modest synthetic set quickly."""
    from crdscope.base.settings import LoaderSettings, Settings
    from crdscope.tui.launch import build_app

    settings = Settings(loader=LoaderSettings(source=f"synthetic:{load}", rate=60.0, concurrency=8))
    return build_app(handle.kubeconfig, handle.admin_context, record=None, settings=settings, layout=size,
                     lab=handle.lab)


def secrets_of(kubeconfig: str, pki: Path) -> list[bytes]:
    """The lab's key material, in every form a leak could take (kubeconfig base64, PEM body lines)."""
    import base64

    import yaml

    document = yaml.safe_load(Path(kubeconfig).read_text())
    found: list[bytes] = []
    for user in document["users"]:
        for key in ("client-key-data", "client-certificate-data"):
            value = user["user"].get(key)
            if value:
                found.append(value.encode())
                pem = base64.b64decode(value)
                found += [line for line in pem.splitlines() if len(line) > 40 and not line.startswith(b"-----")]
    for key_file in pki.glob("*.key"):
        found += [line for line in key_file.read_bytes().splitlines() if len(line) > 40 and not line.startswith(b"-----")]
    assert found, "no key material found to look for"
    return found


async def start_loader_as_configured(app: Any, *, timeout: float = 30.0) -> None:
    """Start the monitor's loader with its configured source and pace, through the set-up dialog.

    "Loader: start" asks first (source, profile, rate, concurrency); a test that is not about
    that dialog accepts what it shows, as a person pressing ctrl+s would.
    """
    from crdscope.tui.loader_actions import run_action
    from crdscope.tui.screens.loader_setup import LoaderSetupScreen

    def plan_shown() -> bool:
        screen = app.screen
        if not isinstance(screen, LoaderSetupScreen) or not screen.query("#plan"):
            return False
        return "Will apply" in str(screen.query_one("#plan").render())

    run_action(app, "start")
    # The dialog counts the source's CRDs before it offers to start: wait for its plan.
    await async_wait_for(plan_shown, timeout=timeout, message="the loader's set-up dialog and its plan")
    app.screen.action_start()
    await async_wait_for(lambda: not isinstance(app.screen, LoaderSetupScreen), timeout=timeout,
                         message="the set-up dialog to start the load")


class LoopTurns:
    """Counts the event loop's turns while work runs: how a test sees that the work yields.

    ``async with LoopTurns() as turns: await work()`` then ``turns.count``.
    """

    def __init__(self) -> None:
        self.count = 0
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(0)  # one turn of the loop, counted: this is the measurement
            self.count += 1

    async def __aenter__(self) -> LoopTurns:
        self._task = asyncio.create_task(self._tick())
        await asyncio.sleep(0)  # let the ticker start before the work
        self.count = 0
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._task is not None
        self._task.cancel()


def steady_cadences(**cadences: float) -> dict[str, float]:
    """Cadences for ``Settings().override("cadences", ...)`` that hold while nothing changes too.

    A probe with an ``*_idle`` cadence slows to it once no CRD changed for ``settle`` seconds
    (``probes.scheduler.Scheduler.pace``); tests that want a probe at one pace set both.
    """
    from crdscope.base.settings import Cadences

    known = {f.name for f in dataclasses.fields(Cadences)}
    steady = dict(cadences)
    for name, value in cadences.items():
        if f"{name}_idle" in known:
            steady.setdefault(f"{name}_idle", value)
    return steady


def mock_cluster(handler: Callable[..., Any]) -> Any:
    """A stand-in for ``connection.cluster.Cluster`` whose client (the streaming one too) answers with
    ``handler`` through ``httpx.MockTransport``: for unit tests of what a probe makes of answers."""
    import types

    import httpx

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler), base_url="https://lab.test")
    return types.SimpleNamespace(client=client, server="https://lab.test", streaming_client=lambda: client)
