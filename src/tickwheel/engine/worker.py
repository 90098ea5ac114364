"""The worker: fire each claimed timer through a `Target` on its due ms and settle the outcome."""

from __future__ import annotations

import asyncio
import logging
import time

from tickwheel.engine.attempt_log import attempt_of, records_attempts, worker_name
from tickwheel.engine.dispatch import Dispatcher
from tickwheel.engine.fairness import Fairness
from tickwheel.engine.limiter import GO, host_key, store_limiter
from tickwheel.engine.metrics import Metrics
from tickwheel.engine.outcome import GuardedTarget, NotFired, Outcome, Target, Verdict
from tickwheel.engine.settings import WorkerSettings
from tickwheel.engine.settle import Settler, Throttled
from tickwheel.engine.tracing import spans
from tickwheel.errors import LeaseLost, StoreUnavailable
from tickwheel.model import Timer
from tickwheel.stores import Lease, Store
from tickwheel.stores.attempt_record import Attempt

logger = logging.getLogger("tickwheel.engine")

# a fired timer's ack waits up to this long to share a store call with others; nothing awaits
# it but the timer's own task, and a crash meanwhile only fires the timer again (at least once)
ACK_EVERY_S = 0.005
SEND_MARGIN_MS = 100
"""A request goes out only while the lease lasts this much longer: what the store's clock may
be ahead of this process's view of it, and the time to write the request."""
NO_CALLBACK = Outcome(
    Verdict.KILL,
    "timer has no callback: consume its queue from Python instead",
    error_class="no_callback",
)
ANSWERED_WITHIN = 0.95
"""A call back within this share of its timeout was answered (else it timed out)."""
SUSPECT_PATIENCE_S = 0.5
"""Longest a callback to a target that has hung lately waits for a slot in the worker before it
goes back to the store for a while (`Fairness.come_back_ms`)."""


def _origin(timer: Timer) -> str:
    """The key `Fairness` shares slots by: the callback's ``host[:port]``."""
    if timer.callback is None:
        return ""
    return host_key(timer.callback) or ""


