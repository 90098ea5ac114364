"""Queues whose items come out when they are due: `DelayQueue` for threads, `AsyncDelayQueue`."""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Hashable
from heapq import heappop, heappush
from time import monotonic_ns
from typing import Any, Generic, TypeVar

from tickwheel.core.heap import DEAD, DelayHeap, drop_all_dead, drop_dead_top
from tickwheel.errors import Closed
from tickwheel.runtime._args import (
    MAX_SLEEP_S,
    Delay,
    When,
    check_key,
    check_timeout,
    due_after,
    due_ms_of,
)
from tickwheel.runtime.clock import NS_PER_MS, Clock, FakeClock, SystemClock

T = TypeVar("T")


class _Delayed(ABC, Generic[T]):
    """The heap and clock both queues share; methods with a leading underscore need the lock.

    The heap holds ``[due_ms, seq, key, item]`` lists, as a `DelayHeap` does, but `put` and
    `get_nowait` work on it inline: a method call per operation would cost more than the heap.
    The key index (key -> entry, for cancel, reschedule and replace) holds every keyed entry, but
    the entries of keyless puts only once one of their keys is looked up: it is then built from
    the heap in one pass and kept whole until the queue next runs empty.
    """

    def __init__(self, clock: Clock | None) -> None:
        clock = clock or SystemClock()
        self._clock: Clock = clock
        # a SystemClock is read here as its now_ns does, sparing the hot paths a method call
        self._system = type(clock) is SystemClock
        self._offset_ns = clock.offset_ns if type(clock) is SystemClock else 0
        # the latest time read, in ms: an item due by then is due without reading the clock
        # again, as long as the clock is one known never to go back
        self._monotonic = type(clock) in (SystemClock, FakeClock)
        self._seen_ms = -1
        self._heap: list[list[Any]] = []
        self._index: dict[Hashable, list[Any]] = {}
        self._index_all = False  # whether keyless entries are indexed too
        self._seq = 0
        self._dead = 0
        self._lock = threading.Lock()
        # waits and wake-ups go through the condition, the rest holds the lock alone; the hot
        # paths call acquire and release themselves, half the cost of a `with` on CPython 3.11
        self._cond = threading.Condition(self._lock)
        self._closed = False
        # getters waiting: a put that makes a new earliest item wakes one only if there is one
        self._waiting = 0
        self._unwatch = clock.watch(self._on_clock_jump)

    def __len__(self) -> int:
        """Count the items held, due or not."""
        with self._lock:
            return len(self._heap) - self._dead

    def cancel(self, key: Hashable) -> bool:
        """Remove the item put under `key`; return whether it was still held."""
        check_key(key)
        with self._lock:
            entry = self._entry(key)
            if entry is None:
                return False
            del self._index[key]
            self._bury(entry)
            return True

    def put(
        self,
        item: T,
        delay: Delay | None = None,
        *,
        when: When | None = None,
        key: Hashable | None = None,
    ) -> Hashable:
        """Hold `item` until it is due (now when neither `delay` nor `when` is given).

        Returns its key: `key` if given (replacing an item held under it), else a new one.
        """
        now_ns = monotonic_ns() + self._offset_ns if self._system else self._clock.now_ns()
        if delay is None and when is None:
            due_ms = now_ns // NS_PER_MS
        else:
            due_ms = due_ms_of(delay, when, now_ns)
        if key is not None:
            check_key(key)
            with self._lock:
                if self._closed:
                    raise Closed(f"{type(self).__name__} is closed")
                if self._push(key, due_ms, item) and self._waiting:
                    self._wake_getter()
            return key
        key = object()
        lock = self._lock
        lock.acquire()
        try:
            if self._closed:
                raise Closed(f"{type(self).__name__} is closed")
            self._seq = seq = self._seq + 1
            entry = [due_ms, seq, key, item]
            heap = self._heap
            if self._index_all:
                if heap:
                    self._index[key] = entry
                else:
                    self._index_all = False  # the index is empty, as the queue is
            heappush(heap, entry)
            if self._waiting and heap[0] is entry:
                self._wake_getter()
        finally:
            lock.release()
        return key

    def reschedule(self, key: Hashable, delay: Delay) -> bool:
        """Make the item under `key` due `delay` seconds from now; return whether it is held."""
        check_key(key)
        due_ms = due_after(delay, self._now_ns())
        with self._lock:
            entry = self._entry(key)
            if entry is None:
                return False
            head = self._heap[0][0]
            self._push(key, due_ms, entry[3])
            if self._waiting and due_ms <= head:
                self._wake_getter()
        return True

    def get_nowait(self) -> T:
        """Remove and return a due item, or raise `queue.Empty`."""
        lock = self._lock
        lock.acquire()
        try:
            taken = self._take()
        finally:
            lock.release()
        if taken is None:
            raise queue.Empty
        item: T = taken[3]
        return item

    def close(self) -> list[T]:
        """Refuse further puts, wake every waiting `get` with `Closed`; return items still held."""
        left = self._close()
        self._unwatch()
        self._wake_all()
        return left

    @abstractmethod
    def _wake_all(self) -> None:
        """Wake every waiting getter, so each re-checks the queue."""

    @abstractmethod
    def _on_clock_jump(self) -> None:
        """Wake every waiting getter after the clock jumped; may run on another thread."""

    @abstractmethod
    def _wake_getter(self) -> None:
        """Tell one of the waiting getters that the earliest item changed; with the lock held."""

    def _now_ns(self) -> int:
        """Read the clock, in epoch ns."""
        return monotonic_ns() + self._offset_ns if self._system else self._clock.now_ns()

    def _now_ms(self) -> int:
        """Read the clock, in epoch ms, and remember the time if the clock never goes back."""
        now_ms = self._now_ns() // NS_PER_MS
        if self._monotonic:
            self._seen_ms = now_ms
        return now_ms

    def _head_due(self) -> bool:
        """Return whether the earliest item is due."""
        heap = self._heap
        return bool(heap) and (heap[0][0] <= self._seen_ms or heap[0][0] <= self._now_ms())

    def _take(self) -> list[Any] | None:
        """Pop the earliest entry if it is due, else None; raise `Closed` once closed."""
        heap = self._heap
        if not heap or (heap[0][0] > self._seen_ms and heap[0][0] > self._now_ms()):
            if self._closed:
                raise Closed(f"{type(self).__name__} is closed")
            return None
        entry = heappop(heap)
        if self._index:
            self._index.pop(entry[2], None)
        if heap and heap[0][3] is DEAD:
            self._dead -= drop_dead_top(heap)
        return entry

    def _sleep_s(self) -> float | None:
        """Return how long until the earliest item is due, or None when empty."""
        if not self._heap:
            return None
        due_ms: int = self._heap[0][0]
        left_ns = due_ms * NS_PER_MS - self._now_ns()
        return min(max(left_ns / 1e9, 0.0), MAX_SLEEP_S)

    def _entry(self, key: Hashable) -> list[Any] | None:
        """Return the pending entry under `key`, indexing keyless entries if it may be one."""
        index = self._index
        entry = index.get(key)
        if (
            entry is None
            and type(key) is object  # as the keys of keyless puts are
            and not self._index_all
            and len(self._heap) - self._dead > len(index)
        ):
            for held in self._heap:
                if held[3] is not DEAD:
                    index[held[2]] = held
            self._index_all = True
            entry = index.get(key)
        return entry

    def _push(self, key: Hashable, due_ms: int, item: T) -> bool:
        """Hold `item` under `key`, replacing any item held under it; return whether earliest."""
        old = self._entry(key)
        self._seq = seq = self._seq + 1
        entry = [due_ms, seq, key, item]
        self._index[key] = entry
        heap = self._heap
        heappush(heap, entry)
        if old is not None:
            self._bury(old)
        return heap[0] is entry

    def _bury(self, entry: list[Any]) -> None:
        """Mark a replaced or cancelled entry dead where it lies, as `DelayHeap` does."""
        entry[3] = DEAD
        self._dead += 1
        heap = self._heap
        if heap[0] is entry:
            self._dead -= drop_dead_top(heap)
        elif 2 * self._dead > len(heap) + DelayHeap.SPARE_DEAD:
            drop_all_dead(heap)
            self._dead = 0

    def _close(self) -> list[T]:
        with self._lock:
            if self._closed:
                return []
            self._closed = True
            held = sorted(entry for entry in self._heap if entry[3] is not DEAD)
            self._heap.clear()
            self._index.clear()
            self._dead = 0
            return [entry[3] for entry in held]


