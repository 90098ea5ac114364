"""`consume`: a reliable delay queue for Python code: each timer is handed over on its due ms.

::

    async for delivery in consume(store, queue="emails"):
        await send(delivery.timer.payload)
        await delivery.ack()  # queued: acks go to the store in batches

At least once: a timer is delivered again if its settlement never lands (a crash before the
batch went out, a lease that lapsed), never lost. A queue's limit (`Store.set_queue_limit`)
holds deliveries as it holds a worker's callbacks: its rate spaces them, its concurrency
counts the deliveries not yet settled.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import deque
from collections.abc import AsyncIterator, Coroutine
from typing import Any

from tickwheel.engine.dispatch import Dispatcher
from tickwheel.engine.limiter import GO, Admission, Limiter, store_limiter
from tickwheel.engine.metrics import Metrics
from tickwheel.engine.settings import WorkerSettings
from tickwheel.engine.settle import Settler, Throttled
from tickwheel.errors import Closed, InvalidArgument, LeaseLost
from tickwheel.model import Timer
from tickwheel.stores import Lease, Store


class Delivery:
    """One due timer in a consumer's hands: settle it with exactly one of ack, retry or kill.

    Until it is settled its lease is renewed; if the consumer stops first, the timer goes back
    to the store and is delivered again (at least once).

    Settling returns once the settlement is queued: acks go to the store in batches, retries
    and kills in the background, so a loop that awaits each one does not wait for a round trip
    per timer. Ending the `consume` loop (break, close, cancel) waits for what was queued. A
    settlement that does not land because the lease had passed on is counted
    (`Metrics.leases_lost`) and logged, and the timer is delivered again; one lost to a crash
    before it landed is delivered again too: at least once, never lost. Pass ``confirm=True``
    to wait until it has landed (one round trip) and hear of a lost lease as `LeaseLost`;
    after the loop has ended every settlement is confirmed.
    """

    __slots__ = ("_admission", "_dispatcher", "_lease", "_limiter", "_settled", "_settler")

    def __init__(
        self,
        lease: Lease,
        dispatcher: Dispatcher,
        settler: Settler,
        limiter: Limiter,
        admission: Admission = GO,
    ) -> None:
        self._lease = lease
        self._dispatcher = dispatcher
        self._settler = settler
        self._limiter = limiter
        self._admission = admission
        self._settled = False

    @property
    def timer(self) -> Timer:
        return self._lease.timer

    @property
    def attempt(self) -> int:
        """1 for the first delivery, one more for each retry or lapsed lease (a hand-back
        under a limit is none)."""
        return self._lease.token - self._lease.timer.deferrals

    async def ack(self, *, confirm: bool = False) -> None:
        """Mark the timer done (queued; with `confirm`, landed).

        Raises:
            LeaseLost: with `confirm`, the lease lapsed and the timer went to another consumer.
        """
        lease = self._take()
        if not confirm and not self._dispatcher.stopping:
            self._settler.ack_later(lease)
            return
        if not await self._settler.ack(lease):
            raise LeaseLost(lease.timer.id, lease.token)

    async def retry(self, delay: float | None = None, *, confirm: bool = False) -> None:
        """Deliver it again after `delay` seconds, or after the timer's backoff when None."""
        if delay is not None and (
            isinstance(delay, bool) or not isinstance(delay, int | float) or not 0 <= delay < 1e9
        ):
            raise InvalidArgument("delay", f"must be a number of seconds >= 0, got {delay!r}")
        lease = self._take()
        reason = "retried by the consumer"
        if delay is None:
            await self._settle(self._settler.fail(lease, reason), confirm)
        else:
            await self._settle(self._settler.retry_in(lease, delay, reason), confirm)

    async def kill(self, reason: str, *, confirm: bool = False) -> None:
        """Move the timer to the dead letters with `reason`; `replay` brings it back."""
        await self._settle(self._settler.kill(self._take(), reason), confirm)

    async def _settle(self, settling: Coroutine[Any, Any, None], confirm: bool) -> None:
        if confirm or self._dispatcher.stopping:
            await settling
        else:
            self._settler.later(settling)

    def _take(self) -> Lease:
        """The current lease, no longer the dispatcher's to renew or hand back: settling it
        is this delivery's (the dispatcher's wind-down waits for queued settlements)."""
        if self._settled:
            raise Closed(f"delivery of timer {self._lease.timer.id} is already settled")
        self._settled = True
        self._limiter.release(self._admission)
        timer_id = self._lease.timer.id
        lease = self._dispatcher.lease(timer_id) or self._lease
        self._dispatcher.settled(timer_id)
        return lease

    def __repr__(self) -> str:
        return f"<Delivery timer={self.timer.id} attempt={self.attempt} queue={self.timer.queue}>"


