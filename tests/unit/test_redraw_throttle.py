"""The one redraw throttle of the panels and the fleet screens."""

from __future__ import annotations

import pytest

from crdscope.tui.throttle import FLOOR_SECONDS, RedrawThrottle


class FakeTimer:
    def __init__(self) -> None:
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True


class Owner:
    def __init__(self) -> None:
        self.delays: list[float] = []
        self.timers: list[FakeTimer] = []

    def set_timer(self, delay, callback):
        self.delays.append(delay)
        self.timers.append(FakeTimer())
        return self.timers[-1]


def test_requests_merge_until_the_redraw_and_respect_the_minimum_gap():
    owner = Owner()
    throttle = RedrawThrottle(owner, lambda: None, min_seconds=0.5)
    throttle.request()
    throttle.request()  # merged into the pending one
    assert owner.delays == [FLOOR_SECONDS] and throttle.pending
    throttle.drawn()
    assert not throttle.pending
    throttle.request()  # just drawn: waits out the rest of the half second
    assert owner.delays[1] == pytest.approx(0.5, abs=0.05)


def test_a_direct_redraw_spends_the_pending_timer():
    owner = Owner()
    throttle = RedrawThrottle(owner, lambda: None, min_seconds=1.0)
    throttle.request()
    throttle.drawn()
    assert owner.timers[0].stopped and not throttle.pending