class DelayQueue(_Delayed[T]):
    """A thread-safe queue that hands out each item once it is due, earliest first.

    Like `queue.Queue`, but `put` takes a `delay` (seconds) or `when` (epoch seconds or an aware
    datetime) and `get` blocks until the earliest item is due; an earlier `put` wakes it.
    """

    def __init__(self, *, clock: Clock | None = None) -> None:
        super().__init__(clock)

    def _wake_getter(self) -> None:
        self._cond.notify()

    def get(self, timeout: float | None = None) -> T:
        """Remove and return the earliest due item, waiting up to `timeout` seconds for one.

        Raises `queue.Empty` when the timeout passes, `Closed` once the queue is closed.
        """
        timeout_s = None if timeout is None else check_timeout(timeout)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        lock = self._lock
        lock.acquire()
        try:
            while True:
                taken = self._take()
                if taken is not None:
                    if self._waiting and self._head_due():
                        self._cond.notify()  # pass the next due item on to another getter
                    item: T = taken[3]
                    return item
                sleep_s = self._sleep_s()
                if deadline is not None:
                    left_s = deadline - time.monotonic()
                    if left_s <= 0:
                        if self._heap:
                            self._cond.notify()  # a put may have woken us for another getter
                        raise queue.Empty
                    sleep_s = min(left_s, MAX_SLEEP_S) if sleep_s is None else min(sleep_s, left_s)
                self._waiting += 1
                try:
                    self._cond.wait(sleep_s)
                finally:
                    self._waiting -= 1
        finally:
            lock.release()

    def _wake_all(self) -> None:
        with self._lock:
            self._cond.notify_all()

    def _on_clock_jump(self) -> None:
        self._wake_all()


