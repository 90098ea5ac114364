"""Claiming and settling the timers of a `MemoryStore`: claim, extend, ack, retry, defer and kill,
and the due-queue reads a worker claims by."""

from __future__ import annotations

from collections.abc import Coroutine, Iterable, Sequence
from itertools import repeat
from typing import Any

from tickwheel.errors import LeaseLost
from tickwheel.model import State, Timer, truncate_error
from tickwheel.stores.attempt_record import Attempt
from tickwheel.stores.base import ANY_QUEUE, Deferral, DueQueues, Lease
from tickwheel.stores.memory.attempt_history import MemoryAttemptHistory


class MemoryLeasing(MemoryAttemptHistory):
    """The claim and settle calls of `MemoryStore`."""

    async def _claim(self, queue: str, horizon_ms: int, limit: int, lease_ms: int) -> list[Lease]:
        self._open()
        self._wakeups.mark(queue)
        now = self._clock()
        for timer_id, _ in self._leases.pop_due(now):
            timer = self._timers[timer_id]
            self._queue_leases[timer.queue].cancel(timer_id)
            self._schedule(timer.evolve(state=State.SCHEDULED, updated_ms=now))
        heap = self._due.get(queue)
        if heap is None:
            return []
        leases = []
        for timer_id, _ in heap.pop_due(horizon_ms, limit):
            timer = self._timers[timer_id]
            leased = timer.evolve(
                state=State.LEASED,
                attempt=timer.attempt + 1,
                updated_ms=now,
                first_claimed_ms=now if timer.first_claimed_ms is None else timer.first_claimed_ms,
            )
            self._timers[timer_id] = leased
            self._lease(leased, now + lease_ms)
            leases.append(Lease(leased, leased.attempt, now + lease_ms))
        self._fix_head(queue)
        return leases

    async def _extend(self, lease: Lease, lease_ms: int) -> Lease:
        timer = self._settle(lease)
        deadline = self._clock() + lease_ms
        self._lease(timer, deadline)
        return Lease(lease.timer, lease.token, deadline)

    async def next_due_ms(self, queue: str) -> int | None:
        self._open()
        self._wakeups.mark(queue)
        return self._next_due(queue)

    async def _due_queues(self, horizon_ms: int, limit: int, since_ms: int | None) -> DueQueues:
        self._open()
        self._wakeups.mark(ANY_QUEUE)
        heads = self._heads
        due = heads.pop_due(horizon_ms, limit if since_ms is None else None)
        next_ms = heads.next_due_ms()
        for queue, at_ms in due:
            heads.push(queue, at_ms, at_ms)
        if since_ms is not None:
            due = [(queue, at_ms) for queue, at_ms in due if at_ms >= since_ms][:limit]
        return DueQueues([queue for queue, _ in due], next_ms)

    async def queues(self) -> list[str]:
        self._open()
        self._wakeups.mark(ANY_QUEUE)
        held = (*self._due.items(), *self._queue_leases.items())
        return sorted({queue for queue, heap in held if heap})

    async def ack(self, lease: Lease, attempt: Attempt | None = None) -> None:
        timer = self._settle(lease)
        now = self._clock()
        self._timers[timer.id] = timer.evolve(state=State.DONE, updated_ms=now)
        self._expiry.push(timer.id, now + self.settings.retention_of(timer.id), None)
        self._record(timer.id, attempt)

    async def ack_many(
        self, leases: Sequence[Lease], attempts: Sequence[Attempt | None] = ()
    ) -> list[bool]:
        paired = zip(leases, attempts or repeat(None), strict=False)
        return await _landed(self.ack(lease, attempt) for lease, attempt in paired)

    async def _retry(self, lease: Lease, due_ms: int, error: str, attempt: Attempt | None) -> None:
        timer = self._settle(lease)
        self._record(timer.id, attempt)
        self._schedule(
            timer.evolve(
                state=State.SCHEDULED,
                due_ms=due_ms,
                updated_ms=self._clock(),
                last_error=truncate_error(error),
            )
        )

    async def _defer_many(self, deferrals: Sequence[Deferral]) -> list[bool]:
        return await _landed(self._defer(*deferral) for deferral in deferrals)

    async def _defer(self, lease: Lease, due_ms: int, reason: str) -> None:
        timer = self._settle(lease)
        self._schedule(
            timer.evolve(
                state=State.SCHEDULED,
                due_ms=due_ms,
                updated_ms=self._clock(),
                last_error=truncate_error(reason),
                deferrals=timer.deferrals + 1,
                # no attempt made yet: the run of attempts has not begun
                first_claimed_ms=timer.first_claimed_ms if timer.attempts_spent > 1 else None,
            )
        )

    async def kill(self, lease: Lease, error: str, attempt: Attempt | None = None) -> None:
        timer = self._settle(lease)
        self._record(timer.id, attempt)
        self._timers[timer.id] = timer.evolve(
            state=State.DEAD, updated_ms=self._clock(), last_error=truncate_error(error)
        )

    def _settle(self, lease: Lease) -> Timer:
        self._open()
        timer = self._timers.get(lease.timer.id)
        if timer is None or timer.state is not State.LEASED or timer.attempt != lease.token:
            raise LeaseLost(lease.timer.id, lease.token)
        self._unlease(timer)
        return timer


async def _landed(settles: Iterable[Coroutine[Any, Any, None]]) -> list[bool]:
    """Await each settle in turn: True where it landed, False where its lease was lost."""
    landed = []
    for settle in settles:
        try:
            await settle
        except LeaseLost:
            landed.append(False)
        else:
            landed.append(True)
    return landed
