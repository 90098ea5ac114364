"""The queue table a page or a queue at a time (`Store.list_queues`, `Store.queue_info`), on
every backend: the same queues, counts and settings as `queue_infos`, each queue once."""

from __future__ import annotations

import pytest

from tickwheel.errors import InvalidArgument
from tickwheel.model import State, Timer
from tickwheel.stores import Store
from tickwheel.stores.base import Limit, QueueInfo, QueueSettings

from .conftest import ManualClock

ZERO = dict.fromkeys(State, 0)


def timer(clock: ManualClock, delay_ms: int, **fields: object) -> Timer:
    return Timer(due_ms=clock.now_ms + delay_ms, **fields)  # type: ignore[arg-type]


async def every_page(store: Store, limit: int) -> list[QueueInfo]:
    """Follow `list_queues` to the end; no page is over `limit`, and only the last is short."""
    listed: list[QueueInfo] = []
    cursor = None
    while True:
        page = await store.list_queues(limit, cursor)
        assert len(page.queues) <= limit
        listed += page.queues
        if page.cursor is None:
            return listed
        assert len(page.queues) == limit
        assert page.cursor == page.queues[-1].name
        cursor = page.cursor


async def mixed(store: Store, clock: ManualClock) -> None:
    """Queues with timers in every state, one with settings too, one with settings alone."""
    await store.add_many(
        [timer(clock, 0, id=f"a{n}", queue="a") for n in range(5)]
        + [timer(clock, 700, id="b1", queue="b"), timer(clock, 60_000, id="d1")]
        + [timer(clock, 900, id="z1", queue="z.last")]
    )
    leases = await store.claim("a", clock.now_ms, 3, 1000)
    await store.ack(leases[0])
    await store.kill(leases[1], "boom")
    assert await store.pause("a4")
    await store.set_queue("b", QueueSettings(limit=Limit(rate=2)))
    await store.set_queue("idle", QueueSettings(paused=True))


async def test_paging_through_2500_queues_returns_each_once_in_name_order(
    store: Store, clock: ManualClock
) -> None:
    names = [f"q{n:05}" for n in range(2500)]
    await store.add_many([timer(clock, 1000 + n, id=f"t{n}", queue=q) for n, q in enumerate(names)])
    # queues with settings alone, between and after the others
    await store.set_queue("q00042x", QueueSettings(paused=True))
    await store.set_queue("zz", QueueSettings(limit=Limit(concurrency=3)))
    expected = sorted([*names, "q00042x", "zz"])
    for limit in (1000, 97):
        listed = await every_page(store, limit)
        assert [info.name for info in listed] == expected
    by_name = {info.name: info for info in await every_page(store, 1000)}
    assert by_name["q00007"].counts == ZERO | {State.SCHEDULED: 1}
    assert by_name["q00007"].earliest_due_ms == clock.now_ms + 1007
    assert by_name["q00042x"] == QueueInfo("q00042x", ZERO, None, QueueSettings(paused=True))
    assert by_name == {info.name: info for info in await store.queue_infos()}


async def test_a_queue_with_settings_and_no_timers_is_listed(
    store: Store, clock: ManualClock
) -> None:
    assert (await store.list_queues()).queues == []
    assert (await store.list_queues()).cursor is None
    await store.set_queue("idle", QueueSettings(paused=True))
    page = await store.list_queues()
    assert page.queues == [QueueInfo("idle", ZERO, None, QueueSettings(paused=True))]
    assert page.cursor is None
    await store.set_queue("idle", QueueSettings())  # the defaults remove the settings
    assert (await store.list_queues()).queues == []


async def test_one_queue_and_every_page_match_the_full_listing(
    store: Store, clock: ManualClock
) -> None:
    await mixed(store, clock)
    infos = await store.queue_infos()
    assert [info.name for info in infos] == ["a", "b", "default", "idle", "z.last"]
    assert infos[0].counts == ZERO | {
        State.SCHEDULED: 1,
        State.LEASED: 1,
        State.DONE: 1,
        State.DEAD: 1,
        State.PAUSED: 1,
    }
    for info in infos:
        assert await store.queue_info(info.name) == info
    for limit in (1, 2, 5, 100):
        assert await every_page(store, limit) == infos
    # a page from a cursor that names no queue starts after it
    assert [i.name for i in (await store.list_queues(2, "c")).queues] == ["default", "idle"]


async def test_an_unknown_queue_reads_as_empty(store: Store, clock: ManualClock) -> None:
    await store.add(timer(clock, 0, id="x", queue="other"))
    assert await store.queue_info("nothing") == QueueInfo("nothing", ZERO, None, QueueSettings())


async def test_queues_leave_the_pages_with_their_last_timer(
    store: Store, clock: ManualClock, settings: object
) -> None:
    await store.add_many([timer(clock, 0, id="c1", queue="c"), timer(clock, 0, id="k1", queue="k")])
    await store.add(timer(clock, 0, id="m1", queue="m"))
    assert await store.cancel("c1")
    (lease,) = await store.claim("k", clock.now_ms, 1, 1000)
    await store.ack(lease)
    assert [i.name for i in await every_page(store, 1)] == ["k", "m"]
    assert (await store.queue_info("c")).counts == ZERO
    clock.advance(60_001)  # past the done timer's retention (the fixture's 60 s)
    assert [i.name for i in await every_page(store, 1)] == ["m"]
    assert (await store.queue_info("k")).counts == ZERO
    assert await store.cancel("m1")
    assert (await store.list_queues()).queues == []


@pytest.mark.parametrize("limit", [0, -1, 1001])
async def test_a_page_size_out_of_range_is_refused(store: Store, limit: int) -> None:
    with pytest.raises(InvalidArgument):
        await store.list_queues(limit)


@pytest.mark.parametrize("queue", ["", "a b", "x" * 1000, "*"])
async def test_a_name_no_queue_can_have_is_refused(store: Store, queue: str) -> None:
    with pytest.raises(InvalidArgument):
        await store.queue_info(queue)
