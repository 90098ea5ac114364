"""`DelayQueue` (threads) and `AsyncDelayQueue`: due order, wake-ups, close, many threads.

Most checks run on a `FakeClock` with `get_nowait`, which is deterministic. The wake-up tests need
the real clock (a `FakeClock` jump wakes every waiter, which would hide a lost wake-up); they
assert "not before due" strictly and lateness loosely.
"""

from __future__ import annotations

import asyncio
import queue
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from tickwheel.errors import Closed, InvalidArgument
from tickwheel.runtime import AsyncDelayQueue, DelayQueue, FakeClock, SystemClock

WAIT_S = 2.0
# a `get` that should be blocked is given this long to (wrongly) return
BLOCKED_S = 0.05

MakeQueue = Callable[..., DelayQueue[Any]]
Spawn = Callable[..., Any]  # conftest.spawn, returning a conftest.Worker


def drain_nowait(q: DelayQueue[Any] | AsyncDelayQueue[Any]) -> list[Any]:
    out = []
    while True:
        try:
            out.append(q.get_nowait())
        except queue.Empty:
            return out


# ---- DelayQueue on a fake clock ----------------------------------------------------------------


def test_item_is_due_at_its_ms_and_not_before(clock: FakeClock, make_queue: MakeQueue) -> None:
    q = make_queue(clock=clock)
    q.put("x", 1.5)
    assert len(q) == 1
    clock.advance_ms(1499)
    with pytest.raises(queue.Empty):
        q.get_nowait()
    with pytest.raises(queue.Empty):
        q.get(timeout=0)
    clock.advance_ms(1)
    assert q.get_nowait() == "x"
    assert len(q) == 0


def test_items_come_out_in_due_then_insertion_order(
    clock: FakeClock, make_queue: MakeQueue
) -> None:
    q = make_queue(clock=clock)
    q.put("c", 3)
    q.put("a1", 1)
    q.put("now")
    q.put("b", 2)
    q.put("a2", 1)
    q.put("a3", when=(clock.now_ms() + 1000) / 1000)
    assert drain_nowait(q) == ["now"]
    clock.advance_ms(5000)
    assert drain_nowait(q) == ["a1", "a2", "a3", "b", "c"]


def test_put_when_aware_datetime(clock: FakeClock, make_queue: MakeQueue) -> None:
    q = make_queue(clock=clock)
    q.put("x", when=datetime.fromtimestamp((clock.now_ms() + 700) / 1000, UTC))
    clock.advance_ms(699)
    assert drain_nowait(q) == []
    clock.advance_ms(1)
    assert drain_nowait(q) == ["x"]


def test_put_returns_keys_and_a_key_replaces_its_item(
    clock: FakeClock, make_queue: MakeQueue
) -> None:
    q = make_queue(clock=clock)
    k1, k2 = q.put("a", 1), q.put("b", 1)
    assert k1 != k2
    assert q.put("old", 1, key="k") == "k"
    assert q.put("new", 2, key="k") == "k"
    assert len(q) == 3
    clock.advance_ms(1000)
    assert drain_nowait(q) == ["a", "b"]
    clock.advance_ms(1000)
    assert drain_nowait(q) == ["new"]


def test_cancel(clock: FakeClock, make_queue: MakeQueue) -> None:
    q = make_queue(clock=clock)
    key = q.put("gone", 1)
    q.put("kept", 1, key=("kept", 1))
    assert q.cancel(key) is True
    assert q.cancel(key) is False
    assert q.cancel("never") is False
    assert len(q) == 1
    clock.advance_ms(1000)
    assert drain_nowait(q) == ["kept"]
    assert q.cancel(("kept", 1)) is False


def test_reschedule(clock: FakeClock, make_queue: MakeQueue) -> None:
    q = make_queue(clock=clock)
    earlier = q.put("earlier", 10)
    later = q.put("later", 1)
    assert q.reschedule(earlier, 2) is True
    assert q.reschedule(later, 3) is True
    assert q.reschedule("never", 1) is False
    clock.advance_ms(1999)
    assert drain_nowait(q) == []
    clock.advance_ms(1)
    assert drain_nowait(q) == ["earlier"]
    clock.advance_ms(1000)
    assert drain_nowait(q) == ["later"]
    assert q.reschedule(later, 1) is False


