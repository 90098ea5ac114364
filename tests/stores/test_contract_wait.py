"""The `Store.wait` contract, on every backend: real wake-ups, so real (short) time.

Another store object on the same file or server plays another process; `MemoryStore` has no
such thing, so there the change comes from the same store.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from tickwheel.model import Timer
from tickwheel.stores import MemoryStore, Store, StoreSettings
from tickwheel.stores.base import ANY_QUEUE, QueueSettings

from .conftest import ManualClock, StoreFactory

WAKE_LIMIT_S = 0.25  # the wake-up should take a few ms; this leaves room on a busy machine


async def quiet(store: Store, queue: str) -> None:
    """Let spurious wake-ups pass: a store's first waits may report one (Redis: once subscribed,
    which on a busy machine can take longer than several short waits; PostgreSQL: once listening):
    the subscription is waited for."""
    listener = getattr(store, "_listener", None)
    if listener is not None:
        first = asyncio.create_task(store.wait(queue, 0.05))  # starts the subscription
        await asyncio.wait_for(listener.subscribed.wait(), 10)
        await first
    calm = 0
    for _ in range(10):
        calm = 0 if await store.wait(queue, 0.05) else calm + 1
        if calm == 2:
            return
    raise AssertionError("wait keeps returning True with nothing happening")


async def woken_after(store: Store, queue: str, change: Callable[[], Awaitable[object]]) -> float:
    """Block in wait(queue, 5) while `change()` runs; return seconds from its end to the wake."""
    waiter = asyncio.create_task(store.wait(queue, 5))
    await asyncio.sleep(0.02)  # the waiter is registered
    assert not waiter.done()
    await change()
    changed = time.monotonic()
    assert await waiter is True
    return time.monotonic() - changed


def other_of(
    store: Store, make_store: StoreFactory, clock: ManualClock, settings: StoreSettings
) -> Store:
    return store if isinstance(store, MemoryStore) else make_store(clock, settings)


async def test_wait_times_out_when_nothing_happens(store: Store) -> None:
    await quiet(store, "default")
    start = time.monotonic()
    assert await store.wait("default", 0.1) is False
    assert time.monotonic() - start >= 0.09


async def test_an_add_elsewhere_wakes_a_waiter(
    store: Store, make_store: StoreFactory, clock: ManualClock, settings: StoreSettings
) -> None:
    other = other_of(store, make_store, clock, settings)
    try:
        await quiet(store, "jobs")
        add = Timer(due_ms=clock.now_ms, queue="jobs")
        assert await woken_after(store, "jobs", lambda: other.add(add)) < WAKE_LIMIT_S
    finally:
        if other is not store:
            await other.close()


async def test_any_queue_hears_of_a_queue_nobody_waits_on(
    store: Store, make_store: StoreFactory, clock: ManualClock, settings: StoreSettings
) -> None:
    other = other_of(store, make_store, clock, settings)
    try:
        assert await store.queues() == []
        await quiet(store, ANY_QUEUE)
        new = Timer(due_ms=clock.now_ms + 60_000, queue="brand-new")
        assert await woken_after(store, ANY_QUEUE, lambda: other.add(new)) < WAKE_LIMIT_S
    finally:
        if other is not store:
            await other.close()


async def test_retry_and_replay_wake_a_waiter(store: Store, clock: ManualClock) -> None:
    await store.add(Timer(id="t", due_ms=clock.now_ms, queue="jobs"))
    (lease,) = await store.claim("jobs", clock.now_ms, 1, 1000)
    await quiet(store, "jobs")
    retry = lease, clock.now_ms + 10, "again"
    assert await woken_after(store, "jobs", lambda: store.retry(*retry)) < WAKE_LIMIT_S
    clock.advance(10)
    (lease,) = await store.claim("jobs", clock.now_ms, 1, 1000)
    await store.kill(lease, "dead")
    await quiet(store, "jobs")
    assert await woken_after(store, "jobs", lambda: store.replay("t")) < WAKE_LIMIT_S


async def test_an_add_to_another_queue_does_not_wake_a_waiter_of_this_store(
    store: Store, clock: ManualClock
) -> None:
    """The store's own changes wake only their queue (on SQLite, another connection's wake all)."""
    await quiet(store, "jobs")
    waiter = asyncio.create_task(store.wait("jobs", 0.3))
    await asyncio.sleep(0.02)
    await store.add(Timer(due_ms=clock.now_ms, queue="mail"))
    assert await waiter is False


async def test_a_change_between_next_due_ms_and_wait_still_wakes(
    store: Store, make_store: StoreFactory, clock: ManualClock, settings: StoreSettings
) -> None:
    """The idle loop reads next_due_ms, then waits: an add in between must not be slept through."""
    other = other_of(store, make_store, clock, settings)
    try:
        await quiet(store, "jobs")
        assert await store.next_due_ms("jobs") is None
        await other.add(Timer(due_ms=clock.now_ms, queue="jobs"))
        await asyncio.sleep(0.05)  # the change has reached this store before it waits
        start = time.monotonic()
        assert await store.wait("jobs", 5) is True
        assert time.monotonic() - start < WAKE_LIMIT_S
        assert await store.wait("jobs", 0.05) is False  # the mark is used once
    finally:
        if other is not store:
            await other.close()


async def test_a_queue_setting_changed_elsewhere_wakes_its_waiters(
    store: Store, make_store: StoreFactory, clock: ManualClock, settings: StoreSettings
) -> None:
    """A worker waiting on a paused queue hears of its resume at once."""
    other = other_of(store, make_store, clock, settings)
    try:
        await store.set_queue("q", QueueSettings(paused=True))
        await quiet(store, "q")
        took = await woken_after(store, "q", lambda: other.set_queue("q", QueueSettings()))
        assert took < WAKE_LIMIT_S
    finally:
        if other is not store:
            await other.close()


async def test_a_resumed_timer_wakes_its_queue(
    store: Store, make_store: StoreFactory, clock: ManualClock, settings: StoreSettings
) -> None:
    other = other_of(store, make_store, clock, settings)
    try:
        await store.add(Timer(id="t", due_ms=clock.now_ms - 1, queue="q", payload=1))
        assert await store.pause("t")
        await quiet(store, "q")
        took = await woken_after(store, "q", lambda: other.resume("t"))
        assert took < WAKE_LIMIT_S
    finally:
        if other is not store:
            await other.close()
