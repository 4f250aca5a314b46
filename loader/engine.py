"""The load engine: server-side apply of a source's CRDs at a set pace, safely, on record.

One engine is one attempt of one run (:mod:`loader.record`).  It reads the
source through a worker thread a few items ahead, decides per CRD (send,
skip a name crdscope does not own, or count it as finished by an earlier
attempt), and applies with ``PATCH ...?fieldManager=crdscope`` and
``application/apply-patch+yaml`` over the cluster's shared client:

* pace: ``steady`` sends through a token bucket (``rate`` per second, burst 1:
  an even drip); ``burst`` sends everything as fast as ``concurrency`` allows,
  as a provider install does; at most ``concurrency`` applies are in flight;
* 429 answers are retried after ``Retry-After``; 5xx answers and transport
  errors with exponential backoff, then the CRD fails with the reason;
* ownership is enforced by the server (preconditions, see :mod:`loader.safety`);
* Established comes from the CRD watch (the monitor's, or one of its own):
  no CRD is polled;
* ``pause()`` stops sending (what was sent keeps establishing), ``resume()``
  goes on, ``stop()`` lets in-flight applies finish and ends the attempt with
  a consistent record.

Progress is a :class:`base.samples.loader.LoaderSample`, handed to ``on_progress``
(at most 5 times a second, and on every state change) and returned by
:meth:`LoadEngine.run` at the end.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, NamedTuple
from collections.abc import AsyncGenerator, Callable

from crdscope.connection.cluster import Cluster
from crdscope.connection.crdwatch import CRDWatch
from crdscope.base.errors import ClusterError, ConfigError, CrdscopeError
from crdscope.connection.ratelimit import TokenBucket
from crdscope.base.settings import LoaderSettings
from crdscope.connection.traffic import LOADER, origin

from .apply import Applier, ApplyFatalError, ApplyResult
from .establish import ESTABLISHED_TIMEOUT_SECONDS, EstablishWaiter
from crdscope.base.samples.loader import ItemProblem, LoaderSample, LoaderState, PROFILES, Profile
from .record import APPLIED, RunRecord
from .safety import FOREIGN_REASON, apply_precondition, check_permissions, ownership
from .sources import CRDDocument, Source, SourceProblem, UniqueNames, open_source

log = logging.getLogger("crdscope.loader")

#: How long the engine's own CRD watch may take for its first list.
WATCH_SYNC_TIMEOUT_SECONDS = 120.0
PROGRESS_INTERVAL_SECONDS = 0.2
TICK_SECONDS = 1.0

ProgressCallback = Callable[[LoaderSample], Any]


class ProblemLists(NamedTuple):
    """The run's failed and skipped items, derived once per version of the run record."""

    version: int
    failures: tuple[ItemProblem, ...]
    skips: tuple[ItemProblem, ...]


