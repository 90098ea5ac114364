"""The store's clock for the dispatcher's wheel, and stores whose clock must be measured first."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from tickwheel.engine.metrics import Metrics
from tickwheel.engine.settle import Throttled, jittered_pause
from tickwheel.errors import StoreUnavailable
from tickwheel.runtime.clock import NS_PER_MS, unwatched
from tickwheel.stores import Store


class StoreClock:
    """The store's clock as a runtime `Clock`: the local wheel fires by the clock that says due."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def now_ns(self) -> int:
        return self._store.now_ms() * NS_PER_MS

    def watch(self, wake: Callable[[], None]) -> Callable[[], None]:
        """The store's clock moves on its own; the scheduler computes its own sleeps."""
        return unwatched


async def sync_first(
    store: Store, stopping: asyncio.Event, metrics: Metrics, throttled: Throttled
) -> None:
    """Measure the store's clock before the first claim, if it follows a server's; try
    again until it answers or `stopping` is set.

    Until then such a store can only guess the time from this host's clock, and a host
    running ahead would fire timers early by its lead.
    """
    failures = 0
    while not stopping.is_set():
        try:
            await store.sync_clock()
            return
        except StoreUnavailable as error:
            failures += 1
            metrics.store_errors["clock"] += 1
            throttled.warning("clock", "store unavailable, reading its clock again soon: %s", error)
            await unless_stopping(jittered_pause(failures), stopping)


async def unless_stopping(waiting: Awaitable[object], stopping: asyncio.Event) -> None:
    """Await `waiting` (a sleep, never a store write), cut short once `stopping` is set."""
    task = asyncio.ensure_future(waiting)
    stop = asyncio.ensure_future(stopping.wait())
    try:
        await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        task.cancel()
        stop.cancel()
