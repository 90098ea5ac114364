"""Settling fired timers with the store: acks batched, retries and dead letters by policy.

Nothing is dropped: a settle that meets an unavailable store is tried again until it lands or
the lease has lapsed, after which the store hands the timer out again (at least once).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from functools import partial
from typing import Any, TypeVar

from tickwheel.engine.backoff import retry_due_ms
from tickwheel.engine.metrics import Metrics
from tickwheel.errors import LeaseLost, StoreUnavailable
from tickwheel.model import truncate_error
from tickwheel.stores import Lease, Store
from tickwheel.stores.attempt_record import Attempt
from tickwheel.stores.base import Deferral

logger = logging.getLogger("tickwheel.engine")

T = TypeVar("T")
Acked = asyncio.Future[bool] | Callable[[], None] | None
"""Who hears of a queued ack: a future told whether it landed, a call made once it has
landed or not, or nobody."""

STORE_RETRY_MIN_S = 0.05
STORE_RETRY_MAX_S = 1.0
DEFERS_AT_ONCE = 8
"""Deferrals one settler has in flight at most when the store takes them one at a time."""
DEFER_BATCH = 500
"""Deferrals one store call carries at most."""
"""The longest pause between tries of an unavailable store: a store back from an outage is
found within a second, at the cost of one failed connection a second per loop meanwhile."""
LOG_EVERY_S = 10.0


class Throttled:
    """Log a recurring problem once per interval, with how often it happened meanwhile."""

    def __init__(self, interval_s: float = LOG_EVERY_S) -> None:
        self.interval_s = interval_s
        self._last: dict[str, float] = {}
        self._count: dict[str, int] = {}

    def warning(self, key: str, message: str, *args: object) -> None:
        self._count[key] = self._count.get(key, 0) + 1
        now = asyncio.get_running_loop().time()
        if now - self._last.get(key, -self.interval_s) >= self.interval_s:
            times = self._count.pop(key)
            self._last[key] = now
            logger.warning(message + " (%d times since last logged)", *args, times)


async def jittered_pause(failures: int) -> None:
    """Sleep after the `failures`-th failure in a row: exponential, full jitter, capped."""
    cap = min(STORE_RETRY_MAX_S, STORE_RETRY_MIN_S * 2.0 ** min(failures, 16))
    await asyncio.sleep(random.uniform(STORE_RETRY_MIN_S, cap))


class Settler:
    """Acks, retries and kills leases for a worker or consumer, never losing one to an outage.

    Nor to a surprise: a retry the store refuses becomes a dead letter, and an ack batch the
    store fails is logged and reported as not landed; the timers come back once their leases
    lapse. None of its methods raises but for cancellation.
    """

    def __init__(
        self, store: Store, metrics: Metrics, throttled: Throttled, *, ack_every_s: float = 0.0
    ) -> None:
        self._store = store
        # a flood deferred at once (a target that hangs) must not take every store connection
        # from the claims and acks of other queues
        self._deferring = asyncio.Semaphore(DEFERS_AT_ONCE)
        self._max_ahead_ms = store.settings.max_horizon_ms  # how far ahead a due time may go
        self._metrics = metrics
        self._throttled = throttled
        # acks go out at most this often: on a small host each round trip costs ~100 µs of
        # CPU to sleep and wake for, however few acks it carries, so fewer, fuller calls win
        self._ack_every_s = ack_every_s
        self._last_flush = -ack_every_s
        # queued acks and their futures (None: nobody waits), as two lists: no tuple per ack
        # for the GC to follow
        self._acks: list[Lease] = []
        self._acked: list[Acked] = []
        # the attempt each queued ack records, in step with `_acks`, while any records one
        self._ack_attempts: list[Attempt | None] = []
        self._flusher: asyncio.Task[None] | None = None
        self._defers: list[Deferral] = []
        self._deferred: list[asyncio.Future[bool]] = []
        self._defer_flusher: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[None]] = set()
        # the loop it settles on, once known: asking for the running loop is a system call
        self._loop: asyncio.AbstractEventLoop | None = None

    def ack(self, lease: Lease, attempt: Attempt | None = None) -> asyncio.Future[bool]:
        """Queue an ack (recording `attempt` with it); acks queued while one batch is in
        flight go out together next.

        The future says whether the ack landed (False: the lease had passed on, or the store
        failed; either way the timer comes back once the lease lapses).
        """
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        done = loop.create_future()
        self._queue_ack(lease, done, attempt)
        return done

    def ack_then(self, lease: Lease, attempt: Attempt | None, then: Callable[[], None]) -> None:
        """Queue an ack (recording `attempt`) and call `then` once it has landed or not: for an
        owner with nothing else to do for the timer, which need not wait in a task meanwhile."""
        self._queue_ack(lease, then, attempt)

    def ack_later(self, lease: Lease) -> None:
        """Queue an ack nobody waits for; one that does not land (the lease had passed on)
        is counted in `leases_lost` and logged, and its timer is delivered again."""
        self._queue_ack(lease, None, None)

    def later(self, settling: Coroutine[Any, Any, None]) -> None:
        """Run a retry or kill in the background; `drain` waits for it."""
        task = asyncio.create_task(settling)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _queue_ack(self, lease: Lease, done: Acked, attempt: Attempt | None) -> None:
        if attempt is not None and not self._ack_attempts:
            self._ack_attempts = [None] * len(self._acks)
        if self._ack_attempts or attempt is not None:
            self._ack_attempts.append(attempt)
        self._acks.append(lease)
        self._acked.append(done)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_acks())

    async def fail(
        self,
        lease: Lease,
        error: str,
        retry_after_s: float | None = None,
        attempt: Attempt | None = None,
    ) -> None:
        """Retry the timer after a backoff, or dead-letter it once its policy gives up; either
        records `attempt`, with what came of it."""
        timer = lease.timer
        record = attempt
        now = self._store.now_ms()
        # claims handed back unsent (`defer`) are no attempts: the lease token counts them
        attempt_no = lease.token - timer.deferrals
        due = retry_due_ms(
            timer.retry,
            attempt_no,
            now,
            timer.first_claimed_ms,
            retry_after_s,
            max_ahead_ms=self._max_ahead_ms,
        )
        if due is None:
            if record is not None:
                record = record._replace(outcome="dead")
            await self.kill(lease, f"gave up after attempt {attempt_no}: {error}", record)
        else:
            if record is not None:
                record = record._replace(next_due_ms=due)
            await self.retry_at(lease, due, error, record)

    async def kill(self, lease: Lease, error: str, attempt: Attempt | None = None) -> None:
        """Move the timer to the dead letters now, recording `attempt`."""
        error = truncate_error(error)
        try:
            killed = await self._settle(
                "kill", lambda: self._store.kill(lease, error, attempt), lease
            )
        except Exception:
            # nothing is left to fall back to: the timer fires again once the lease lapses
            logger.exception(
                "timer=%s could not be dead-lettered; it comes back when its lease lapses",
                lease.timer.id,
                extra={"timer_id": lease.timer.id},
            )
            return
        if killed:
            self._metrics.dead[lease.timer.queue] += 1
            self._metrics.change("dead", lease)
            logger.info(
                "timer=%s queue=%s attempt=%d dead-lettered: %s",
                lease.timer.id,
                lease.timer.queue,
                lease.timer.attempts_spent,
                error,
                extra={"timer_id": lease.timer.id},
            )

    async def retry_in(self, lease: Lease, delay_s: float, error: str) -> None:
        """Schedule the timer again `delay_s` from now (at most the store's horizon ahead),
        whatever its policy says."""
        delay_ms = min(round(delay_s * 1000), self._max_ahead_ms)
        await self.retry_at(lease, self._store.now_ms() + delay_ms, error)

    async def retry_at(
        self, lease: Lease, due_ms: int, error: str, attempt: Attempt | None = None
    ) -> None:
        """Schedule the timer again at `due_ms` (recording `attempt`); used for hand-backs,
        with no backoff."""
        error = truncate_error(error)
        if await self._or_kill(
            "retry",
            lambda: self._store.retry(lease, due_ms, error, attempt),
            lease,
            due_ms,
            error,
            attempt,
        ):
            self._metrics.retried[lease.timer.queue] += 1
            self._metrics.change("retried", lease)

    async def defer(self, lease: Lease, due_ms: int, reason: str) -> None:
        """Hand the timer back unsent, due at `due_ms`, without spending an attempt.

        For a callback that never went out: its turn under a limit is far off, its host asked
        to be left alone, no connection came free, its target hangs, or its worker is stopping.
        """
        done = asyncio.get_running_loop().create_future()
        self._defers.append((lease, due_ms, truncate_error(reason)))
        self._deferred.append(done)
        if self._defer_flusher is None or self._defer_flusher.done():
            self._defer_flusher = asyncio.create_task(self._flush_defers())
        if await done:
            self._metrics.deferred[lease.timer.queue] += 1

    async def _flush_defers(self) -> None:
        """Send the deferrals queued, `DEFER_BATCH` per store call, one call at a time: a
        flood handed back at once (a target that hangs) takes a few round trips, not one
        each, and no more than one store connection from the claims and acks of others."""
        while self._defers:
            batch, futures = self._defers[:DEFER_BATCH], self._deferred[:DEFER_BATCH]
            del self._defers[:DEFER_BATCH], self._deferred[:DEFER_BATCH]
            leases = [lease for lease, _, _ in batch]
            try:
                landed = await self._with_retries("defer", partial(self._defer_many, batch), leases)
            except _Lapsed:
                landed = [False] * len(batch)
            except Exception:
                # policy: one refused deferral must not fail the others: each alone, and
                # one the store refuses by itself is dead-lettered (`_or_kill`)
                alone = await asyncio.gather(*(self._defer_one(*item) for item in batch))
                for done, ok in zip(futures, alone, strict=True):
                    if not done.done():
                        done.set_result(ok)
                continue
            for (lease, _, _), done, ok in zip(batch, futures, landed, strict=True):
                if not ok:
                    self._metrics.leases_lost += 1
                    logger.info(
                        "timer=%s lease lost before defer; its new holder settles it",
                        lease.timer.id,
                        extra={"timer_id": lease.timer.id},
                    )
                if not done.done():
                    done.set_result(ok)

    async def _defer_many(self, batch: list[Deferral], _: list[Lease]) -> list[bool]:
        return await self._store.defer_many(batch)

    async def _defer_one(self, lease: Lease, due_ms: int, reason: str) -> bool:
        async with self._deferring:
            return await self._or_kill(
                "defer", lambda: self._store.defer(lease, due_ms, reason), lease, due_ms, reason
            )

    async def _or_kill(
        self,
        name: str,
        call: Callable[[], Awaitable[None]],
        lease: Lease,
        due_ms: int,
        error: str,
        attempt: Attempt | None = None,
    ) -> bool:
        """Settle by `call` (a retry or a deferral); whether it landed.

        One the store refuses (other than for an outage or a lost lease) dead-letters the timer
        with both errors: a timer that can be neither moved nor dropped would otherwise fire
        again each time its lease lapses.
        """
        try:
            return await self._settle(name, call, lease)
        except Exception as refused:
            logger.exception(
                "timer=%s could not be moved to %d (%s); dead-lettering it",
                lease.timer.id,
                due_ms,
                name,
                extra={"timer_id": lease.timer.id},
            )
            if attempt is not None:
                attempt = attempt._replace(outcome="dead", next_due_ms=None)
            reason = f"{name} refused ({type(refused).__name__}: {refused}): {error}"
            await self.kill(lease, reason, attempt)
            return False

    async def drain(self) -> None:
        """Wait until every queued ack, retry and kill has landed or lapsed."""

        def busy(flusher: asyncio.Task[None] | None) -> bool:
            return flusher is not None and not flusher.done()

        while self._background or busy(self._flusher) or busy(self._defer_flusher):
            if self._background:
                await asyncio.gather(*self._background)
            for flusher in (self._flusher, self._defer_flusher):
                if flusher is not None and not flusher.done():
                    await flusher

    async def _flush_acks(self) -> None:
        metrics = self._metrics
        loop = asyncio.get_running_loop()
        while self._acks:
            wait_s = self._last_flush + self._ack_every_s - loop.time()
            if wait_s > 0:
                await asyncio.sleep(wait_s)
            self._last_flush = loop.time()
            leases, futures, attempts = self._acks, self._acked, self._ack_attempts
            self._acks, self._acked, self._ack_attempts = [], [], []
            try:
                results = await self._with_retries("ack", partial(self._ack_many, attempts), leases)
            except _Lapsed:
                results = [False] * len(leases)
            except Exception:
                # policy: waiters hear that their acks did not land rather than wait forever,
                # and the acks queued meanwhile still go out
                metrics.store_errors["ack"] += 1
                logger.exception(
                    "acking %d timers failed; they come back when their leases lapse", len(leases)
                )
                for done in futures:
                    _tell(done, False)
                continue
            for lease, done, acked in zip(leases, futures, results, strict=True):
                if acked:
                    metrics.acked[lease.timer.queue] += 1
                    metrics.change("acked", lease)
                else:
                    metrics.leases_lost += 1
                    if done is None:
                        logger.info(
                            "timer=%s acked after its lease passed on; it is delivered again",
                            lease.timer.id,
                            extra={"timer_id": lease.timer.id},
                        )
                if done is not None:
                    _tell(done, acked)

    async def _ack_many(
        self, attempts: Sequence[Attempt | None], leases: list[Lease]
    ) -> list[bool]:
        if attempts:
            return await self._store.ack_many(leases, attempts)
        return await self._store.ack_many(leases)

    async def _settle(self, name: str, call: Callable[[], Awaitable[None]], lease: Lease) -> bool:
        try:
            await self._with_retries(name, lambda _: call(), [lease])
        except LeaseLost:
            self._metrics.leases_lost += 1
            logger.info(
                "timer=%s lease lost before %s; its new holder settles it",
                lease.timer.id,
                name,
                extra={"timer_id": lease.timer.id},
            )
            return False
        except _Lapsed:
            return False
        return True

    async def _with_retries(
        self, name: str, call: Callable[[list[Lease]], Awaitable[T]], leases: list[Lease]
    ) -> T:
        """Run `call(leases)`, retrying while the store is unavailable and a lease may hold."""
        failures = 0
        while True:
            try:
                return await call(leases)
            except StoreUnavailable as error:
                self._metrics.store_errors[name] += 1
                self._throttled.warning(
                    f"settle:{name}", "store unavailable for %s: %s", name, error
                )
                if self._store.now_ms() >= max(lease.deadline_ms for lease in leases):
                    # lapsed: the store hands the timers out again once it is back
                    raise _Lapsed from error
                failures += 1
                await jittered_pause(failures)


def _tell(done: Acked, acked: bool) -> None:
    """Tell whoever waits for an ack whether it landed."""
    if isinstance(done, asyncio.Future):
        if not done.done():
            done.set_result(acked)
    elif done is not None:
        done()


class _Lapsed(Exception):
    """The store stayed unavailable until the leases lapsed."""