def test_keys_of_keyless_puts_work_before_and_after_other_puts_and_gets(
    clock: FakeClock, make_queue: MakeQueue
) -> None:
    """The queue indexes keyless entries only once one of their keys is used."""
    q = make_queue(clock=clock)
    first, second, third = q.put("first"), q.put("second", 1), q.put("third", 2)
    assert q.get_nowait() == "first"
    assert q.cancel(first) is False  # handed out already
    assert q.reschedule(second, 3) is True  # the first use of a returned key
    fourth = q.put("fourth", 1)  # indexed as it is put, from now on
    assert q.cancel(fourth) is True
    assert q.put("third again", 1, key=third) == third
    assert len(q) == 2
    clock.advance_ms(1000)
    assert drain_nowait(q) == ["third again"]
    clock.advance_ms(2000)
    assert drain_nowait(q) == ["second"]
    assert len(q) == 0
    fifth = q.put("fifth")  # the queue ran empty: not indexed again until a key is used
    assert q.cancel(fifth) is True
    assert len(q) == 0


def test_a_clock_that_may_step_back_is_read_for_every_due_check(make_queue: MakeQueue) -> None:
    """Items due by a time such a clock showed are not taken as due once it shows less."""

    class SteppingClock:
        def __init__(self) -> None:
            self.now_ms = 1_700_000_000_000

        def now_ns(self) -> int:
            return self.now_ms * 1_000_000

        def watch(self, wake: Callable[[], None]) -> Callable[[], None]:
            return lambda: None

    clock = SteppingClock()
    q = make_queue(clock=clock)
    q.put("now")
    assert q.get_nowait() == "now"
    clock.now_ms -= 60_000
    q.put("in a second", 1)
    with pytest.raises(queue.Empty):
        q.get_nowait()
    clock.now_ms += 1000
    assert q.get_nowait() == "in a second"


def test_a_system_clock_subclass_is_read_through_its_now_ns(make_queue: MakeQueue) -> None:
    class HourAhead(SystemClock):
        def now_ns(self) -> int:
            return super().now_ns() + 3600 * 1_000_000_000

    q = make_queue(clock=HourAhead())
    q.put("due by the clock given", when=time.time() + 60)
    assert q.get_nowait() == "due by the clock given"


def test_get_blocks_until_the_clock_reaches_due(
    clock: FakeClock, make_queue: MakeQueue, spawn: Spawn
) -> None:
    q = make_queue(clock=clock)
    q.put("x", 1)
    getter = spawn(q.get)
    assert not getter.wait(BLOCKED_S)
    clock.advance_ms(999)
    assert not getter.wait(BLOCKED_S)
    clock.advance_ms(1)
    assert getter.wait(WAIT_S)
    assert getter.result == "x"


def test_get_timeout_raises_empty(clock: FakeClock, make_queue: MakeQueue) -> None:
    q = make_queue(clock=clock)
    started = time.monotonic()
    with pytest.raises(queue.Empty):
        q.get(timeout=0.05)
    assert time.monotonic() - started >= 0.04
    q.put("not yet", 1)
    with pytest.raises(queue.Empty):
        q.get(timeout=0.01)
    with pytest.raises(queue.Empty):
        q.get_nowait()
    assert len(q) == 1


def test_get_with_timeout_returns_an_item_that_comes_due(
    clock: FakeClock, make_queue: MakeQueue, spawn: Spawn
) -> None:
    q = make_queue(clock=clock)
    q.put("x", 60)
    getter = spawn(q.get, 30.0)
    assert not getter.wait(BLOCKED_S)
    clock.advance_ms(60_000)
    assert getter.wait(WAIT_S)
    assert getter.result == "x"


def test_close_returns_held_items_and_refuses_more(clock: FakeClock, make_queue: MakeQueue) -> None:
    q = make_queue(clock=clock)
    q.put("due")
    q.put("later", 10)
    q.put("much later", 3600)
    assert q.close() == ["due", "later", "much later"]
    assert q.close() == []
    assert len(q) == 0
    with pytest.raises(Closed):
        q.put("x")
    with pytest.raises(Closed):
        q.get()
    with pytest.raises(Closed):
        q.get(timeout=1)
    with pytest.raises(Closed):
        q.get_nowait()
    assert q.cancel("x") is False


def test_close_wakes_every_blocked_get_with_closed(
    clock: FakeClock, make_queue: MakeQueue, spawn: Spawn
) -> None:
    q = make_queue(clock=clock)
    q.put("held", 10)
    getters = [spawn(q.get), spawn(q.get), spawn(q.get, 30.0)]
    time.sleep(BLOCKED_S)
    assert not any(g.done.is_set() for g in getters)
    assert q.close() == ["held"]
    for getter in getters:
        assert getter.wait(WAIT_S)
        assert isinstance(getter.error, Closed)


