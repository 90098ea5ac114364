"""Queues whose items come out when they are due: `DelayQueue` for threads, `AsyncDelayQueue`."""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from tickwheel.core import DelayHeap
from tickwheel.errors import Closed
from tickwheel.runtime._args import (
    MAX_DUE_MS,
    MAX_SLEEP_S,
    Delay,
    When,
    check_key,
    check_timeout,
    due_after,
    due_ms_of,
)
from tickwheel.runtime.clock import NS_PER_MS, Clock, SystemClock

T = TypeVar("T")


class _Delayed(ABC, Generic[T]):
    """The heap and clock both queues share; methods with a leading underscore need the lock."""

    def __init__(self, clock: Clock | None) -> None:
        self._clock: Clock = clock or SystemClock()
        self._now_ns = self._clock.now_ns
        self._heap: DelayHeap[Hashable, T] = DelayHeap()
        self._lock = threading.Lock()
        # waits and wake-ups go through the condition; plain `with self._lock` is cheaper
        self._cond = threading.Condition(self._lock)
        self._closed = False
        # getters waiting: a put that makes a new earliest item wakes one only if there is one
        self._waiting = 0
        self._unwatch = self._clock.watch(self._on_clock_jump)

    def __len__(self) -> int:
        """Count the items held, due or not."""
        return len(self._heap)

    def cancel(self, key: Hashable) -> bool:
        """Remove the item put under `key`; return whether it was still held."""
        check_key(key)
        with self._lock:
            return self._heap.cancel(key)

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
        now_ns = self._now_ns()
        if delay is None and when is None:
            due_ms = now_ns // NS_PER_MS
        else:
            due_ms = due_ms_of(delay, when, now_ns)
        key = object() if key is None else check_key(key)
        with self._lock:
            if self._closed:
                raise Closed(f"{type(self).__name__} is closed")
            if self._heap.push(key, due_ms, item) and self._waiting:
                self._wake_getter()
        return key

    def reschedule(self, key: Hashable, delay: Delay) -> bool:
        """Make the item under `key` due `delay` seconds from now; return whether it is held."""
        check_key(key)
        due_ms = due_after(delay, self._clock.now_ns())
        with self._lock:
            head = self._heap.next_due_ms()
            moved = self._heap.reschedule(key, due_ms)
            if moved and self._waiting and (head is None or due_ms <= head):
                self._wake_getter()
        return moved

    def get_nowait(self) -> T:
        """Remove and return a due item, or raise `queue.Empty`."""
        with self._lock:
            if self._closed:
                raise Closed(f"{type(self).__name__} is closed")
            taken = self._heap.pop_one(self._now_ns() // NS_PER_MS)
        if taken is None:
            raise queue.Empty
        return taken[1]

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

    def _take(self) -> tuple[Hashable, T] | None:
        """Pop the earliest ``(key, item)`` if it is due, else None."""
        if self._closed:
            raise Closed(f"{type(self).__name__} is closed")
        return self._heap.pop_one(self._now_ns() // NS_PER_MS)

    def _sleep_s(self) -> float | None:
        """Return how long until the earliest item is due, or None when empty."""
        next_due = self._heap.next_due_ms()
        if next_due is None:
            return None
        return min(max((next_due * NS_PER_MS - self._clock.now_ns()) / 1e9, 0.0), MAX_SLEEP_S)

    def _close(self) -> list[T]:
        with self._lock:
            if self._closed:
                return []
            self._closed = True
            return [item for _, item in self._heap.pop_due(MAX_DUE_MS)]


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
        timeout_s = check_timeout(timeout)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._lock:
            while True:
                taken = self._take()
                if taken is not None:
                    if self._sleep_s() == 0.0:
                        self._cond.notify()
                    return taken[1]
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
                return taken[1]
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
