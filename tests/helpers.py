"""Test helpers: waiting on conditions with deadlines (never fixed sleeps)."""

from __future__ import annotations

import asyncio
import time
from typing import TypeVar
from collections.abc import Awaitable, Callable

T = TypeVar("T")


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