@pytest.mark.parametrize("how", ["put-due-now", "clock-jump"])
def test_several_due_items_release_several_blocked_getters(
    clock: FakeClock, make_queue: MakeQueue, spawn: Spawn, how: str
) -> None:
    """Only the first put is the earliest; the rest are reached by getters passing it on."""
    q = make_queue(clock=clock)
    getters = [spawn(q.get) for _ in range(4)]
    time.sleep(BLOCKED_S)
    for n in range(4):
        q.put(n, 0 if how == "put-due-now" else 1)
    if how == "clock-jump":
        clock.advance_ms(1000)
    for getter in getters:
        assert getter.wait(WAIT_S)
    assert sorted(g.result for g in getters) == [0, 1, 2, 3]


# ---- DelayQueue wake-ups on the real clock -----------------------------------------------------


def test_put_of_an_earlier_item_wakes_a_blocked_get(make_queue: MakeQueue, spawn: Spawn) -> None:
    clock = SystemClock()
    q = make_queue(clock=clock)
    q.put("in ten seconds", 10)
    getter = spawn(q.get)
    time.sleep(BLOCKED_S)  # the getter now sleeps until the item 10 s away
    put_ns = clock.now_ns()
    q.put("now")
    assert getter.wait(1.0), "an earlier put did not wake the blocked get"
    assert getter.result == "now"
    assert clock.now_ns() >= put_ns
    assert q.close() == ["in ten seconds"]


def test_put_with_a_short_delay_wakes_a_blocked_get_not_before_due(
    make_queue: MakeQueue, spawn: Spawn
) -> None:
    clock = SystemClock()
    q = make_queue(clock=clock)
    q.put("in ten seconds", 10)

    def get_and_stamp() -> tuple[Any, int]:
        return q.get(), clock.now_ns()

    getter = spawn(get_and_stamp)
    time.sleep(BLOCKED_S)
    put_ns = clock.now_ns()
    q.put("soon", 0.1)
    assert getter.wait(1.5)
    item, got_ns = getter.result
    assert item == "soon"
    assert got_ns >= put_ns + 100_000_000, "handed out before its due time"
    assert got_ns - put_ns < 0.6e9


def test_reschedule_earlier_wakes_a_blocked_get(make_queue: MakeQueue, spawn: Spawn) -> None:
    q = make_queue(clock=SystemClock())
    key = q.put("x", 10)
    getter = spawn(q.get)
    time.sleep(BLOCKED_S)
    assert q.reschedule(key, 0.05) is True
    assert getter.wait(1.0), "rescheduling earlier did not wake the blocked get"
    assert getter.result == "x"


def test_timed_out_get_does_not_swallow_the_wake_up_of_an_earlier_put(
    make_queue: MakeQueue, spawn: Spawn
) -> None:
    # a get that times out passes on the wake-up a put meant for the next getter
    q = make_queue(clock=SystemClock())
    impatient = spawn(q.get, 0.2)  # first in the condition's waiter list
    time.sleep(BLOCKED_S)
    patient = spawn(q.get)
    time.sleep(BLOCKED_S)
    q.put("x", 0.3)  # the notify goes to `impatient`, which gives up at 0.2 s
    assert impatient.wait(WAIT_S)
    assert isinstance(impatient.error, queue.Empty)
    assert patient.wait(1.5), "the item came due but the waiting get() was never woken"
    assert patient.result == "x"


def test_many_producers_and_consumers_each_item_once_never_early(
    make_queue: MakeQueue, spawn: Spawn
) -> None:
    producers, consumers, per_producer = 4, 4, 2000
    clock = SystemClock()
    q = make_queue(clock=clock)
    received: list[list[tuple[int, int, int]]] = [[] for _ in range(consumers)]
    early: list[tuple[tuple[int, int, int], int]] = []

    def produce(pid: int) -> None:
        rng = random.Random(pid)
        for seq in range(per_producer):
            delay = rng.uniform(0, 0.05)
            # the queue reads the clock after this, so its due time is never earlier
            due_ns = clock.now_ns() + int(delay * 1e9)
            q.put((pid, seq, due_ns), delay)

    def consume(cid: int) -> None:
        while True:
            try:
                item = q.get()
            except Closed:
                return
            now_ns = clock.now_ns()
            if now_ns < item[2]:
                early.append((item, now_ns))
            received[cid].append(item)

    consuming = [spawn(consume, c) for c in range(consumers)]
    producing = [spawn(produce, p) for p in range(producers)]
    for worker in producing:
        assert worker.wait(10)
        assert worker.error is None
    deadline = time.monotonic() + 10
    total = producers * per_producer
    while sum(map(len, received)) < total and time.monotonic() < deadline:
        time.sleep(0.01)
    assert q.close() == [], "items still held after every one should have come due"
    for worker in consuming:
        assert worker.wait(WAIT_S)
        assert worker.error is None

    got = Counter((pid, seq) for items in received for pid, seq, _ in items)
    assert not [item for item, count in got.items() if count > 1], "an item was handed out twice"
    expected = {(pid, seq) for pid in range(producers) for seq in range(per_producer)}
    assert set(got) == expected, f"{len(expected - set(got))} items lost"
    assert not early, f"{len(early)} items handed out before due, e.g. {early[:3]}"


