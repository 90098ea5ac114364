"""What every part of `MemoryStore` stands on: its timers, and the heaps that order them by due
time, lease deadline, queue head and expiry."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from tickwheel.core import DelayHeap
from tickwheel.errors import Closed
from tickwheel.model import Timer
from tickwheel.schedule import ScheduleState
from tickwheel.stores.attempt_record import Attempt
from tickwheel.stores.base import Limit, QueueSettings, StoreSettings, wall_ms
from tickwheel.stores.contract import StoreContract
from tickwheel.stores.wake import Wakeups


class MemoryHeaps(StoreContract):
    """The timers and their heaps; the base of each part of `MemoryStore`."""

    def __init__(
        self, settings: StoreSettings | None = None, *, clock: Callable[[], int] = wall_ms
    ) -> None:
        self.settings = settings or StoreSettings()
        self._clock = clock
        self._timers: dict[str, Timer] = {}
        self._due: dict[str, DelayHeap[str, None]] = {}
        self._leases: DelayHeap[str, None] = DelayHeap()
        # the same leases by queue, for next_due_ms
        self._queue_leases: dict[str, DelayHeap[str, None]] = {}
        # queue -> a time by which it may hold something to claim (due_queues): lowered by
        # whatever schedules or leases a timer, set right by each claim of the queue
        self._heads: DelayHeap[str, int] = DelayHeap()
        self._wakeups = Wakeups()
        self._expiry: DelayHeap[str, None] = DelayHeap()
        self._schedules: dict[str, ScheduleState] = {}
        self._queue_settings: dict[str, QueueSettings] = {}
        self._limits: dict[str, Limit] = {}
        self._queue_settings_version = 0
        self._limits_version = 0
        # timer id -> its attempts, newest first; they go with the timer
        self._attempts: dict[str, deque[Attempt]] = {}
        self._closed = False

    def now_ms(self) -> int:
        return self._clock()

    async def _wait(self, queue: str, timeout_s: float) -> bool:
        self._open()
        return await self._wakeups.wait(queue, timeout_s)

    async def close(self) -> None:
        self._closed = True

    def _schedule(self, timer: Timer) -> None:
        self._timers[timer.id] = timer
        self._due.setdefault(timer.queue, DelayHeap()).push(timer.id, timer.due_ms, None)
        self._lower_head(timer.queue, timer.due_ms)
        self._wakeups.notify(timer.queue)

    def _lease(self, timer: Timer, deadline_ms: int) -> None:
        self._leases.push(timer.id, deadline_ms, None)
        self._queue_leases.setdefault(timer.queue, DelayHeap()).push(timer.id, deadline_ms, None)
        self._lower_head(timer.queue, deadline_ms)

    def _next_due(self, queue: str) -> int | None:
        heaps = (self._due.get(queue), self._queue_leases.get(queue))
        dues = [heap.next_due_ms() for heap in heaps if heap is not None]
        return min((due for due in dues if due is not None), default=None)

    def _lower_head(self, queue: str, at_ms: int) -> None:
        head = self._heads.due_ms(queue)
        if head is None or at_ms < head:
            self._heads.push(queue, at_ms, at_ms)

    def _fix_head(self, queue: str) -> None:
        at_ms = self._next_due(queue)
        if at_ms is None:
            self._heads.cancel(queue)
            self._due.pop(queue, None)  # an empty queue's heap goes with it
        else:
            self._heads.push(queue, at_ms, at_ms)

    def _forget(self, timer: Timer) -> None:
        del self._timers[timer.id]
        self._attempts.pop(timer.id, None)
        if timer.queue in self._due:
            self._due[timer.queue].cancel(timer.id)
        self._unlease(timer)
        self._expiry.cancel(timer.id)

    def _unlease(self, timer: Timer) -> None:
        self._leases.cancel(timer.id)
        if timer.queue in self._queue_leases:
            self._queue_leases[timer.queue].cancel(timer.id)

    def _live(self, timer_id: str, now: int) -> Timer | None:
        self._expire_done(now)
        return self._timers.get(timer_id)

    def _expire_done(self, now: int) -> None:
        for timer_id, _ in self._expiry.pop_due(now):
            del self._timers[timer_id]
            self._attempts.pop(timer_id, None)

    def _open(self) -> None:
        if self._closed:
            raise Closed("store is closed")
