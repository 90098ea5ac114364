"""`consume`: a reliable delay queue for Python code: each timer is handed over on its due ms.

::

    async for delivery in consume(store, queue="emails"):
        await send(delivery.timer.payload)
        await delivery.ack()  # queued: acks go to the store in batches

At least once: a timer is delivered again if its settlement never lands (a crash before the
batch went out, a lease that lapsed), never lost. A queue's limit (`Store.set_queue_limit`)
holds deliveries as it holds a worker's callbacks: its rate spaces them, its concurrency
counts the deliveries not yet settled. A consumer holds about a second of its own work at the
pace it settles deliveries (`Pace`), at least a worker's room: the rest of a backlog waits in
the store for the queue's other consumers.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import deque
from collections.abc import AsyncIterator, Coroutine
from typing import Any

from tickwheel.engine.assembly import Assembly
from tickwheel.engine.held import Held
from tickwheel.engine.limiter import GO, Admission
from tickwheel.engine.metrics import Metrics
from tickwheel.engine.pace import Pace
from tickwheel.engine.settings import WorkerSettings
from tickwheel.errors import Closed, InvalidArgument, LeaseLost
from tickwheel.model import Timer
from tickwheel.stores import Store

YIELD_EVERY = 256
"""Deliveries of a backlog after which the loop lets the event loop's other tasks run: about a
millisecond of a fast loop, and one loop turn among them costs nothing measurable."""


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

    __slots__ = ("_admission", "_handed_at", "_held", "_pace", "_parts", "_settled")

    def __init__(self, held: Held, parts: Assembly, pace: Pace, admission: Admission = GO) -> None:
        self._held = held
        self._parts = parts
        self._pace = pace
        self._handed_at = pace.handed()
        self._admission = admission
        self._settled = False

    @property
    def timer(self) -> Timer:
        return self._held.lease.timer

    @property
    def attempt(self) -> int:
        """1 for the first delivery, one more for each retry or lapsed lease (a hand-back
        under a limit is none)."""
        lease = self._held.lease
        return lease.token - lease.timer.deferrals

    async def ack(self, *, confirm: bool = False) -> None:
        """Mark the timer done (queued; with `confirm`, landed).

        Raises:
            LeaseLost: with `confirm`, the lease lapsed and the timer went to another consumer.
        """
        held = self._take()
        if not confirm and not self._parts.dispatcher.stopping:
            held.ack_later()
            return
        if not await held.ack():
            raise LeaseLost(held.timer.id, held.lease.token)

    async def retry(self, delay: float | None = None, *, confirm: bool = False) -> None:
        """Deliver it again after `delay` seconds, or after the timer's backoff when None."""
        if delay is not None and (
            isinstance(delay, bool) or not isinstance(delay, int | float) or not 0 <= delay < 1e9
        ):
            raise InvalidArgument("delay", f"must be a number of seconds >= 0, got {delay!r}")
        held = self._take()
        reason = "retried by the consumer"
        if delay is None:
            await self._settle(held.fail(reason), confirm)
        else:
            await self._settle(held.retry_in(delay, reason), confirm)

    async def kill(self, reason: str, *, confirm: bool = False) -> None:
        """Move the timer to the dead letters with `reason`; `replay` brings it back."""
        await self._settle(self._take().kill(reason), confirm)

    async def _settle(self, settling: Coroutine[Any, Any, None], confirm: bool) -> None:
        if confirm or self._parts.dispatcher.stopping:
            await settling
        else:
            self._parts.settler.later(settling)

    def _take(self) -> Held:
        """The held timer, released: no longer the dispatcher's to renew or hand back, its
        lease as last renewed is this delivery's to settle (the dispatcher's wind-down waits
        for queued settlements)."""
        held = self._held
        if self._settled:
            raise Closed(f"delivery of timer {held.timer.id} is already settled")
        self._settled = True
        if self._admission is not GO:  # GO holds no concurrency
            self._parts.limiter.release(self._admission)
        held.release()
        per_s = self._pace.settled(self._handed_at)
        if per_s is not None:
            self._parts.dispatcher.paced(per_s)
        return held

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
    handover = _Handover()
    ready = handover.timers
    parts = Assembly(store, settings, handover.put, metrics=metrics)
    limiter, observe_fired, now_ms = parts.limiter, parts.metrics.observe_fired, store.now_ms
    pace = Pace()
    handed = 0
    running = asyncio.create_task(parts.run())
    try:
        while True:
            if not ready:
                await handover.wait(running)
                if not ready:
                    await running  # the dispatcher failed: raise its error
                    return
            held = ready.popleft()
            if not held.active:
                continue  # its lease lapsed while it waited
            timer = held.lease.timer
            admission = GO
            keys = limiter.queue_targets(queue)
            if keys:
                admission = await limiter.admit(timer, keys)
                if admission.defer_ms is not None:
                    # its turn is far off: back to the store, due then
                    held.release()
                    parts.settler.later(
                        held.defer(admission.defer_ms, "waiting for its turn under a limit")
                    )
                    continue
                if held.lapsed():
                    limiter.release(admission)
                    continue
            observe_fired(queue, (now_ms() - timer.due_ms) / 1000)
            yield Delivery(held, parts, pace, admission)
            handed += 1
            if not handed % YIELD_EVERY:
                # a loop that never waits for a delivery would hold back its queued acks and
                # its next claims until the backlog ends: they go out as it goes on
                await asyncio.sleep(0)
    finally:
        # nobody will settle what is still held: hand it back now rather than after a grace
        parts.stop(grace=False)
        await asyncio.shield(running)


class _Handover:
    """Held timers the dispatcher hands over on their due ms, for the consumer's loop to take.

    A burst arrives as a batch per due ms, taken one by one without a future per timer.
    """

    def __init__(self) -> None:
        self.timers: deque[Held] = deque()
        self._arrived: asyncio.Future[None] | None = None

    def put(self, timers: list[Held]) -> None:
        """Queue the timers due now and wake the consumer's loop if it waits."""
        self.timers.extend(timers)
        if self._arrived is not None and not self._arrived.done():
            self._arrived.set_result(None)

    async def wait(self, running: asyncio.Task[None]) -> None:
        """Wait until timers arrive or the dispatcher's `running` task ends."""
        self._arrived = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait({self._arrived, running}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._arrived.cancel()
            self._arrived = None