# ---- AsyncDelayQueue ---------------------------------------------------------------------------


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


async def test_async_get_waits_until_the_clock_reaches_due(clock: FakeClock) -> None:
    q: AsyncDelayQueue[str] = AsyncDelayQueue(clock=clock)
    try:
        q.put("x", 1)
        task = asyncio.create_task(q.get())
        await settle()
        assert not task.done()
        clock.advance_ms(999)
        await settle()
        assert not task.done()
        clock.advance_ms(1)
        assert await asyncio.wait_for(task, WAIT_S) == "x"
    finally:
        q.close()


async def test_async_order_get_nowait_cancel_reschedule(clock: FakeClock) -> None:
    q: AsyncDelayQueue[str] = AsyncDelayQueue(clock=clock)
    try:
        q.put("b", 2)
        q.put("a", 1)
        gone = q.put("gone", 1)
        q.put("now")
        moved = q.put("moved", 10)
        q.put("replaced", 1, key="k")
        q.put("replacement", 3, key="k")
        assert q.cancel(gone) is True
        assert q.reschedule(moved, 1.5) is True
        assert drain_nowait(q) == ["now"]
        clock.advance_ms(1000)
        assert drain_nowait(q) == ["a"]
        clock.advance_ms(2000)
        assert drain_nowait(q) == ["moved", "b", "replacement"]
        assert len(q) == 0
    finally:
        q.close()


async def test_async_earlier_put_wakes_a_get(clock: FakeClock) -> None:
    q: AsyncDelayQueue[str] = AsyncDelayQueue(clock=clock)
    try:
        q.put("in ten seconds", 10)
        task = asyncio.create_task(q.get())
        await settle()
        q.put("now")
        assert await asyncio.wait_for(task, WAIT_S) == "now"
    finally:
        assert q.close() == ["in ten seconds"]


async def test_async_earlier_put_wakes_a_get_real_clock() -> None:
    clock = SystemClock()
    q: AsyncDelayQueue[str] = AsyncDelayQueue(clock=clock)
    try:
        q.put("in ten seconds", 10)
        task = asyncio.create_task(q.get())
        await asyncio.sleep(0.02)
        put_ns = clock.now_ns()
        q.put("soon", 0.05)
        assert await asyncio.wait_for(task, 1.0) == "soon"
        got_ns = clock.now_ns()
        assert got_ns >= put_ns + 50_000_000, "handed out before its due time"
        assert got_ns - put_ns < 0.5e9
    finally:
        q.close()


async def test_async_reschedule_earlier_wakes_a_get() -> None:
    q: AsyncDelayQueue[str] = AsyncDelayQueue(clock=SystemClock())
    try:
        key = q.put("x", 10)
        task = asyncio.create_task(q.get())
        await asyncio.sleep(0.02)
        assert q.reschedule(key, 0.02) is True
        assert await asyncio.wait_for(task, 1.0) == "x"
    finally:
        q.close()


async def test_async_for_ends_on_close(clock: FakeClock) -> None:
    q: AsyncDelayQueue[int | str] = AsyncDelayQueue(clock=clock)
    for n in range(3):
        q.put(n)
    q.put("later", 5)

    async def collect() -> list[int | str]:
        return [item async for item in q]

    task = asyncio.create_task(collect())
    await settle()
    assert not task.done()
    assert q.close() == ["later"]
    assert await asyncio.wait_for(task, WAIT_S) == [0, 1, 2]
    with pytest.raises(Closed):
        q.put("x")
    with pytest.raises(Closed):
        await q.get()


async def test_async_close_wakes_pending_gets_with_closed(clock: FakeClock) -> None:
    q: AsyncDelayQueue[str] = AsyncDelayQueue(clock=clock)
    tasks = [asyncio.create_task(q.get()) for _ in range(3)]
    await settle()
    assert q.close() == []
    for task in tasks:
        with pytest.raises(Closed):
            await asyncio.wait_for(task, WAIT_S)


