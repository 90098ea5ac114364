"""The due-queue index (`Store.due_queues`): every backend lists the queues a worker must claim
from, earliest first, whatever their number and names, and never late."""

from __future__ import annotations

import pytest

from tickwheel.errors import InvalidArgument
from tickwheel.model import Timer
from tickwheel.stores import Store
from tickwheel.stores.base import DueQueues

from .conftest import ManualClock

MINUTE = 60_000
DAY = 24 * 60 * MINUTE


def timer(clock: ManualClock, delay_ms: int, **fields: object) -> Timer:
    return Timer(due_ms=clock.now_ms + delay_ms, **fields)  # type: ignore[arg-type]


async def test_an_empty_store_has_no_due_queues(store: Store, clock: ManualClock) -> None:
    assert await store.due_queues(clock.now_ms + DAY, 10) == DueQueues([], None)


async def test_due_queues_are_listed_earliest_first_with_the_next_after_them(
    store: Store, clock: ManualClock
) -> None:
    await store.add(timer(clock, 3000, queue="c"))
    await store.add(timer(clock, 1000, queue="b"))
    await store.add(timer(clock, 2000, queue="a"))
    await store.add(timer(clock, 9000, queue="a"))
    await store.add(timer(clock, 2 * DAY, queue="later"))
    found = await store.due_queues(clock.now_ms + 2500, 10)
    assert found.queues == ["b", "a"]
    assert found.next_ms == clock.now_ms + 3000
    assert (await store.due_queues(clock.now_ms + 2000, 1)).queues == ["b"]
    everything = await store.due_queues(clock.now_ms + 3 * DAY, 10)
    assert everything.queues[:3] == ["b", "a", "c"]
    assert everything.queues[3] == "later"
    assert everything.next_ms is None


async def test_a_soon_queue_is_listed_behind_any_number_of_far_queues(
    store: Store, clock: ManualClock
) -> None:
    # the attack: far-future timers in many queues named to sort first must not hide a due one
    await store.add_many([timer(clock, 300 * DAY, queue=f"{n:04d}") for n in range(300)])
    await store.add(timer(clock, 1000, id="pay", queue="payments"))
    found = await store.due_queues(clock.now_ms + 1000, 5)
    assert found.queues == ["payments"]
    assert found.next_ms is not None
    assert found.next_ms <= clock.now_ms + 300 * DAY
    clock.advance(1000)
    (lease,) = await store.claim("payments", clock.now_ms, 10, 30_000)
    assert lease.timer.id == "pay"


async def test_a_lapsing_lease_brings_its_queue_back(store: Store, clock: ManualClock) -> None:
    await store.add(timer(clock, 0, id="t", queue="q"))
    (lease,) = await store.claim("q", clock.now_ms, 10, 500)
    assert (await store.due_queues(clock.now_ms, 10)).queues == []
    clock.advance(500)
    assert (await store.due_queues(clock.now_ms, 10)).queues == ["q"]
    (again,) = await store.claim("q", clock.now_ms, 10, 500)
    assert again.token == lease.token + 1


@pytest.mark.parametrize("how", ["retry", "defer", "reschedule", "resume", "replay"])
async def test_each_way_back_to_scheduled_lists_the_queue(
    store: Store, clock: ManualClock, how: str
) -> None:
    await store.add(timer(clock, 0, id="t", queue="q", payload=1))
    (lease,) = await store.claim("q", clock.now_ms, 10, DAY)
    if how == "retry":
        await store.retry(lease, clock.now_ms + 100, "again")
    elif how == "defer":
        await store.defer(lease, clock.now_ms + 100, "not sent")
    elif how == "replay":
        await store.kill(lease, "dead")
        assert await store.replay("t")
    else:
        await store.retry(lease, clock.now_ms + 2 * DAY, "later")
        if how == "reschedule":
            assert await store.reschedule("t", clock.now_ms + 100)
        else:
            assert await store.pause("t")
            assert await store.reschedule("t", clock.now_ms + 100)
            assert await store.resume("t")
    assert (await store.due_queues(clock.now_ms + 100, 10)).queues == ["q"]


async def test_a_queue_that_empties_drops_out_after_its_next_claim(
    store: Store, clock: ManualClock
) -> None:
    for n, queue in enumerate(("acked", "cancelled", "kept")):
        await store.add(timer(clock, n, id=queue, queue=queue))
    (acked,) = await store.claim("acked", clock.now_ms, 10, 30_000)
    await store.ack(acked)
    assert await store.cancel("cancelled")
    clock.advance(10)
    # an emptied queue may still be listed (early, never late); a claim of it sets it right
    for queue in (await store.due_queues(clock.now_ms + DAY, 10)).queues:
        if queue != "kept":
            assert await store.claim(queue, clock.now_ms, 10, 30_000) == []
    assert (await store.due_queues(clock.now_ms + DAY, 10)).queues == ["kept"]


async def test_due_queues_counts_a_queue_once_across_its_timers(
    store: Store, clock: ManualClock
) -> None:
    await store.add_many([timer(clock, n, id=f"t{n}", queue="busy") for n in range(200)])
    await store.add(timer(clock, 50, queue="quiet"))
    assert (await store.due_queues(clock.now_ms + 1000, 10)).queues == ["busy", "quiet"]


async def test_a_look_since_a_time_lists_every_queue_due_from_then(
    store: Store, clock: ManualClock
) -> None:
    await store.add_many([timer(clock, -5000, id=f"old{n}", queue=f"old{n}") for n in range(50)])
    await store.add(timer(clock, -100, queue="new"))
    await store.add(timer(clock, 500, queue="soon"))
    await store.add(timer(clock, 5000, queue="later"))
    found = await store.due_queues(clock.now_ms + 1000, 10, since_ms=clock.now_ms - 200)
    # the old queues may be left out (the point: a cheaper look), never the others
    assert [q for q in found.queues if not q.startswith("old")] == ["new", "soon"]
    assert found.next_ms == clock.now_ms + 5000
    everything = await store.due_queues(clock.now_ms + 1000, 100)
    assert len(everything.queues) == 52
    with pytest.raises(InvalidArgument):
        await store.due_queues(clock.now_ms, 10, since_ms=1.5)  # type: ignore[arg-type]


@pytest.mark.parametrize("limit", [0, -1, 10_001, True, 1.5])
async def test_due_queues_refuses_a_bad_limit(
    store: Store, clock: ManualClock, limit: object
) -> None:
    with pytest.raises(InvalidArgument):
        await store.due_queues(clock.now_ms, limit)  # type: ignore[arg-type]
