"""Group commit on the store's thread: single writes from any task, loop or thread share one
transaction; those of one loop pass are written on its thread when they can be, without
waiting.

A caller's item waits on a future of its own loop, first until that loop's current pass ends,
so what the loop's other tasks add in the same pass goes with it. The pass's items (at most
`INLINE_MOST`), when nothing is queued, go to `inline`, which writes them in one transaction
on the loop's thread if the connection and SQLite's write lock are both free at once, never
waiting for either. Otherwise the items queue under a
lock for the store's thread, which takes whatever has queued, up to a batch, writes it in one
transaction and answers each caller only after that transaction has committed, with one
wake-up per event loop. While it writes, the next callers queue, so the batch grows with the
load and no caller waits for company. The batching happens on the store's thread, not on an
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

Inline = Callable[[list[T]], "list[R | None] | None"]
"""Write items at once on the caller's thread, in one transaction: each one's result, or None
for one that must go to the store's thread; None when all must (the connection or the write
lock is taken)."""
INLINE_MOST = 64
"""Items of one loop pass written on its thread at most: a larger pass goes to the store's
thread rather than hold the loop for its transaction."""

Answers = list[tuple["asyncio.Future[R]", "R | BaseException"]]
Pending = list[tuple[T, "asyncio.Future[R]"]]


class GroupCommit(Generic[T, R]):
    """Send items through `write` on `executor`'s one thread, in batches of what queued."""

    def __init__(
        self,
        executor: Executor,
        write: Write[T, R],
        max_batch: int,
        inline: Inline[T, R] | None = None,
    ) -> None:
        self._executor = executor
        self._write = write
        self._max_batch = max_batch
        self._inline = inline
        self._passes: dict[asyncio.AbstractEventLoop, Pending[T, R]] = {}  # each loop's own
        self._lock = threading.Lock()
        self._items: list[T] = []
        self._waiters: list[asyncio.Future[R]] = []
        self._scheduled = False  # a batch job is queued on, or running on, the executor

    def submit(self, item: T) -> asyncio.Future[R]:
        """Queue `item`; the future holds its result once its transaction has committed, or
        its refusal or its batch's error (a future, not a coroutine: one frame less a call)."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[R] = loop.create_future()
        if self._inline is None:
            self._queue([(item, done)])
            return done
        this_pass = self._passes.get(loop)  # only this loop's thread reads or writes its entry
        if this_pass is None:
            this_pass = self._passes[loop] = []
            loop.call_soon(self._end_pass, loop)
        this_pass.append((item, done))
        return done

    def _end_pass(self, loop: asyncio.AbstractEventLoop) -> None:
        """On `loop`, once the pass that queued its first item is over: write the pass's items
        inline if they can be, else queue them for the store's thread."""
        pending = self._passes.pop(loop)
        if len(pending) > INLINE_MOST or self._scheduled or self._inline is None:
            self._queue(pending)
            return
        try:
            results = self._inline([item for item, _ in pending])
        except Exception as error:  # its own failure, answered as on the store's thread
            failed: Answers[R] = [(done, error) for _, done in pending]
            _settle(failed)
            return
        if results is None:  # the connection or the write lock is taken
            self._queue(pending)
            return
        answers: Answers[R] = [
            (done, result)
            for (_, done), result in zip(pending, results, strict=True)
            if result is not None
        ]
        _settle(answers)
        refused = [each for each, result in zip(pending, results, strict=True) if result is None]
        if refused:  # an id taken: the store's thread decides
            self._queue(refused)

    def _queue(self, pending: Pending[T, R]) -> None:
        """Queue items for the store's thread, starting a batch job unless one is on its way."""
        with self._lock:
            for item, done in pending:
                self._items.append(item)
                self._waiters.append(done)
            start, self._scheduled = not self._scheduled, True
        if start:
            self._schedule()

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
        """On the store's thread: write one batch, queue the next job, answer its callers."""
        with self._lock:
            items, waiters = self._items[: self._max_batch], self._waiters[: self._max_batch]
            del self._items[: self._max_batch], self._waiters[: self._max_batch]
        results: Sequence[R | BaseException]
        try:
            results = self._write(items)
        except Exception as error:  # the whole batch failed: each caller hears of it
            results = [error] * len(items)
        with self._lock:
            more = self._scheduled = bool(self._items)
        if more:
            self._schedule()
        # after the flag is down, so a caller's next lone add, once answered, may go inline
        _answer(list(zip(waiters, results, strict=True)))


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