async def consume(
    store: Store,
    queue: str = "default",
    *,
    settings: WorkerSettings | None = None,
    metrics: Metrics | None = None,
) -> AsyncIterator[Delivery]:
    """Yield each timer of `queue` on its due ms, for the caller to ack, retry or kill.

    Breaking out of the loop or cancelling the task stops claiming and hands back every timer
    not yet settled (wrap it in `contextlib.aclosing` to have that happen at once on break).
    """
    # settings for every queue (the default) mean this one queue here
    settings = WorkerSettings() if settings is None else settings
    if settings.queues is None:
        settings = dataclasses.replace(settings, queues=(queue,))
    if settings.queues != (queue,):
        raise InvalidArgument("settings.queues", f"must be ({queue!r},) for consume({queue!r})")
    metrics = metrics or Metrics()
    throttled = Throttled()
    settler = Settler(store, metrics, throttled)
    handover = _Handover()
    ready = handover.leases
    dispatcher = Dispatcher(
        store,
        settings,
        handover.put,
        settler=settler,
        metrics=metrics,
        throttled=throttled,
        abandon=lambda: None,
    )
    limiter = store_limiter(store, dispatcher.controls, metrics)
    running = asyncio.create_task(dispatcher.run())
    try:
        while True:
            if not ready:
                await handover.wait(running)
                if not ready:
                    await running  # the dispatcher failed: raise its error
                    return
            lease = ready.popleft()
            timer = lease.timer
            if dispatcher.lease(timer.id) is None:
                continue  # its lease lapsed while it waited
            admission = GO
            keys = limiter.queue_targets(queue)
            if keys:
                admission = await limiter.admit(timer, keys)
                if admission.defer_ms is not None:
                    _send_back(lease, admission.defer_ms, dispatcher, settler)
                    continue
                if dispatcher.lease(timer.id) is None:
                    limiter.release(admission)
                    continue
            metrics.observe_fired(queue, (store.now_ms() - timer.due_ms) / 1000)
            yield Delivery(lease, dispatcher, settler, limiter, admission)
    finally:
        # nobody will settle what is still held: hand it back now rather than after a grace
        dispatcher.stop(grace=False)
        await asyncio.shield(running)
        await limiter.close()


def _send_back(lease: Lease, due_ms: int, dispatcher: Dispatcher, settler: Settler) -> None:
    """Return a timer whose turn under its queue's limit is far off to the store, due then."""
    timer_id = lease.timer.id
    lease = dispatcher.lease(timer_id) or lease
    dispatcher.settled(timer_id)
    settler.later(settler.defer(lease, due_ms, "waiting for its turn under a limit"))


class _Handover:
    """Leases the dispatcher hands over on their due ms, for the consumer's loop to take.

    A burst arrives as a batch per due ms, taken one by one without a future per lease.
    """

    def __init__(self) -> None:
        self.leases: deque[Lease] = deque()
        self._arrived: asyncio.Future[None] | None = None

    def put(self, leases: list[Lease]) -> None:
        """Queue the leases due now and wake the consumer's loop if it waits."""
        self.leases.extend(leases)
        if self._arrived is not None and not self._arrived.done():
            self._arrived.set_result(None)

    async def wait(self, running: asyncio.Task[None]) -> None:
        """Wait until leases arrive or the dispatcher's `running` task ends."""
        self._arrived = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait({self._arrived, running}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._arrived.cancel()
            self._arrived = None