class AsyncDelayQueue(_Delayed[T]):
    """The asyncio twin of `DelayQueue`: ``await q.get()`` and ``async for item in q``.

    Create and use it on one event loop, as with `asyncio.Queue`.
    """

    def __init__(self, *, clock: Clock | None = None) -> None:
        super().__init__(clock)
        self._loop = asyncio.get_running_loop()
        self._getters: deque[asyncio.Future[None]] = deque()

    def _wake_getter(self) -> None:
        self._wake_one()

    async def get(self) -> T:
        """Remove and return the earliest item once it is due; raise `Closed` once closed."""
        while True:
            with self._lock:
                taken = self._take()
                sleep_s = self._sleep_s()
            if taken is not None:
                if sleep_s == 0.0:
                    self._wake_one()
                item: T = taken[3]
                return item
            waiter = self._loop.create_future()
            self._getters.append(waiter)
            alarm = None if sleep_s is None else self._loop.call_later(sleep_s, _settle, waiter)
            self._waiting += 1
            try:
                await waiter
            except asyncio.CancelledError:
                if self._heap:
                    self._wake_one()  # pass on any wake-up this getter will not use
                raise
            finally:
                self._waiting -= 1
                if alarm is not None:
                    alarm.cancel()
                if waiter in self._getters:
                    self._getters.remove(waiter)

    def __aiter__(self) -> AsyncDelayQueue[T]:
        return self

    async def __anext__(self) -> T:
        try:
            return await self.get()
        except Closed:
            raise StopAsyncIteration from None

    def _wake_one(self) -> None:
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _wake_all(self) -> None:
        while self._getters:
            _settle(self._getters.popleft())

    def _on_clock_jump(self) -> None:
        self._loop.call_soon_threadsafe(self._wake_all)


def _settle(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
