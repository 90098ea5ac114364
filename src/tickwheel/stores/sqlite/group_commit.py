"""Group commit on the store's thread: single writes from any task, loop or thread share one
transaction.

A caller queues its item under a lock and waits on a future of its own loop. The store's
thread takes whatever has queued, up to a batch, writes it in one transaction and answers each
caller only after that transaction has committed, with one wake-up per event loop. While it
writes, the next callers queue, so the batch grows with the load and no caller waits for
company: a lone item goes out at once. The batching happens on the store's thread, not on an
event loop, so a commit is followed by the next at once (no hop back to a loop in between),
and callers on several threads, each with its own loop, join the same transactions. Each
batch is one job on the store's executor, so other calls (claims, acks) queued meanwhile take
their turn between two batches.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import Generic, TypeVar

from tickwheel.errors import Closed

T = TypeVar("T")
R = TypeVar("R")

Write = Callable[[list[T]], Sequence[R | BaseException]]
"""Write a batch on the store's thread: one result or refusal per item, in order; raises when
the whole batch failed (then every caller in it hears that error)."""

Answers = list[tuple["asyncio.Future[R]", "R | BaseException"]]


class GroupCommit(Generic[T, R]):
    """Send items through `write` on `executor`'s one thread, in batches of what queued."""

    def __init__(self, executor: Executor, write: Write[T, R], max_batch: int) -> None:
        self._executor = executor
        self._write = write
        self._max_batch = max_batch
        self._lock = threading.Lock()
        self._items: list[T] = []
        self._waiters: list[asyncio.Future[R]] = []
        self._scheduled = False  # a batch job is queued on, or running on, the executor

    def submit(self, item: T) -> asyncio.Future[R]:
        """Queue `item`; the future holds its result once its transaction has committed, or
        its refusal or its batch's error (a future, not a coroutine: one frame less a call)."""
        done: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        with self._lock:
            self._items.append(item)
            self._waiters.append(done)
            start, self._scheduled = not self._scheduled, True
        if start:
            self._schedule()
        return done

    def _schedule(self) -> None:
        """Queue one batch job on the executor; answer what is queued if it has shut down."""
        try:
            self._executor.submit(self._batch)
        except RuntimeError:  # the store closed: nothing will write these
            with self._lock:
                waiters, self._waiters, self._items = self._waiters, [], []
                self._scheduled = False
            closed: Answers[R] = [(waiter, Closed("store is closed")) for waiter in waiters]
            _answer(closed)

    def _batch(self) -> None:
        """On the store's thread: write one batch, answer its callers, queue the next job."""
        with self._lock:
            items, waiters = self._items[: self._max_batch], self._waiters[: self._max_batch]
            del self._items[: self._max_batch], self._waiters[: self._max_batch]
        results: Sequence[R | BaseException]
        try:
            results = self._write(items)
        except Exception as error:  # the whole batch failed: each caller hears of it
            results = [error] * len(items)
        _answer(list(zip(waiters, results, strict=True)))
        with self._lock:
            more = self._scheduled = bool(self._items)
        if more:
            self._schedule()


def _answer(answers: Answers[R]) -> None:
    """Settle each future on its own loop: one thread-safe call per loop, not per future."""
    by_loop: dict[asyncio.AbstractEventLoop, Answers[R]] = {}
    for waiter, result in answers:
        by_loop.setdefault(waiter.get_loop(), []).append((waiter, result))
    for loop, settled in by_loop.items():
        try:
            loop.call_soon_threadsafe(_settle, settled)
        except RuntimeError:  # that loop has closed: no caller is left to answer
            continue


def _settle(answers: Answers[R]) -> None:
    """On the caller's loop: hand each caller its result or error."""
    for waiter, result in answers:
        if waiter.done():
            continue  # its caller was cancelled; the item was written all the same
        if isinstance(result, BaseException):
            waiter.set_exception(result)
        else:
            waiter.set_result(result)
