"""Group commit: single calls made while a batch is in flight go out together in the next one.

A lone caller's call goes out at once (no waiting for company); callers that arrive while it is
in flight queue, and when it lands they all go in one batch. Each caller gets its own result, or
its own error: the flush answers per item, and an error of the whole batch reaches every caller
in it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

Flush = Callable[[list[T]], Awaitable[Sequence[R | Exception]]]


class Coalescer(Generic[T, R]):
    """Send items through `flush` in batches of whatever queued while the last one ran."""

    def __init__(self, flush: Flush[T, R], max_batch: int) -> None:
        self._flush = flush
        self._max_batch = max_batch
        self._items: list[T] = []
        self._waiters: list[asyncio.Future[R]] = []
        self._running: asyncio.Task[None] | None = None
        self._alone = False  # a lone item is being flushed in its caller's task

    async def submit(self, item: T) -> R:
        """Send `item` and return its result once its batch has landed (or raise its error)."""
        if not self._alone and not self._items and not self._draining():
            return await self._send_alone(item)
        done: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._items.append(item)
        self._waiters.append(done)
        if not self._alone and not self._draining():
            self._running = asyncio.ensure_future(self._drain())
        return await done

    async def _send_alone(self, item: T) -> R:
        """Flush a lone item in the caller's own task (no task to start and wake), then hand
        what queued meanwhile to a drain."""
        self._alone = True
        try:
            (result,) = await self._flush([item])
        finally:
            self._alone = False
            if self._items and not self._draining():
                self._running = asyncio.ensure_future(self._drain())
        if isinstance(result, Exception):
            raise result
        return result

    def _draining(self) -> bool:
        return self._running is not None and not self._running.done()

    async def _drain(self) -> None:
        while self._items:
            items, waiters = self._items[: self._max_batch], self._waiters[: self._max_batch]
            del self._items[: self._max_batch], self._waiters[: self._max_batch]
            try:
                results = await self._flush(items)
            except Exception as error:  # the whole batch failed: each caller hears of it
                for waiter in waiters:
                    if not waiter.done():
                        waiter.set_exception(error)
                continue
            for waiter, result in zip(waiters, results, strict=True):
                if waiter.done():
                    continue  # its caller was cancelled; the item went out all the same
                if isinstance(result, Exception):
                    waiter.set_exception(result)
                else:
                    waiter.set_result(result)
