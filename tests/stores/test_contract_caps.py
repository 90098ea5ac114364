"""The settings versions and the store-wide caps of the `Store` contract, on every backend:
each write of a settings table moves its version (so a worker reads only what changed), and a
store refuses a schedule or a host limit past its cap, writing nothing."""

from __future__ import annotations

import asyncio

import pytest

from tickwheel.errors import CapReached
from tickwheel.model import State, Timer
from tickwheel.schedule import Schedule
from tickwheel.stores import Store, StoreSettings
from tickwheel.stores.base import Limit, QueueSettings

from .conftest import ManualClock, StoreFactory


def every(clock: ManualClock, schedule_id: str) -> Schedule:
    return Schedule(id=schedule_id, every_s=60, start_ms=clock.now_ms + 60_000, payload=1)


async def test_each_settings_write_moves_its_own_version(store: Store) -> None:
    queues, limits = await store.settings_versions()
    await store.queue_settings()
    await store.limits()
    assert await store.settings_versions() == (queues, limits)  # reads move nothing
    writes = [
        lambda: store.set_queue("q", QueueSettings(paused=True)),
        lambda: store.pause_queue("q", False),
        lambda: store.set_queue_limit("q", Limit(rate=5)),
        lambda: store.set_queue_limit("q", None),
    ]
    for write in writes:
        await write()
        moved, same = await store.settings_versions()
        assert moved != queues
        assert same == limits
        queues = moved
    for write in [
        lambda: store.set_limit("api.example.com", Limit(rate=5)),
        lambda: store.set_limit("api.example.com", Limit(rate=6)),
        lambda: store.delete_limit("api.example.com"),
    ]:
        await write()
        same, moved = await store.settings_versions()
        assert moved != limits
        assert same == queues
        limits = moved


async def test_a_new_host_limit_past_the_cap_is_refused_and_nothing_written(
    make_store: StoreFactory, clock: ManualClock
) -> None:
    store = make_store(clock, StoreSettings(max_limits=2))
    try:
        await store.set_limit("a.example", Limit(rate=1))
        await store.set_limit("b.example", Limit(rate=1))
        with pytest.raises(CapReached) as refused:
            await store.set_limit("c.example", Limit(rate=1))
        assert (refused.value.kind, refused.value.cap, refused.value.field) == ("limits", 2, "host")
        await store.set_limit("a.example", Limit(rate=3))  # a host that has one may change it
        assert await store.limits() == {"a.example": Limit(rate=3), "b.example": Limit(rate=1)}
        assert await store.delete_limit("b.example")
        await store.set_limit("c.example", Limit(rate=1))
        assert sorted(await store.limits()) == ["a.example", "c.example"]
    finally:
        await store.close()


async def test_concurrent_new_host_limits_stop_at_the_cap(
    make_store: StoreFactory, clock: ManualClock
) -> None:
    store = make_store(clock, StoreSettings(max_limits=5))
    try:
        # open the connections first: redis-py's asyncio Cluster client can fail commands that
        # race to open a node's first connections ("'NoneType' object has no attribute
        # 'writelines'", a plain HSET as well), which is not what this test is about
        await asyncio.gather(*(store.limits() for _ in range(12)), return_exceptions=True)
        results = await asyncio.gather(
            *(store.set_limit(f"h{n}.example", Limit(rate=1)) for n in range(12)),
            return_exceptions=True,
        )
        refused = [r for r in results if isinstance(r, CapReached)]
        assert [r for r in results if r is not None and r not in refused] == []
        assert len(refused) == 7
        assert len(await store.limits()) == 5
    finally:
        await store.close()


async def test_a_new_schedule_past_the_cap_is_refused_and_nothing_written(
    make_store: StoreFactory, clock: ManualClock
) -> None:
    store = make_store(clock, StoreSettings(max_schedules=2))
    try:
        first = await store.add_schedule(every(clock, "s1"))
        await store.add_schedule(every(clock, "s2"))
        with pytest.raises(CapReached) as refused:
            await store.add_schedule(every(clock, "s3"))
        assert (refused.value.kind, refused.value.field) == ("schedules", "id")
        assert await store.get_schedule("s3") is None
        assert (await store.stats()).counts[State.SCHEDULED] == 2  # no occurrence of s3
        assert await store.add_schedule(every(clock, "s1")) == first  # idempotent at the cap
        assert await store.delete_schedule("s2")
        await store.add_schedule(every(clock, "s3"))
        page = await store.list_schedules()
        assert sorted(s.schedule.id for s in page.schedules) == ["s1", "s3"]
    finally:
        await store.close()


async def test_a_done_occurrence_is_kept_for_the_occurrence_retention_only(
    make_store: StoreFactory, clock: ManualClock
) -> None:
    store = make_store(clock, StoreSettings(retention_ms=60_000, occurrence_retention_ms=5_000))
    try:
        await store.add_schedule(Schedule(id="s1", every_s=3600, start_ms=clock.now_ms, payload=1))
        await store.add(Timer(id="plain", due_ms=clock.now_ms, payload=1))
        leases = await store.claim("default", clock.now_ms, 10, 30_000)
        assert await store.advance(leases) == [True, True]
        assert await store.ack_many(leases) == [True, True]
        occurrence = next(lease.timer.id for lease in leases if "@" in lease.timer.id)
        clock.advance(4_000)
        assert (await store.get(occurrence)) is not None
        clock.advance(2_000)
        assert await store.get(occurrence) is None
        plain = await store.get("plain")
        assert plain is not None
        assert plain.state is State.DONE
        assert (await store.stats()).counts[State.DONE] == 1  # deleted, not only hidden
        clock.advance(60_000)
        assert (await store.stats()).counts[State.DONE] == 0
    finally:
        await store.close()