class LoadEngine:
    """Loads one source into one cluster; see the module docstring."""

    def __init__(self, cluster: Cluster, source: Source | str, *, rate: float | None = None,
                 concurrency: int | None = None, limit: int | None = None, profile: str | None = None,
                 crd_watch: CRDWatch | None = None, on_progress: ProgressCallback | None = None,
                 limiter: TokenBucket | None = None, runs_directory: Any = None, resume: bool = True,
                 established_timeout: float = ESTABLISHED_TIMEOUT_SECONDS) -> None:
        defaults = LoaderSettings()
        self.cluster = cluster
        self.source = open_source(source) if isinstance(source, str) else source
        chosen = profile or defaults.profile
        if chosen not in PROFILES:
            raise ConfigError(f"unknown profile '{chosen}' (one of: {', '.join(PROFILES)})")
        self.profile: Profile = chosen
        self.rate = float(rate if rate is not None else defaults.rate)
        self.concurrency = int(concurrency if concurrency is not None else defaults.concurrency)
        self.limit = limit
        if not self.rate > 0:
            raise ConfigError(f"--rate must be a positive number of CRDs per second, not {rate}")
        if self.concurrency < 1:
            raise ConfigError(f"--concurrency must be at least 1, not {concurrency}")
        if limit is not None and limit < 1:
            raise ConfigError(f"--limit must be at least 1, not {limit}")
        #: crdscope's own client-side limiter (None for burst): the throttling probe reads it
        #: from ``monitor.shared.client_limiter``.
        self.limiter = None if self.profile == "burst" else (limiter or TokenBucket(self.rate, 1, name="loader"))
        self.on_progress = on_progress
        self.established_timeout = established_timeout
        self._resume = resume
        self._runs_directory = runs_directory
        self._watch = crd_watch
        self._watch_task: asyncio.Task[None] | None = None
        self.record: RunRecord | None = None
        #: The error that ended the run early (ConfigError or ClusterError), for the CLI's exit code.
        self.fatal: CrdscopeError | None = None

        self._state: LoaderState = "idle"
        self._gate = asyncio.Event()
        self._gate.set()
        self._stop_event = asyncio.Event()
        self._slots = asyncio.Semaphore(self.concurrency)
        self._tasks: set[asyncio.Task[None]] = set()
        self._unique = UniqueNames()
        self._crds_considered = 0
        self._source_read = False
        self._waiter: EstablishWaiter | None = None
        self._started = 0.0
        self._ended: float | None = None
        self._sent = 0
        self._accepted_now = 0
        self._established_now = 0
        self._resumed = 0
        self._not_crds = 0
        self._applier: Applier | None = None
        self._limiter_waited = 0.0
        self._last_emit = 0.0
        self._problem_cache = ProblemLists(-1, (), ())

    # -- control -----------------------------------------------------------------------
    @property
    def state(self) -> LoaderState:
        return self._state

    @property
    def run_id(self) -> str:
        return self.record.run_id if self.record else ""

    def pause(self) -> None:
        """Stop sending; applies in flight finish and sent CRDs keep establishing."""
        if self._state == "running":
            self._gate.clear()
            self._set_state("paused")

    def resume(self) -> None:
        """Go on sending after :meth:`pause`."""
        if self._state == "paused":
            self._gate.set()
            self._set_state("running")

    def stop(self) -> None:
        """End the attempt: nothing new is sent, in-flight applies finish, the record is closed."""
        if self._state in ("idle", "running", "paused"):
            self._stop_event.set()
            self._gate.set()
            self._set_state("stopping")

    @property
    def stopping(self) -> bool:
        return self._stop_event.is_set()

    @property
    def _journal(self) -> RunRecord:
        """The run record; :meth:`_run` opens it before the first item is read."""
        if self.record is None:
            raise RuntimeError("the run record is not open yet")
        return self.record

    @property
    def _crds(self) -> CRDWatch:
        """The CRD watch; :meth:`_start_watch` sets it before anything else."""
        if self._watch is None:
            raise RuntimeError("the CRD watch is not started yet")
        return self._watch

    def _set_state(self, state: LoaderState) -> None:
        self._state = state
        self._emit(force=True)

    # -- the run ---------------------------------------------------------------------------
    async def run(self) -> LoaderSample:
        """Load the source; returns the final sample (its ``error`` says why a run ended early)."""
        if self._started:
            raise RuntimeError("a LoadEngine runs once; make a new one to load again")
        self._started = time.monotonic()
        if not self.stopping:
            self._set_state("running")
        # The loader's requests are the install being watched: counted apart from the monitor's.
        with origin(LOADER):
            ticker = asyncio.create_task(self._tick(), name="loader-progress")
            try:
                await self._run()
            except CrdscopeError as exc:
                self.fatal = exc
            finally:
                ticker.cancel()
                await self._finish()
        return self.progress()

    async def _run(self) -> None:
        await check_permissions(self.cluster, ("create", "patch"), "load")
        await self._start_watch()
        if self.stopping:
            return
        await self.source.aprepare()
        options = {"profile": self.profile, "rate": self.rate if self.limiter else None,
                   "concurrency": self.concurrency, "limit": self.limit}
        record = self.record = await asyncio.to_thread(
            RunRecord.open, source=self.source.spec, source_key=self.source.key, server=self.cluster.server,
            context=self.cluster.context, options=options, directory=self._runs_directory, resume=self._resume)
        self._applier = Applier(self.cluster, record.run_id, self._stop_event)
        waiter = self._waiter = EstablishWaiter(self.cluster, self._crds, timeout=self.established_timeout,
                                                established=self._established, failed=self._failed)
        if record.resumed:
            log.info("resuming load run %s (attempt %d)", record.run_id, record.attempts)
        self._crds.add_listener(waiter.on_watch_event)
        try:
            await self._dispatch()
            if self._tasks:
                await asyncio.gather(*list(self._tasks), return_exceptions=True)
            self._raise_fatal()
            if not self.stopping:
                await waiter.wait(self._interruptible, lambda: self.stopping)
        finally:
            self._crds.remove_listener(waiter.on_watch_event)

    async def _start_watch(self) -> None:
        watch = self._watch
        if watch is None:
            watch = self._watch = CRDWatch(self.cluster)
            self._watch_task = asyncio.create_task(watch.run(), name="loader-crd-watch")
        if watch.synced.is_set():
            return
        synced = await self._interruptible(watch.synced.wait(), WATCH_SYNC_TIMEOUT_SECONDS)
        if synced is None and not self.stopping:
            reason = watch.status.last_error or f"no answer in {WATCH_SYNC_TIMEOUT_SECONDS:.0f}s"
            raise ClusterError(f"cannot list CRDs before loading: {reason}")

    async def _interruptible(self, awaitable: Any, timeout: float | None = None) -> Any:
        """Await ``awaitable`` unless :meth:`stop` comes first (or ``timeout`` passes): None then."""
        task = asyncio.ensure_future(awaitable)
        stopper = asyncio.ensure_future(self._stop_event.wait())
        try:
            done, _ = await asyncio.wait({task, stopper}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopper.cancel()
        if task not in done:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            if task.cancelled() or task.exception() is not None:
                return None
            # It completed just before the cancel (a semaphore taken, say): report that.
        result = task.result()
        return True if result is None else result

    # -- reading and deciding ----------------------------------------------------------------
    async def _prefetch(self) -> AsyncGenerator[CRDDocument | SourceProblem, None]:
        """The source's items, read a few ahead in a worker thread while earlier ones are sent."""
        queue: asyncio.Queue[object] = asyncio.Queue(maxsize=2 * self.concurrency)
        finished = object()

        async def reader() -> None:
            end: object = finished
            try:
                async for item in self.source.aitems():
                    await queue.put(item)
            except CrdscopeError as exc:
                end = exc
            except Exception as exc:
                log.exception("reading %s failed", self.source.spec)
                end = CrdscopeError(f"reading {self.source.spec} failed: {type(exc).__name__}: {exc}")
            await queue.put(end)

        task = asyncio.create_task(reader(), name="loader-source")
        try:
            while True:
                item = await self._interruptible(queue.get())
                if item is None or item is finished:
                    self._source_read = item is finished
                    return
                if isinstance(item, CrdscopeError):
                    raise item
                yield item
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _dispatch(self) -> None:
        items = self._prefetch()
        try:
            async for item in items:
                self._raise_fatal()
                if self.limit is not None and self._crds_considered >= self.limit and \
                        isinstance(item, CRDDocument):
                    self._source_read = True  # the limit makes ``requested`` exact
                    break
                item = self._unique.check(item)
                if isinstance(item, SourceProblem):
                    self._source_problem(item)
                    continue
                self._crds_considered += 1
                self._journal.note(item.name)
                if self._settled_already(item):
                    continue
                if not await self._send_slot():
                    break
                task = asyncio.create_task(self._apply(item), name=f"apply:{item.name}")
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        finally:
            await items.aclose()

    def _source_problem(self, problem: SourceProblem) -> None:
        if problem.outcome == "not-crd":
            self._not_crds += 1
        else:
            self._journal.entry(problem.origin, problem.outcome, problem.reason)
        self._emit()

    def _settled_already(self, item: CRDDocument) -> bool:
        """Handle a CRD that needs no apply: finished by an earlier attempt, or not ours."""
        state = self._journal.outcome(item.name)
        current = self._crds.crds.get(item.name)
        owner = ownership(current)
        if owner == "foreign":
            self._journal.crd(item.name, "skipped", FOREIGN_REASON)
            self._emit()
            return True
        if current is None or owner != "ours" or current.run_id != self.run_id or current.terminating:
            return False  # not ours from this run: applied (again) by this attempt
        if state is None or state.outcome not in APPLIED:
            # Applied by an attempt that was killed before it could write its line.
            self._journal.crd(item.name, "created", "found applied by an earlier attempt of this run",
                            uid=current.uid)
        self._resumed += 1
        if not self._journal.crds[item.name].established:
            self._await_established(item.name, current.uid)
        self._emit()
        return True

    async def _send_slot(self) -> bool:
        """Wait until sending is allowed: not paused, a free slot, a token; False when stopped."""
        if await self._interruptible(self._gate.wait()) is None:
            return False
        if await self._interruptible(self._slots.acquire()) is None:
            return False
        if self.limiter is not None:
            started = time.monotonic()
            waited = await self._interruptible(self.limiter.acquire())
            self._limiter_waited += time.monotonic() - started
            if waited is None:
                self._slots.release()
                return False
        # A pause that came while waiting for the token holds the send until resumed.
        if not self._gate.is_set() and await self._interruptible(self._gate.wait()) is None:
            self._slots.release()
            return False
        if self.stopping:
            self._slots.release()
            return False
        return True

    # -- applying --------------------------------------------------------------------------------
    async def _apply(self, item: CRDDocument) -> None:
        try:
            precondition = apply_precondition(self._crds.crds.get(item.name))
            if precondition is None:  # became someone else's while it waited for its turn
                result = ApplyResult("skipped", FOREIGN_REASON)
            else:
                self._sent += 1
                self._emit()
                result = await self._apply_one(item, precondition)
        except ApplyFatalError as exc:
            if self.fatal is None:
                self.fatal = ClusterError(str(exc))
            self.stop()
            return
        except Exception as exc:  # a bug, not the network (TRANSPORT_ERRORS are retried): fail this CRD only
            log.exception("applying %s raised", item.name)
            result = ApplyResult("failed", f"internal error: {type(exc).__name__}: {exc}")
        finally:
            self._slots.release()
        if result.outcome == "pending":
            return
        self._journal.crd(item.name, result.outcome, result.reason, **({"uid": result.uid} if result.uid else {}))
        if result.outcome in APPLIED:
            self._accepted_now += 1
            self._await_established(item.name, result.uid)
        self._emit()

    async def _apply_one(self, item: CRDDocument, precondition: str) -> ApplyResult:
        if self._applier is None:
            raise RuntimeError("the applier is made with the run record")
        return await self._applier.apply(item, precondition)

    def _failed(self, name: str, reason: str) -> None:
        self._journal.crd(name, "failed", reason)
        self._emit()

    def _raise_fatal(self) -> None:
        if self.fatal is not None:
            raise self.fatal

    # -- Established ---------------------------------------------------------------------------
    def _await_established(self, name: str, uid: str) -> None:
        if self._waiter is None:
            raise RuntimeError("the Established waiter is made with the run record")
        self._waiter.add(name, uid)

    def _established(self, name: str) -> None:
        self._journal.crd(name, "established")
        self._established_now += 1
        self._emit()

    # -- ending ----------------------------------------------------------------------------------
    async def _finish(self) -> None:
        self._ended = time.monotonic()
        finished = (not self.stopping and self.fatal is None and self._source_read
                    and self.record is not None and not self._awaiting_count() and self._pending() == 0)
        state: LoaderState = "done" if finished else "stopped"
        if self.record is not None:
            sample = self.progress()
            summary = {k: getattr(sample, k) for k in ("requested", "created", "updated", "established",
                                                       "skipped", "failed", "pending", "sent")}
            if self.fatal is not None:
                summary["error"] = str(self.fatal)
            await asyncio.to_thread(self.record.end, state, **summary)
            self.record.close()
        if self._watch_task is not None:
            self._watch_task.cancel()
            await asyncio.gather(self._watch_task, return_exceptions=True)
        self._set_state(state)

    # -- progress --------------------------------------------------------------------------------
    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(TICK_SECONDS)
            self._emit(force=True)

    def _emit(self, force: bool = False) -> None:
        if self.on_progress is None:
            return
        now = time.monotonic()
        if not force and now - self._last_emit < PROGRESS_INTERVAL_SECONDS:
            return
        self._last_emit = now
        try:
            self.on_progress(self.progress())
        except Exception:
            log.exception("loader progress callback failed")

    def _awaiting_count(self) -> int:
        return len(self._waiter.awaiting) if self._waiter is not None else 0

    def _pending(self) -> int:
        record = self.record
        if record is None:
            return 0
        known = len(record.crds) + len(record.entries)
        return known - sum(record.counts.values())

    def progress(self) -> LoaderSample:
        """The current progress (the final summary once :meth:`run` returned)."""
        record = self.record
        elapsed = ((self._ended or time.monotonic()) - self._started) if self._started else 0.0
        counts = record.counts if record else {"created": 0, "updated": 0, "skipped": 0, "failed": 0}
        requested = (len(record.crds) + len(record.entries)) if record else 0
        pending = self._pending()
        if not self._source_read and self.source.estimate is not None:
            expected = self.source.estimate if self.limit is None else min(self.source.estimate, self.limit)
            if expected > requested:
                pending += expected - requested
                requested = expected
        rate = self._established_now / elapsed if elapsed > 0 else 0.0
        sending_rate = self._accepted_now / elapsed if elapsed > 0 else 0.0
        remaining = pending + self._awaiting_count()
        eta = None
        if remaining == 0 and self._started:
            eta = 0.0
        elif sending_rate > 0 and self._state in ("running", "paused"):
            eta = remaining / sending_rate
        failures, skips = self._problems()
        return LoaderSample(
            source=self.source.spec,
            run_id=self.run_id,
            state=self._state,
            profile=self.profile,
            rate_limit_per_s=self.rate if self.limiter is not None else None,
            concurrency=self.concurrency,
            requested=requested,
            source_read=self._source_read,
            sent=self._sent,
            created=counts["created"],
            updated=counts["updated"],
            established=record.established if record else 0,
            skipped=counts["skipped"],
            failed=counts["failed"],
            pending=pending,
            resumed=self._resumed,
            not_crds=self._not_crds,
            crds_per_second=rate,
            eta_seconds=eta,
            elapsed_seconds=elapsed,
            limiter_waited_seconds=self._limiter_waited,
            retries_429=self._applier.retries_429 if self._applier else 0,
            retries_5xx=self._applier.retries_5xx if self._applier else 0,
            retries_transport=self._applier.retries_transport if self._applier else 0,
            failures=failures,
            skips=skips,
            error=str(self.fatal) if self.fatal is not None else None,
        )

    def _problems(self) -> tuple[tuple[ItemProblem, ...], tuple[ItemProblem, ...]]:
        record = self.record
        if record is None:
            return (), ()
        version = record.version
        if self._problem_cache.version != version:
            self._problem_cache = ProblemLists(
                version,
                tuple(ItemProblem(name, reason) for name, reason in record.problems("failed")),
                tuple(ItemProblem(name, reason) for name, reason in record.problems("skipped")),
            )
        return self._problem_cache.failures, self._problem_cache.skips
