"""Client-side rate limits as client-go applies them: a token bucket, modelled and live.

client-go's ``flowcontrol.NewTokenBucketRateLimiter(qps, burst)`` wraps
``golang.org/x/time/rate``: the bucket starts full with ``burst`` tokens and
refills at ``qps`` tokens a second (never above ``burst``); every request
reserves one token in the order it asks, and a request that finds the bucket
empty waits until its token has been refilled.  Tokens may go negative: the
reservations queue, so the k-th request beyond the burst waits ``k / qps``.

Two ways to use it:

* :func:`replay` (pure, virtual time): replay measured request durations through
  a fresh bucket; :func:`replay_legacy_walk` models discovery's legacy walk the
  way client-go issues it, and :func:`client_models` does so for the named limits
  (:data:`NAMED_LIMITS`) plus a user-given pair.
* :class:`TokenBucket` (asyncio): ``waited = await bucket.acquire()`` before each
  request; ``bucket.waited_seconds`` is the running total (what the loader sends
  through it, and what the throttling probe reports).
"""

from __future__ import annotations

from crdscope.base.samples.discovery import ClientModel

import asyncio
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

from crdscope.base.errors import ConfigError


@dataclass(frozen=True)
class ClientLimits:
    """A client's rate limit: ``qps`` tokens a second, ``burst`` tokens at most."""

    name: str
    qps: float
    burst: int

    def __post_init__(self) -> None:
        if not (isinstance(self.qps, (int, float)) and math.isfinite(self.qps) and self.qps > 0):
            raise ConfigError(f"client model {self.name!r}: QPS must be a positive number, not {self.qps!r}")
        if not (isinstance(self.burst, int) and self.burst >= 1):
            raise ConfigError(f"client model {self.name!r}: burst must be a whole number >= 1, not {self.burst!r}")


#: client-go's rest.Config defaults (QPS 5, burst 10).
CLIENT_GO_DEFAULT = ClientLimits("client-go default", 5.0, 10)
#: kubectl's discovery client up to 1.23 (QPS 5, burst 100).
KUBECTL_UP_TO_1_23 = ClientLimits("kubectl <=1.23", 5.0, 100)
#: kubectl's discovery client from 1.24 (kubernetes PRs 107131 and 109141).
KUBECTL_FROM_1_24 = ClientLimits("kubectl >=1.24", 50.0, 300)
NAMED_LIMITS: tuple[ClientLimits, ...] = (CLIENT_GO_DEFAULT, KUBECTL_UP_TO_1_23, KUBECTL_FROM_1_24)


class _Bucket:
    """x/time/rate's reservation arithmetic on a clock given by the caller."""

    def __init__(self, qps: float, burst: int, now: float) -> None:
        self.qps = float(qps)
        self.burst = burst
        self.tokens = float(burst)  # starts full, as rate.NewLimiter does
        self.last = now

    def reserve(self, now: float) -> float:
        """Take one token at ``now``; return how long the caller must wait for it."""
        if now > self.last:
            self.tokens = min(float(self.burst), self.tokens + (now - self.last) * self.qps)
            self.last = now
        self.tokens -= 1.0
        return -self.tokens / self.qps if self.tokens < 0 else 0.0

    def give_back(self) -> None:
        """Return an unused token (a waiter was cancelled)."""
        self.tokens = min(float(self.burst), self.tokens + 1.0)


class Allowance:
    """A budget of requests per minute that never waits: :meth:`take` says whether one more fits now.

    For optional reads (they are skipped, not delayed, when the budget is spent).
    """

    def __init__(self, per_minute: float, burst: int) -> None:
        self.per_minute = per_minute
        self._bucket = _Bucket(per_minute / 60.0, max(1, burst), time.monotonic()) if per_minute > 0 else None
        self.denied = 0

    def take(self) -> bool:
        """Use one request of the budget if one is left now."""
        if self._bucket is not None:
            if self._bucket.reserve(time.monotonic()) <= 0:
                return True
            self._bucket.give_back()
        self.denied += 1
        return False