async def test_async_several_due_items_release_several_getters(clock: FakeClock) -> None:
    q: AsyncDelayQueue[int] = AsyncDelayQueue(clock=clock)
    try:
        tasks = [asyncio.create_task(q.get()) for _ in range(4)]
        await settle()
        for n in range(4):
            q.put(n)
        got = await asyncio.wait_for(asyncio.gather(*tasks), WAIT_S)
        assert sorted(got) == [0, 1, 2, 3]
    finally:
        q.close()


async def test_async_cancelled_getter_passes_on_its_wake_up(clock: FakeClock) -> None:
    """The woken getter is cancelled before it runs: the other getter must get the item."""
    q: AsyncDelayQueue[str] = AsyncDelayQueue(clock=clock)
    try:
        first = asyncio.create_task(q.get())
        await settle()
        second = asyncio.create_task(q.get())
        await settle()
        q.put("x")  # wakes `first`, the earliest waiter
        first.cancel()
        assert await asyncio.wait_for(second, WAIT_S) == "x"
        assert first.cancelled()
    finally:
        q.close()


async def test_async_getter_cancelled_while_waiting_leaves_no_trace(clock: FakeClock) -> None:
    q: AsyncDelayQueue[str] = AsyncDelayQueue(clock=clock)
    try:
        first = asyncio.create_task(q.get())
        second = asyncio.create_task(q.get())
        await settle()
        first.cancel()
        await settle()
        q.put("x")
        assert await asyncio.wait_for(second, WAIT_S) == "x"
        assert first.cancelled()
    finally:
        q.close()


async def test_async_cancelled_getter_after_rearming_passes_on_its_wake_up() -> None:
    # a cancelled getter passes on the wake-up a put meant for the next getter
    q: AsyncDelayQueue[str] = AsyncDelayQueue(clock=SystemClock())
    first = asyncio.create_task(q.get())
    await asyncio.sleep(0.01)
    second = asyncio.create_task(q.get())
    try:
        await asyncio.sleep(0.01)
        q.put("x", 0.1)  # wakes `first`, which re-arms for 0.1 s
        await asyncio.sleep(0.01)
        first.cancel()
        done, _ = await asyncio.wait({second}, timeout=1.5)
        assert second in done, "the item came due but the other getter was never woken"
        assert second.result() == "x"
    finally:
        q.close()
        await asyncio.gather(first, second, return_exceptions=True)


async def test_async_wait_for_timeout_does_not_swallow_the_wake_up() -> None:
    # the same, reached through a get with a timeout
    q: AsyncDelayQueue[str] = AsyncDelayQueue(clock=SystemClock())
    impatient = asyncio.create_task(asyncio.wait_for(q.get(), 0.1))
    await asyncio.sleep(0.02)
    patient = asyncio.create_task(q.get())
    try:
        await asyncio.sleep(0.02)
        q.put("x", 0.2)
        with pytest.raises(TimeoutError):
            await impatient
        done, _ = await asyncio.wait({patient}, timeout=1.5)
        assert patient in done, "the item came due but the other getter was never woken"
        assert patient.result() == "x"
    finally:
        q.close()
        await asyncio.gather(impatient, patient, return_exceptions=True)


def test_async_queue_needs_a_running_loop() -> None:
    with pytest.raises(RuntimeError):
        AsyncDelayQueue()


async def test_async_put_both_delay_and_when_is_rejected(clock: FakeClock) -> None:
    q: AsyncDelayQueue[str] = AsyncDelayQueue(clock=clock)
    try:
        with pytest.raises(InvalidArgument) as info:
            q.put("x", 1, when=clock.now_ms() / 1000)
        assert info.value.argument == "when"
        assert len(q) == 0
    finally:
        q.close()


def test_threads_put_on_one_queue_get_in_due_order(
    clock: FakeClock, make_queue: MakeQueue, spawn: Spawn
) -> None:
    """Puts from several threads at once: nothing lost, and one consumer sees due order."""
    q = make_queue(clock=clock)
    barrier = threading.Barrier(4)

    def put_many(base: int) -> None:
        barrier.wait()
        for n in range(250):
            q.put((n % 50, base, n), (n % 50) / 1000)

    putters = [spawn(put_many, b) for b in range(4)]
    for putter in putters:
        assert putter.wait(WAIT_S)
    assert len(q) == 1000
    clock.advance_ms(100)
    got = drain_nowait(q)
    assert len(got) == 1000
    assert [due for due, _, _ in got] == sorted(due for due, _, _ in got)