class Worker:
    """Claims due timers of `settings.queues` (every queue if None) from `store` and fires them
    through `target`.

    Delivery is at least once: a worker that dies loses its leases, and the timers fire again
    elsewhere once the leases lapse. `run` returns after `stop`, having handed back what it held.

    A callback to a host or a queue with a `Limit` first waits for its grant (`Limiter`), shared
    by every worker of the store when the store offers it (`SharesGrants`), else this worker's.
    A 429 or 503 with ``Retry-After`` holds every callback of this worker to that host. A
    callback handed back unsent (a far turn under a limit, a hold, no free connection) goes
    back to the store with `Settler.defer`, spending no attempt.
    """

    def __init__(
        self,
        store: Store,
        target: Target,
        settings: WorkerSettings | None = None,
        *,
        metrics: Metrics | None = None,
    ) -> None:
        self.settings = settings or WorkerSettings()
        self.metrics = metrics or Metrics()
        self._store = store
        self._target = target
        # a runtime Protocol check costs microseconds: once, not per callback
        self._guarded = target if isinstance(target, GuardedTarget) else None
        self._throttled = Throttled()
        self._settler = Settler(store, self.metrics, self._throttled, ack_every_s=ACK_EVERY_S)
        self._firing: set[asyncio.Task[None]] = set()
        self._slots = Fairness(self.settings.concurrency)
        self._dispatcher = Dispatcher(
            store,
            self.settings,
            self._deliver,
            settler=self._settler,
            metrics=self.metrics,
            throttled=self._throttled,
            abandon=self._abandon,
        )
        self._limiter = store_limiter(store, self._dispatcher.controls, self.metrics)
        # each callback's attempt goes to its timer's history, if the store keeps one
        self._worker_name = worker_name() if records_attempts(store) else None
        self._spans = spans()

    def stop(self) -> None:
        """Stop claiming; `run` returns once held timers are fired or handed back."""
        self._dispatcher.stop()
        self._limiter.send_back_all()

    async def run(self) -> None:
        """Fire timers until `stop` or cancellation."""
        try:
            await self._dispatcher.run()
        finally:
            await self._limiter.close()

    def _deliver(self, leases: list[Lease]) -> None:
        if self._spans is not None:
            self._spans.claimed(leases)
        for lease in leases:
            task = asyncio.create_task(self._fire(lease.timer.id))
            self._firing.add(task)
            task.add_done_callback(self._firing.discard)

    def _abandon(self) -> None:
        for task in self._firing:
            task.cancel()

    async def _fire(self, timer_id: str) -> None:
        settled = True
        admission = GO
        try:
            lease = self._dispatcher.lease(timer_id)
            if lease is None:
                return
            keys = self._limiter.targets(lease.timer)
            if keys:
                admission = await self._limiter.admit(lease.timer, keys)
                if admission.defer_ms is not None:
                    await self._settler.defer(
                        lease, admission.defer_ms, "waiting for its turn under a limit"
                    )
                    return
            origin = _origin(lease.timer)
            if not await self._slots.take(origin, SUSPECT_PATIENCE_S):
                # its target has hung lately: wait in the store, not in a slot or in memory
                self._dispatcher.hung(lease.timer.queue, True)
                back_ms = self._slots.come_back_ms(origin, lease.timer.queue, self._store.now_ms())
                await self._settler.defer(lease, back_ms, "waiting: its target has not answered")
                return
            started, answered = self._slots.started(), False
            try:
                lease = await self._lease_for_attempt(timer_id)
                if lease is None:
                    return
                timer = lease.timer
                sent_ms = self._store.now_ms()
                self.metrics.observe_fired(timer.queue, (sent_ms - timer.due_ms) / 1000)
                self.metrics.change("fired", lease)
                try:
                    sent_s = time.perf_counter()
                    outcome = NO_CALLBACK if timer.callback is None else await self._attempt(lease)
                    latency_s = time.perf_counter() - sent_s
                    # a call that ran out its timeout got no answer: its target may hang
                    took_s = self._slots.started() - started
                    answered = (
                        outcome.verdict is not Verdict.DEFER
                        and took_s < timer.retry.timeout_s * ANSWERED_WITHIN
                    )
                except NotFired:
                    # its lease ran out while it waited to be sent: whoever claims the timer
                    # now fires it, and this worker settles nothing
                    self.metrics.leases_lost += 1
                    self._throttled.warning(
                        "not-fired", "timer=%s not fired: its lease ran out first", timer_id
                    )
                    return
            finally:
                self._slots.give(origin, started, answered=answered)
            if answered:
                self._dispatcher.hung(timer.queue, False)
            self._limiter.release(admission)
            admission = GO
            if timer.callback is not None:
                self._count(timer, outcome)
            attempt = None
            if self._worker_name is not None:
                attempt = attempt_of(lease, outcome, sent_ms, latency_s, self._worker_name)
            # the dispatcher renewed the lease while the callback ran: settle with the newest
            await self._settle(self._dispatcher.lease(timer_id) or lease, outcome, attempt)
        except asyncio.CancelledError:
            settled = (
                False  # abandoned at the end of the grace period: the dispatcher hands it back
            )
            raise
        finally:
            self._limiter.release(admission)
            if settled:
                self._dispatcher.settled(timer_id)

    def _count(self, timer: Timer, outcome: Outcome) -> None:
        """Count the callback by host and outcome; a host's Retry-After holds its callbacks."""
        assert timer.callback is not None
        host = host_key(timer.callback) or "invalid"
        self.metrics.callbacks.count(host, outcome.verdict.value)
        if outcome.hold_s is not None:
            self._limiter.hold(timer, outcome.hold_s)

    async def _attempt(self, lease: Lease) -> Outcome:
        """Fire the timer; whatever the target raises becomes a retry that records it, but
        `NotFired`: a guarded target sends only while the worker still holds the lease."""
        timer_id = lease.timer.id
        # the attempt the receiver sees: claims handed back unsent were no attempts
        attempt = lease.token - lease.timer.deferrals
        try:
            if self._guarded is not None:
                return await self._guarded.fire_guarded(
                    lease.timer, attempt, lambda: self._still_held(timer_id)
                )
            return await self._target.fire(lease.timer, attempt)
        except NotFired:
            raise
        except Exception as error:
            # policy: an escaped exception is a failed attempt like any other, so the timer's
            # retry policy runs its course (ending in a dead letter) instead of the timer
            # firing again each time its lease lapses
            logger.exception(
                "timer=%s attempt=%d: the target raised",
                lease.timer.id,
                lease.token,
                extra={"timer_id": lease.timer.id},
            )
            name = type(error).__name__
            return Outcome(Verdict.RETRY, f"{name}: {error}", error_class=name)

    def _still_held(self, timer_id: str) -> bool:
        """Whether the newest lease on the timer lasts a margin beyond now, by the store's
        clock (a process stopped past it finds its clock moved on when it runs again)."""
        lease = self._dispatcher.lease(timer_id)
        return lease is not None and lease.deadline_ms - self._store.now_ms() > SEND_MARGIN_MS

    async def _lease_for_attempt(self, timer_id: str) -> Lease | None:
        """Return the held lease if it will last until the dispatcher next renews it.

        A lease is never stretched to cover the callback's timeout: the dispatcher renews it
        by `lease_ms` steps for as long as the callback runs, so a worker that dies mid-call
        lets the timer go within one `lease_ms`. A lease that ran short while the timer
        waited for a slot is renewed here first, and the timer is not fired if that fails.
        """
        lease = self._dispatcher.lease(timer_id)
        if lease is None:
            return None
        lease_ms = self.settings.lease_ms
        if lease.deadline_ms - self._store.now_ms() >= lease_ms // 2:
            return lease
        try:
            return await self._dispatcher.renew(lease)
        except (LeaseLost, StoreUnavailable) as error:
            # not firing is safe: the timer comes back to a worker when its lease lapses
            self._throttled.warning(
                "extend", "timer=%s not fired: its lease could not be renewed: %s", timer_id, error
            )
        except Exception:
            logger.exception(
                "timer=%s not fired: renewing its lease failed",
                timer_id,
                extra={"timer_id": timer_id},
            )
        return None

    async def _settle(self, lease: Lease, outcome: Outcome, attempt: Attempt | None) -> None:
        if self._spans is None:
            await self._settle_as(lease, outcome, attempt)
            return
        start_ns = time.time_ns()
        await self._settle_as(lease, outcome, attempt)
        self._spans.settled(lease.timer, outcome.verdict.value, start_ns)

    async def _settle_as(self, lease: Lease, outcome: Outcome, attempt: Attempt | None) -> None:
        if outcome.verdict is Verdict.ACK:
            await self._settler.ack(lease, attempt)
        elif outcome.verdict is Verdict.RETRY:
            await self._settler.fail(
                lease, outcome.error or "failed", outcome.retry_after_s, attempt
            )
        elif outcome.verdict is Verdict.DEFER:
            delay_ms = round((outcome.retry_after_s or 0.0) * 1000)
            due_ms = self._store.now_ms() + delay_ms
            await self._settler.defer(lease, due_ms, outcome.error or "not sent")
        else:
            await self._settler.kill(lease, outcome.error or "failed", attempt)