def _union_length(intervals: list[tuple[float, float]]) -> float:
    total, reach = 0.0, -math.inf
    for start, end in sorted(intervals):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


def replay(phases: Sequence[Sequence[float]], qps: float, burst: int) -> tuple[float, float]:
    """Replay requests through a fresh, full token bucket; returns ``(total_seconds, waited_seconds)``.

    ``phases`` lists request durations (seconds from the moment the limiter lets a
    request go until its answer is read).  The requests of one phase are issued at
    once, in the order given, when every request of the previous phase has finished;
    each must pass the limiter first.  ``waited_seconds`` is the wall time during
    which at least one request was held by the limiter.
    """
    limits = ClientLimits("replay", qps, burst)
    bucket = _Bucket(limits.qps, limits.burst, 0.0)
    clock = 0.0
    waits: list[tuple[float, float]] = []
    for durations in phases:
        issued = clock
        for duration in durations:
            delay = bucket.reserve(issued)
            if delay > 0:
                waits.append((issued, issued + delay))
            clock = max(clock, issued + delay + max(0.0, float(duration)))
    return clock, _union_length(waits)


def replay_legacy_walk(api_seconds: float, apis_seconds: float, group_version_seconds: Sequence[float],
                       limits: ClientLimits) -> ClientModel:
    """client-go's legacy discovery walk behind ``limits``.

    ``GET /api`` then ``GET /apis`` one after the other, then every group-version
    GET at once (client-go starts one goroutine per group-version; each passes the
    limiter first), each taking the duration measured for it.
    """
    seconds, waited = replay([[api_seconds], [apis_seconds], list(group_version_seconds)],
                             limits.qps, limits.burst)
    return ClientModel(limits.name, limits.qps, limits.burst, seconds, waited)


def user_limits(qps: float | None, burst: int | None) -> ClientLimits | None:
    """The user-given pair as a model (both or neither; one alone is a :class:`ConfigError`)."""
    if qps is None and burst is None:
        return None
    if qps is None or burst is None:
        raise ConfigError("a client model needs both --qps and --burst")
    return ClientLimits(f"user qps={qps:g} burst={burst}", float(qps), burst)


def client_models(api_seconds: float, apis_seconds: float, group_version_seconds: Sequence[float],
                  extra: ClientLimits | None = None) -> tuple[ClientModel, ...]:
    """The legacy walk replayed behind each of :data:`NAMED_LIMITS` (and ``extra``)."""
    chosen = NAMED_LIMITS + ((extra,) if extra is not None else ())
    return tuple(replay_legacy_walk(api_seconds, apis_seconds, group_version_seconds, limits)
                 for limits in chosen)


class TokenBucket:
    """A live client-go token bucket for asyncio code.

    ``waited = await bucket.acquire()`` before each request; reservations are
    served in the order :meth:`acquire` was called.  Counters: :attr:`acquired`,
    :attr:`throttled` (acquires that had to wait) and :attr:`waited_seconds`
    (the sum of every wait, like adding up client-go's "Waited for" lines).
    """

    def __init__(self, qps: float, burst: int, *, name: str = "crdscope") -> None:
        self.limits = ClientLimits(name, qps, burst)
        self._bucket = _Bucket(self.limits.qps, self.limits.burst, time.monotonic())
        self.acquired = 0
        self.throttled = 0
        self.waited_seconds = 0.0
        self.last_wait_seconds = 0.0

    @property
    def qps(self) -> float:
        return self.limits.qps

    @property
    def burst(self) -> int:
        return self.limits.burst

    async def acquire(self) -> float:
        """Wait for a token; returns the seconds this call waited (0.0 within the burst)."""
        delay = self._bucket.reserve(time.monotonic())
        if delay > 0:
            try:
                await asyncio.sleep(delay)
            except asyncio.CancelledError:
                self._bucket.give_back()
                raise
            self.throttled += 1
            self.waited_seconds += delay
        self.acquired += 1
        self.last_wait_seconds = delay
        return delay
