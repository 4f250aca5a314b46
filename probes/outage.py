"""Dating an outage to the second: the health probe's one cheap check while the API server is away.

While the server refuses connections, one ``GET /readyz`` a second costs it nothing (a refused
connection is never sent: :mod:`connection.traffic` tallies it as unsent) and dates the outage's end
to the second.  While requests time out (a SIGSTOPped, saturated or partitioned server), the check
stays in flight until it is answered or times out, and the next one waits a back-off that doubles
from :data:`BACKOFF_SECONDS` up to :data:`BACKOFF_MAX_SECONDS`: a saturated server is not free to
poll.  Which of the two it is needs no exception class: a check that failed within
:data:`REFUSED_EVERY_SECONDS` failed at once (refused, unreachable), a slower one timed out.

:class:`OutageCheck` also keeps when the server last answered a check of the health probe and the
first attempt that failed since: the outage's start, when the session's verdict
(``ClusterFacts.server_away``) does not date it earlier.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Awaitable, Callable

from .health_checks import CheckResult

#: While connections fail at once, a check every this many seconds.
REFUSED_EVERY_SECONDS = 1.0
#: After a check that timed out, the next one waits this long, doubling after each one that times out ...
BACKOFF_SECONDS = 1.0
#: ... up to this.
BACKOFF_MAX_SECONDS = 8.0
#: How long a run waits for the answer of a check it just sent (a refusal comes back in milliseconds).
QUICK_ANSWER_SECONDS = 0.25


@dataclasses.dataclass(frozen=True)
class Attempt:
    """What the health probe knows of its check now."""

    #: time.time() when the newest check was sent (0.0: none yet).
    sent: float
    #: Its answer (None: still waiting for it, or no check sent yet).
    result: CheckResult | None

    @property
    def answered(self) -> bool:
        """The server answered it (any HTTP status, not ready included)."""
        return self.result is not None and not self.result.unreachable


class OutageCheck:
    """One check of the server at a time, paced as the module says; the outage's first failed attempt."""

    def __init__(self, check: Callable[[], Awaitable[CheckResult]]) -> None:
        self._check = check
        self._task: asyncio.Future[CheckResult] | None = None
        self._sent = 0.0
        self._started = 0.0
        self._next_at = 0.0
        self._backoff = BACKOFF_SECONDS
        self._last: Attempt = Attempt(0.0, None)
        #: time.time() the server last answered a check (0.0: not yet).
        self.answered_at = 0.0
        #: time.time() of the first check that failed since it last answered (None: it answers).
        self.failing_since: float | None = None

    @property
    def in_flight(self) -> bool:
        return self._task is not None

    def saw(self, sent: float, result: CheckResult) -> None:
        """A check the probe's full run made itself (``sent``: when)."""
        if result.unreachable:
            self.failing_since = self.failing_since if self.failing_since is not None else sent
        else:
            self.answered_at, self.failing_since = max(self.answered_at, sent), None
            self._backoff = BACKOFF_SECONDS
        self._last = Attempt(sent, result)

    def hold(self, pending: Awaitable[CheckResult], sent: float) -> None:
        """A check already in flight (a full run's, left waiting when the server went away) is the one."""
        self._task, self._sent, self._started = asyncio.ensure_future(pending), sent, time.monotonic()

    async def poll(self, *, now_if_between: bool = False) -> Attempt:
        """Send a check when one is due (``now_if_between``: even during a back-off) and none is in
        flight, wait a moment for its answer, and say what is known."""
        sending = self._task is None and (now_if_between or time.monotonic() >= self._next_at)
        if sending:
            self._sent, self._started = time.time(), time.monotonic()
            self._task = asyncio.ensure_future(self._check())
        if self._task is None:
            return self._last
        # A check just sent gets a moment (a refusal comes back at once); one already waiting does not
        # hold the run (the sample says how long it has waited).
        done, _ = await asyncio.wait({self._task}, timeout=QUICK_ANSWER_SECONDS if sending else 0)
        if not done:
            return Attempt(self._sent, None)
        task, self._task = self._task, None
        result = task.result()
        self._pace(result, time.monotonic() - self._started)
        self.saw(self._sent, result)
        return self._last

    def _pace(self, result: CheckResult, took: float) -> None:
        """When the next check may go: a second after a failure that came at once, a back-off after one
        that timed out (doubling), a second after an answer (the probe's full run takes over then)."""
        if result.unreachable and took >= REFUSED_EVERY_SECONDS:
            self._next_at = time.monotonic() + self._backoff
            self._backoff = min(BACKOFF_MAX_SECONDS, self._backoff * 2)
        else:
            self._next_at = self._started + REFUSED_EVERY_SECONDS

    async def aclose(self) -> None:
        """Cancel a check still waiting."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
