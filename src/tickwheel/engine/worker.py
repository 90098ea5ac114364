"""The worker: fire each claimed timer through a `Target` on its due ms and settle the outcome."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Coroutine
from typing import Any

from tickwheel.engine.assembly import Assembly
from tickwheel.engine.attempt_log import attempt_of, records_attempts, worker_name
from tickwheel.engine.fairness import Fairness
from tickwheel.engine.held import Held
from tickwheel.engine.limiter import GO, Admission, host_key
from tickwheel.engine.metrics import Metrics
from tickwheel.engine.outcome import (
    TARGET_HANGS,
    GuardedTarget,
    NotFired,
    Outcome,
    Target,
    Verdict,
)
from tickwheel.engine.settings import WorkerSettings
from tickwheel.engine.tracing import spans
from tickwheel.errors import LeaseLost, StoreUnavailable
from tickwheel.model import Timer
from tickwheel.stores import Lease, Store
from tickwheel.stores.attempt_record import Attempt

logger = logging.getLogger("tickwheel.engine")

# a fired timer's ack waits up to this long to share a store call with others; nothing awaits
# it but the timer's own task, and a crash meanwhile only fires the timer again (at least once)
ACK_EVERY_S = 0.005
NO_CALLBACK = Outcome(
    Verdict.KILL,
    "timer has no callback: consume its queue from Python instead",
    error_class="no_callback",
)
ANSWERED_WITHIN = 0.95
"""A call back within this share of its timeout was answered (else it timed out)."""
UNPROVEN_PER_TURN = 32
"""Callbacks to targets not known to answer started per turn of the loop: a flood of them due
at one ms (a thousand new queues' probes) leaves the loop free between turns for timers to
prompt targets, which start at once."""
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
    by every worker of the store when the store keeps them (`Store.limit_grants`), else this
    worker's.
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
        parts = Assembly(
            store,
            self.settings,
            self._deliver,
            metrics=metrics,
            ack_every_s=ACK_EVERY_S,
            abandon=self._abandon,
        )
        self.metrics = parts.metrics
        self._parts = parts
        self._dispatcher = parts.dispatcher
        self._limiter = parts.limiter
        self._throttled = parts.throttled
        self._store = store
        self._target = target
        # a runtime Protocol check costs microseconds: once, not per callback
        self._guarded = target if isinstance(target, GuardedTarget) else None
        self._firing: set[asyncio.Task[None]] = set()
        # callbacks due whose targets are not known to answer, started a few a loop turn
        self._unproven: deque[tuple[Held, str]] = deque()
        self._pacing = False
        self._slots = Fairness(self.settings.concurrency)
        # each callback's attempt goes to its timer's history, if the store keeps one
        self._worker_name = worker_name() if records_attempts(store) else None
        self._spans = spans()
        self._half_lease_ms = self.settings.lease_ms // 2
        self._loop: asyncio.AbstractEventLoop | None = None

    def stop(self) -> None:
        """Stop claiming; `run` returns once held timers are fired or handed back."""
        self._parts.stop()

    async def run(self) -> None:
        """Fire timers until `stop` or cancellation."""
        await self._parts.run()

    def _deliver(self, ready: list[Held]) -> None:
        if self._spans is not None:
            self._spans.claimed([held.lease for held in ready])
        # the loop's own create_task: asyncio.create_task looks the running loop up per call
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        answering, unproven = self._slots.answering, self._unproven
        for held in ready:
            origin = _origin(held.timer)
            if answering(origin):
                self._start(loop, held, origin)
            else:
                unproven.append((held, origin))
        if unproven and not self._pacing:
            self._pacing = True
            loop.call_soon(self._start_unproven, loop)

    def _start(self, loop: asyncio.AbstractEventLoop, held: Held, origin: str) -> None:
        task = loop.create_task(self._fire(held, origin))
        self._firing.add(task)
        task.add_done_callback(self._firing.discard)

    def _start_unproven(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start the next `UNPROVEN_PER_TURN` callbacks to targets not known to answer."""
        unproven = self._unproven
        for _ in range(min(len(unproven), UNPROVEN_PER_TURN)):
            self._start(loop, *unproven.popleft())
        if unproven:
            loop.call_soon(self._start_unproven, loop)
        else:
            self._pacing = False

    def _abandon(self) -> None:
        self._unproven.clear()  # never started: the dispatcher hands them back with the rest
        for task in self._firing:
            task.cancel()

    async def _fire(self, held: Held, origin: str) -> None:
        release = True  # the timer is released here when done (else by whoever settles it)
        admission = GO
        limiter = self._limiter
        try:
            if not held.active:
                return  # lost while it waited for its task
            timer = held.timer
            slots = self._slots
            keys = limiter.targets(timer)
            if keys:
                granted = await self._granted(held, keys, origin)
                if granted is None:
                    return
                admission = granted
            # a slot free now is taken without a coroutine; only a wait needs one
            elif not slots.take_now(origin) and not await slots.wait_take(
                origin, SUSPECT_PATIENCE_S
            ):
                await self._wait_in_store(held, origin)
                return
            started, answered = slots.started(), False
            try:
                sent_ms = self._store.now_ms()
                if held.lapsed():  # lost while it waited for a grant or a slot
                    return
                if held.lease.deadline_ms - sent_ms < self._half_lease_ms:
                    if not await self._renewed(held):
                        return
                    sent_ms = self._store.now_ms()
                lease = held.lease
                metrics = self.metrics
                metrics.observe_fired(timer.queue, (sent_ms - timer.due_ms) / 1000)
                metrics.change("fired", lease)
                try:
                    sent_s = time.perf_counter()
                    if timer.callback is None:
                        outcome = NO_CALLBACK
                    else:
                        # the target's coroutine awaited here, not in one more of our own
                        try:
                            outcome = await self._attempt(held)
                        except NotFired:
                            raise
                        except Exception as error:
                            outcome = self._raised(lease, error)
                    latency_s = time.perf_counter() - sent_s
                    # a call that ran out its timeout got no answer: its target may hang
                    took_s = slots.started() - started
                    answered = (
                        outcome.verdict is not Verdict.DEFER
                        and took_s < timer.retry.timeout_s * ANSWERED_WITHIN
                    )
                except NotFired:
                    # its lease ran out while it waited to be sent: whoever claims the timer
                    # now fires it, and this worker settles nothing
                    self.metrics.leases_lost += 1
                    self._throttled.warning(
                        "not-fired", "timer=%s not fired: its lease ran out first", timer.id
                    )
                    return
            finally:
                slots.give(origin, started, answered=answered)
            if answered:
                self._dispatcher.hung(timer.queue, False)
            elif outcome.verdict is Verdict.DEFER:
                # no connection came free for it: its address is full of calls that hang
                self._dispatcher.hung(timer.queue, True)
            if admission is not GO:
                limiter.release(admission)
                admission = GO
            if timer.callback is not None:
                self._count(timer, origin, outcome)
            attempt = None
            if self._worker_name is not None:
                attempt = attempt_of(lease, outcome, sent_ms, latency_s, self._worker_name)
            # settles with the newest lease: renewals replace it while the callback runs
            if outcome.verdict is Verdict.ACK and not self._traced():
                # the common case: the settler releases the timer once its ack has landed,
                # and this task ends here instead of waking once more for it
                release = False
                held.ack_release(attempt)
            else:
                await self._settle(held, outcome, attempt)
        except asyncio.CancelledError:
            # abandoned at the end of the grace period: the dispatcher hands it back
            release = False
            raise
        finally:
            if admission is not GO:
                limiter.release(admission)
            if release:
                held.release()

    async def _granted(self, held: Held, keys: tuple[str, ...], origin: str) -> Admission | None:
        """Wait for a limited callback's grant and its slot, to send it at once; None when it
        went back to the store instead.

        A grant is for a call sent now: one that waited for a slot (behind a new origin's first
        call, say) would go out in a bunch with those granted meanwhile, past the limit. So the
        callback waits for a slot free for it first, then for its grant, then takes the slot.
        If a slot it found free was taken meanwhile (every slot busy), it waits for the next
        in turn with its grant, as a callback without a limit would: not a token lost and the
        wait again, which a busy worker's other callbacks would win every time.
        """
        slots, timer = self._slots, held.timer
        if not slots.free_now(origin) and not await slots.wait_free(origin, SUSPECT_PATIENCE_S):
            await self._wait_in_store(held, origin)
            return None
        admission = await self._limiter.admit(timer, keys)
        if admission.defer_ms is not None:
            await held.defer(admission.defer_ms, "waiting for its turn under a limit")
            return None
        try:
            if slots.take_now(origin, in_turn=True) or await slots.take(origin, SUSPECT_PATIENCE_S):
                return admission
        except asyncio.CancelledError:
            self._limiter.release(admission)  # not the caller's yet to give back
            raise
        self._limiter.release(admission)
        await self._wait_in_store(held, origin)
        return None

    async def _wait_in_store(self, held: Held, origin: str) -> None:
        """Send `held` back to the store: its target has hung lately, and it should wait there,
        not in a slot or in memory."""
        timer = held.timer
        self._dispatcher.hung(timer.queue, True)
        back_ms = self._slots.come_back_ms(origin, timer.queue, self._store.now_ms())
        await held.defer(back_ms, TARGET_HANGS)

    def _traced(self) -> bool:
        """Whether settles are recorded as spans (an OpenTelemetry provider is configured)."""
        return self._spans is not None and self._spans.configured()

    def _count(self, timer: Timer, origin: str, outcome: Outcome) -> None:
        """Count the callback by host and outcome; a host's Retry-After holds its callbacks."""
        self.metrics.callbacks.count(origin or "invalid", outcome.verdict._value_)
        if outcome.hold_s is not None:
            self._limiter.hold(timer, outcome.hold_s)

    def _attempt(self, held: Held) -> Coroutine[Any, Any, Outcome]:
        """The target's attempt at the timer: a guarded target sends only while the worker
        still holds the lease (else it raises `NotFired`)."""
        lease = held.lease
        # the attempt the receiver sees: claims handed back unsent were no attempts
        attempt = lease.token - lease.timer.deferrals
        if self._guarded is not None:
            return self._guarded.fire_guarded(lease.timer, attempt, held.sendable)
        return self._target.fire(lease.timer, attempt)

    @staticmethod
    def _raised(lease: Lease, error: Exception) -> Outcome:
        """The outcome of an attempt whose target raised `error`: a retry that records it."""
        # policy: an escaped exception is a failed attempt like any other, so the timer's
        # retry policy runs its course (ending in a dead letter) instead of the timer
        # firing again each time its lease lapses
        logger.exception(
            "timer=%s attempt=%d: the target raised",
            lease.timer.id,
            lease.token,
            extra={"timer_id": lease.timer.id},
            exc_info=error,
        )
        name = type(error).__name__
        return Outcome(Verdict.RETRY, f"{name}: {error}", error_class=name)

    async def _renewed(self, held: Held) -> bool:
        """Renew a held lease that will not last until the dispatcher next renews it; whether
        it may be fired.

        A lease is never stretched to cover the callback's timeout: the dispatcher renews it
        by `lease_ms` steps for as long as the callback runs, so a worker that dies mid-call
        lets the timer go within one `lease_ms`. A lease that ran short while the timer
        waited for a slot (under half of `lease_ms` left) is renewed here first, and the
        timer is not fired if that fails.
        """
        timer_id = held.timer.id
        try:
            await held.renew()
            return True
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
        return False

    async def _settle(self, held: Held, outcome: Outcome, attempt: Attempt | None) -> None:
        if self._spans is None:
            await self._settle_as(held, outcome, attempt)
            return
        start_ns = time.time_ns()
        await self._settle_as(held, outcome, attempt)
        self._spans.settled(held.timer, outcome.verdict._value_, start_ns)

    async def _settle_as(self, held: Held, outcome: Outcome, attempt: Attempt | None) -> None:
        if outcome.verdict is Verdict.ACK:
            await held.ack(attempt)
        elif outcome.verdict is Verdict.RETRY:
            await held.fail(outcome.error or "failed", outcome.retry_after_s, attempt)
        elif outcome.verdict is Verdict.DEFER:
            delay_ms = round((outcome.retry_after_s or 0.0) * 1000)
            due_ms = self._store.now_ms() + delay_ms
            await held.defer(due_ms, outcome.error or "not sent")
        else:
            await held.kill(outcome.error or "failed", attempt)
