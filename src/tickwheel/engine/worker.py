"""The worker: fire each claimed timer through a `Target` on its due ms and settle the outcome."""

from __future__ import annotations

import asyncio
import logging

from tickwheel.engine.dispatch import Dispatcher
from tickwheel.engine.metrics import Metrics
from tickwheel.engine.outcome import Outcome, Target, Verdict
from tickwheel.engine.settings import WorkerSettings
from tickwheel.engine.settle import Settler, Throttled
from tickwheel.errors import LeaseLost, StoreUnavailable
from tickwheel.stores import Lease, Store

logger = logging.getLogger("tickwheel.engine")

# a callback must end this long before its lease does, or the lease is extended first
LEASE_MARGIN_MS = 1_000
# a fired timer's ack waits up to this long to share a store call with others; nothing awaits
# it but the timer's own task, and a crash meanwhile only fires the timer again (at least once)
ACK_EVERY_S = 0.005
NO_CALLBACK = Outcome(Verdict.KILL, "timer has no callback: consume its queue from Python instead")


class Worker:
    """Claims due timers of `settings.queues` from `store` and fires them through `target`.

    Delivery is at least once: a worker that dies loses its leases, and the timers fire again
    elsewhere once the leases lapse. `run` returns after `stop`, having handed back what it held.
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
        self._throttled = Throttled()
        self._settler = Settler(store, self.metrics, self._throttled, ack_every_s=ACK_EVERY_S)
        self._firing: set[asyncio.Task[None]] = set()
        self._slots: asyncio.Semaphore | None = None
        self._dispatcher = Dispatcher(
            store,
            self.settings,
            self._deliver,
            settler=self._settler,
            metrics=self.metrics,
            throttled=self._throttled,
            abandon=self._abandon,
        )

    def stop(self) -> None:
        """Stop claiming; `run` returns once held timers are fired or handed back."""
        self._dispatcher.stop()

    async def run(self) -> None:
        """Fire timers until `stop` or cancellation."""
        self._slots = asyncio.Semaphore(self.settings.concurrency)
        await self._dispatcher.run()

    def _deliver(self, leases: list[Lease]) -> None:
        for lease in leases:
            task = asyncio.create_task(self._fire(lease.timer.id))
            self._firing.add(task)
            task.add_done_callback(self._firing.discard)

    def _abandon(self) -> None:
        for task in self._firing:
            task.cancel()

    async def _fire(self, timer_id: str) -> None:
        assert self._slots is not None
        settled = True
        try:
            async with self._slots:
                lease = await self._lease_for_attempt(timer_id)
                if lease is None:
                    return
                timer = lease.timer
                late_s = (self._store.now_ms() - timer.due_ms) / 1000
                self.metrics.observe_fired(timer.queue, late_s)
                if timer.callback is None:
                    outcome = NO_CALLBACK
                else:
                    outcome = await self._target.fire(timer, lease.token)
            await self._settle(lease, outcome)
        except asyncio.CancelledError:
            settled = (
                False  # abandoned at the end of the grace period: the dispatcher hands it back
            )
            raise
        finally:
            if settled:
                self._dispatcher.settled(timer_id)

    async def _lease_for_attempt(self, timer_id: str) -> Lease | None:
        """Return a lease that outlasts the callback's timeout, extending it if needed."""
        lease = self._dispatcher.lease(timer_id)
        if lease is None:
            return None
        need_ms = self._store.now_ms() + round(lease.timer.retry.timeout_s * 1000) + LEASE_MARGIN_MS
        if lease.deadline_ms >= need_ms:
            return lease
        try:
            return await self._store.extend(
                lease, max(self.settings.lease_ms, need_ms - self._store.now_ms())
            )
        except (LeaseLost, StoreUnavailable) as error:
            # not firing is safe: the timer comes back to a worker when its lease lapses
            self._throttled.warning(
                "extend", "timer=%s not fired: its lease could not be extended: %s", timer_id, error
            )
            return None

    async def _settle(self, lease: Lease, outcome: Outcome) -> None:
        if outcome.verdict is Verdict.ACK:
            await self._settler.ack(lease)
        elif outcome.verdict is Verdict.RETRY:
            await self._settler.fail(lease, outcome.error or "failed", outcome.retry_after_s)
        else:
            await self._settler.kill(lease, outcome.error or "failed")
