"""`Wakeups`: a change to a queue with a waiter wakes that waiter, one to a queue without any
wakes the `ANY_QUEUE` watchers."""

from __future__ import annotations

import asyncio

from tickwheel.stores.base import ANY_QUEUE
from tickwheel.stores.wake import Wakeups


async def test_a_served_queue_wakes_its_waiter_and_not_the_watchers() -> None:
    wakeups = Wakeups()
    served = asyncio.create_task(wakeups.wait("served", 1))
    watcher = asyncio.create_task(wakeups.wait(ANY_QUEUE, 0.2))
    await asyncio.sleep(0)
    wakeups.notify("served")
    assert await served is True
    assert await watcher is False


async def test_a_queue_nobody_waits_on_wakes_the_watchers() -> None:
    wakeups = Wakeups()
    watcher = asyncio.create_task(wakeups.wait(ANY_QUEUE, 1))
    await asyncio.sleep(0)
    wakeups.notify("new-queue")
    assert await watcher is True


async def test_a_change_between_listing_and_waiting_is_not_lost() -> None:
    wakeups = Wakeups()
    wakeups.mark(ANY_QUEUE)  # the queues were listed
    wakeups.notify("appeared-meanwhile")
    assert await wakeups.wait(ANY_QUEUE, 0.05) is True
