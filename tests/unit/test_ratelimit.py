"""The token bucket against hand-computed cases (client-go / x/time/rate semantics)."""

from __future__ import annotations

import asyncio
import time

import pytest

from crdscope.base.errors import ConfigError
from crdscope.connection.ratelimit import (
    CLIENT_GO_DEFAULT,
    KUBECTL_FROM_1_24,
    KUBECTL_UP_TO_1_23,
    NAMED_LIMITS,
    ClientLimits,
    TokenBucket,
    client_models,
    replay,
    replay_legacy_walk,
    user_limits,
)


def close(actual: tuple[float, float], expected: tuple[float, float]) -> bool:
    return all(abs(a - e) < 1e-9 for a, e in zip(actual, expected, strict=True))


def test_burst_exhausted_queues_one_token_per_interval():
    # 30 instant requests at once behind (5 QPS, burst 10): 10 pass, the k-th after them waits k/5 s,
    # so the 30th waits 20/5 = 4 s; something waited during all of [0, 4].
    assert close(replay([[0.0] * 30], 5, 10), (4.0, 4.0))


def test_within_burst_nothing_waits():
    assert close(replay([[0.3] * 10], 5, 10), (0.3, 0.0))


def test_steady_state_settles_at_the_refill_rate():
    # One request at a time, 0.1 s each, (5 QPS, burst 1): the first goes at once; every later one finds
    # half a token (0.1 s x 5/s) and waits 0.1 s for the rest, so one request per 1/5 s:
    # 10 requests = 0.1 + 9 x 0.2 = 1.9 s, of which 9 x 0.1 = 0.9 s waiting.
    assert close(replay([[0.1]] * 10, 5, 1), (1.9, 0.9))


def test_slower_than_the_rate_never_waits():
    # 0.5 s per request refills 2.5 tokens (capped at the burst of 1): no wait, ever.
    assert close(replay([[0.5]] * 10, 5, 1), (5.0, 0.0))


def test_legacy_walk_concurrency_by_hand():
    # /api 0.1 s, /apis 0.1 s, then 20 group-versions of 0.5 s at once, behind (5 QPS, burst 10):
    # t=0    /api takes a token: 9 left
    # t=0.1  refilled 0.5 -> 9.5; /apis takes one: 8.5
    # t=0.2  refilled 0.5 -> 9.0; 9 group-versions go now, the other 11 wait 0.2, 0.4, ... 2.2 s
    # the last one starts at 2.4 and ends at 2.9; the limiter held someone during [0.2, 2.4].
    model = replay_legacy_walk(0.1, 0.1, [0.5] * 20, ClientLimits("by hand", 5, 10))
    assert close((model.seconds, model.waited_seconds), (2.9, 2.2))
    assert (model.name, model.qps, model.burst) == ("by hand", 5, 10)


def test_a_slow_request_issued_first_sets_the_wall_time():
    # Same limiter; the first group-version takes 2 s and passes at once (t=0.2 -> 2.2); the 19 others
    # of 0.1 s: 8 more pass, 11 wait up to 2.2 s, the last ends at 0.2 + 2.2 + 0.1 = 2.5.
    model = replay_legacy_walk(0.1, 0.1, [2.0] + [0.1] * 19, CLIENT_GO_DEFAULT)
    assert close((model.seconds, model.waited_seconds), (2.5, 2.2))


def test_waits_of_separate_phases_add_up_on_the_clock():
    # Burst 1 at 1 QPS: phase one, 2 instant requests: the second waits 1 s (waiting [0, 1]).
    # Phase two starts at 1, the bucket refilled from -1 to 0 tokens: both of its requests wait (1 s, 2 s),
    # waiting [1, 3].  Total 3 s, all of it waiting.
    assert close(replay([[0.0, 0.0], [0.0, 0.0]], 1, 1), (3.0, 3.0))


def test_named_limits_are_client_go_and_kubectl():
    assert [(m.name, m.qps, m.burst) for m in NAMED_LIMITS] == [
        ("client-go default", 5.0, 10), ("kubectl <=1.23", 5.0, 100), ("kubectl >=1.24", 50.0, 300)]
    assert (CLIENT_GO_DEFAULT, KUBECTL_UP_TO_1_23, KUBECTL_FROM_1_24) == NAMED_LIMITS


def test_client_models_include_the_user_pair():
    # 120 instant group-versions (+ /api and /apis, instant too): 122 requests at t=0.
    # client-go (5, 10): the 112 beyond the burst -> 112/5 = 22.4 s; kubectl <=1.23 (5, 100): 22/5 = 4.4 s;
    # kubectl >=1.24 (50, 300): nothing; user (10, 2): 120/10 = 12 s.
    models = client_models(0.0, 0.0, [0.0] * 120, user_limits(10, 2))
    assert [m.name for m in models] == ["client-go default", "kubectl <=1.23", "kubectl >=1.24", "user qps=10 burst=2"]
    assert [round(m.seconds, 9) for m in models] == [22.4, 4.4, 0.0, 12.0]
    assert [round(m.waited_seconds, 9) for m in models] == [22.4, 4.4, 0.0, 12.0]


def test_user_pair_needs_both_halves_and_sane_values():
    assert user_limits(None, None) is None
    with pytest.raises(ConfigError, match="both --qps and --burst"):
        user_limits(5, None)
    with pytest.raises(ConfigError, match="QPS must be a positive number"):
        user_limits(0, 10)
    with pytest.raises(ConfigError, match="burst must be a whole number"):
        user_limits(5, 0)


async def test_live_bucket_waits_as_the_model_says():
    bucket = TokenBucket(qps=50, burst=2)
    started = time.monotonic()
    waits = await asyncio.gather(*(bucket.acquire() for _ in range(5)))
    elapsed = time.monotonic() - started
    # Two pass, then one token per 1/50 s: 0.02, 0.04, 0.06.
    assert [round(w, 3) for w in waits] == [0.0, 0.0, 0.02, 0.04, 0.06]
    assert elapsed >= 0.059
    assert (bucket.acquired, bucket.throttled) == (5, 3)
    assert abs(bucket.waited_seconds - 0.12) < 0.005
    total, waited = replay([[0.0] * 5], 50, 2)
    assert abs(total - max(waits)) < 0.005 and abs(waited - max(waits)) < 0.005


async def test_cancelled_waiter_gives_its_token_back():
    bucket = TokenBucket(qps=20, burst=1)
    assert await bucket.acquire() == 0.0
    waiter = asyncio.create_task(bucket.acquire())  # reserved the next token: would wait 0.05 s
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    # Its reservation was returned: the next caller waits at most 0.05 s, not 0.1 s behind the dead one.
    assert await bucket.acquire() <= 0.05 + 1e-6
    assert bucket.acquired == 2 and bucket.throttled <= 1
