"""Redis-specific tests of durable schedules: where they live, the round trips `advance` costs,
and compare-and-set between stores racing on one schedule.

The behaviour every store shares is in test_contract_schedules.py (run against "redis" and
"redis-cluster" too).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from tickwheel.errors import InvalidArgument, LeaseLost, StoreUnavailable
from tickwheel.model import Callback, State, Timer, occurrence_id
from tickwheel.schedule import Misfire, Schedule
from tickwheel.stores import Lease, StoreSettings
from tickwheel.stores.redis import RedisStore, shard_of
from tickwheel.stores.redis.scripts import Arg, ScriptCall
from tickwheel.stores.redis.stored_schedules import CHANGED

from .conftest import ManualClock
from .test_redis import Server, all_keys, assert_layout_consistent, inspector, node_clients

HOOK = Callback(url="https://example.com/tick")
LEASE_MS = 30_000


@pytest.fixture(params=["redis_server", "redis_cluster"])
def server(request: pytest.FixtureRequest) -> Server:
    found: Server = request.getfixturevalue(request.param)
    return found


def open_store(server: Server, clock: ManualClock, prefix: str) -> RedisStore:
    """A store in 16 shards, a Cluster's default, on either server: the work across shards."""
    return RedisStore.from_url(
        server.url, StoreSettings(retention_ms=60_000), prefix=prefix, clock=clock, shards=16
    )


@pytest.fixture
def prefix() -> str:
    return f"t{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def store(server: Server, clock: ManualClock, prefix: str) -> AsyncIterator[RedisStore]:
    opened = open_store(server, clock, prefix)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def rival(server: Server, clock: ManualClock, prefix: str) -> AsyncIterator[RedisStore]:
    """A second store on the same keys: another worker, on its own connections."""
    opened = open_store(server, clock, prefix)
    try:
        yield opened
    finally:
        await opened.close()


def every(clock: ManualClock, seconds: float = 10, **fields: Any) -> Schedule:
    values: dict[str, Any] = {"id": "s1", "every_s": seconds, "start_ms": clock.now_ms}
    values.update(fields)
    if "payload" not in values:
        values.setdefault("callback", HOOK)
    return Schedule(**values)


async def claim(store: RedisStore, clock: ManualClock) -> list[Lease]:
    return await store.claim("default", clock.now_ms, 1000, LEASE_MS)


async def pending_of(store: RedisStore, schedule_id: str) -> list[str]:
    """The scheduled occurrences of one schedule."""
    page = await store.list(State.SCHEDULED, limit=1000)
    return sorted(t.id for t in page.timers if t.id.startswith(f"{schedule_id}@"))


async def assert_one_pending(store: RedisStore, schedule_id: str) -> None:
    """The schedule's state names the one scheduled occurrence it has (none when ended)."""
    state = await store.get_schedule(schedule_id)
    assert state is not None
    expected = [] if state.next_ms is None else [occurrence_id(schedule_id, state.next_ms)]
    assert await pending_of(store, schedule_id) == expected


class Calls:
    """Counts the pipelines and single script calls a store sends."""

    def __init__(self, store: RedisStore, monkeypatch: pytest.MonkeyPatch) -> None:
        self.pipelines: list[list[str]] = []
        self.singles: list[str] = []
        scripts = store._shards._scripts
        run_many, run = scripts.run_many, scripts.run

        async def counted_many(calls: Sequence[ScriptCall]) -> list[Any]:
            self.pipelines.append([name for name, _, _ in calls])
            return await run_many(calls)

        async def counted(name: str, keys: Sequence[str], args: Sequence[Arg]) -> Any:
            self.singles.append(name)
            return await run(name, keys, args)

        monkeypatch.setattr(scripts, "run_many", counted_many)
        monkeypatch.setattr(scripts, "run", counted)


async def test_a_schedule_and_its_occurrences_share_a_shard_and_slot(
    redis_cluster: Any, clock: ManualClock, prefix: str
) -> None:
    store = open_store(redis_cluster, clock, prefix)
    try:
        ids = [f"job.{n}" for n in range(40)]
        for schedule_id in ids:
            await store.add_schedule(every(clock, id=schedule_id))
        leases = await claim(store, clock)
        assert await store.advance(leases) == [True] * len(ids)
        with inspector(redis_cluster) as client:
            for schedule_id in ids:
                tag = store.shard_keys(shard_of(schedule_id, store.shards)).tag
                assert client.hexists(f"{tag}:s", schedule_id)
                assert client.zscore(f"{tag}:si", schedule_id) == 0
                for nominal in (clock.now_ms, clock.now_ms + 10_000):
                    assert client.hexists(f"{tag}:r", occurrence_id(schedule_id, nominal))
        keys = all_keys(redis_cluster, prefix)
        assert {key.split("}:")[1].split(":")[0] for key in keys} >= {"s", "si", "r"}
        with node_clients(redis_cluster)[0] as client:
            slots: dict[str, set[int]] = {}
            for key in keys:
                slot = client.execute_command("CLUSTER", "KEYSLOT", key)
                slots.setdefault(key.split("}")[0], set()).add(slot)
        assert all(len(shard_slots) == 1 for shard_slots in slots.values())
        assert_layout_consistent(redis_cluster, store)
    finally:
        await store.close()


async def test_advance_costs_two_pipelines_for_any_shards_and_none_for_plain_timers(
    store: RedisStore, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = [f"s{n}" for n in range(40)]
    assert len({shard_of(i, store.shards) for i in ids}) > 8
    for schedule_id in ids:
        await store.add_schedule(every(clock, id=schedule_id))
    await store.add_many([Timer(id=f"plain{n}", due_ms=clock.now_ms, payload=n) for n in range(5)])
    leases = await claim(store, clock)
    plain = [lease for lease in leases if "@" not in lease.timer.id]
    calls = Calls(store, monkeypatch)
    assert await store.advance(plain) == [True] * 5
    assert (calls.pipelines, calls.singles) == ([], [])
    assert await store.advance(leases) == [True] * len(leases)
    assert calls.singles == []
    assert [set(names) for names in calls.pipelines] == [{"schedule_get"}, {"schedule_step"}]
    # one call per shard in each
    shards = len({shard_of(i, store.shards) for i in ids})
    assert [len(names) for names in calls.pipelines] == [shards, shards]
    for schedule_id in ids[:3]:
        await assert_one_pending(store, schedule_id)


async def test_two_stores_advancing_one_lease_record_one_run(
    store: RedisStore, rival: RedisStore, clock: ManualClock
) -> None:
    ids = [f"s{n}" for n in range(20)]
    start = clock.now_ms
    for schedule_id in ids:
        await store.add_schedule(every(clock, id=schedule_id))
    leases = await claim(store, clock)
    first, second = await asyncio.gather(store.advance(leases), rival.advance(leases))
    assert first == second == [True] * len(ids)
    for schedule_id in ids:
        state = await store.get_schedule(schedule_id)
        assert state is not None
        assert (state.runs, state.next_ms) == (1, start + 10_000)
        assert await pending_of(store, schedule_id) == [occurrence_id(schedule_id, start + 10_000)]


async def test_racing_updates_leave_one_pending_occurrence(
    store: RedisStore, rival: RedisStore, clock: ManualClock
) -> None:
    start = clock.now_ms
    await store.add_schedule(every(clock, 60))
    for n in range(15):
        clock.advance(100)
        await asyncio.gather(
            store.update_schedule(every(clock, 5 + n, start_ms=start)),
            rival.update_schedule(every(clock, 7 + n, start_ms=start, paused=n % 3 == 0)),
        )
        state = await store.get_schedule("s1")
        assert state is not None
        if state.schedule.paused:
            assert await pending_of(store, "s1") == []
        else:
            await assert_one_pending(store, "s1")


async def test_an_update_planned_before_an_advance_landed_is_planned_again(
    store: RedisStore, rival: RedisStore, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    start = clock.now_ms
    await store.add_schedule(every(clock, 10))
    [lease] = await claim(store, clock)
    steps = rival._schedules._steps
    raced: list[bool] = []

    async def advance_first(items: Any, now: int) -> list[int]:
        if not raced:  # between the update's read and its write
            raced.append(await store.advance([lease]) == [True])
        return await steps(items, now)

    monkeypatch.setattr(rival._schedules, "_steps", advance_first)
    changed = await rival.update_schedule(every(clock, 5, start_ms=start))
    assert raced == [True]
    assert changed is not None
    # planned again from the advanced state: the successor (start + 10 s) was cancelled
    assert (changed.runs, changed.next_ms) == (1, start + 5000)
    assert await pending_of(store, "s1") == [f"s1@{start + 5000}"]
    assert await store.get_schedule("s1") == changed


async def test_an_advance_planned_before_an_update_landed_is_planned_again(
    store: RedisStore, rival: RedisStore, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    start = clock.now_ms
    await store.add_schedule(every(clock, 10))
    [lease] = await claim(store, clock)
    steps = store._schedules._steps
    raced: list[bool] = []

    async def update_first(items: Any, now: int) -> list[int]:
        if not raced:
            raced.append(await rival.update_schedule(every(clock, 5, start_ms=start)) is not None)
        return await steps(items, now)

    monkeypatch.setattr(store._schedules, "_steps", update_first)
    assert await store.advance([lease]) == [True]  # in flight when changed: it fires
    assert raced == [True]
    state = await store.get_schedule("s1")
    assert state is not None
    # the update came after the occurrence in flight; the stale advance wrote nothing
    assert (state.runs, state.next_ms) == (0, start + 5000)
    assert await pending_of(store, "s1") == [f"s1@{start + 5000}"]


async def test_an_update_planned_while_in_flight_is_planned_again_once_it_is_not(
    store: RedisStore, rival: RedisStore, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planned with its occurrence in flight, an unchanged update leaves it alone; applied
    after a retry put it back, that plan would cancel it and the series would stall."""
    start = clock.now_ms
    await store.add_schedule(every(clock))
    [lease] = await claim(store, clock)
    steps = rival._schedules._steps
    raced: list[bool] = []

    async def retry_first(items: Any, now: int) -> list[int]:
        if not raced:
            await store.retry(lease, clock.now_ms, "busy")
            raced.append(True)
        return await steps(items, now)

    monkeypatch.setattr(rival._schedules, "_steps", retry_first)
    same = await rival.update_schedule(every(clock))
    assert raced == [True]
    assert same is not None
    assert same.next_ms == start
    assert await pending_of(store, "s1") == [f"s1@{start}"]
    # made again under its id, it kept its attempt: the old lease matches no new claim
    [again] = await claim(store, clock)
    assert again.token == lease.token + 1
    assert await store.advance([lease]) == [False]
    assert await store.advance([again]) == [True]


async def test_a_lost_lease_of_an_occurrence_already_decided_does_not_fire(
    store: RedisStore, clock: ManualClock
) -> None:
    start = clock.now_ms
    await store.add_schedule(every(clock))
    [stale] = await claim(store, clock)
    assert await store.advance([stale]) == [True]
    clock.advance(LEASE_MS + 1)
    [current] = [x for x in await claim(store, clock) if x.timer.id == f"s1@{start}"]
    assert await store.advance([stale, current]) == [False, True]
    assert await store.delete_schedule("s1")
    assert await store.advance([stale, current]) == [False, True]


async def test_a_skipped_occurrence_raced_by_a_delete_is_not_left_behind(
    store: RedisStore, rival: RedisStore, clock: ManualClock
) -> None:
    start = clock.now_ms
    await store.add_schedule(every(clock, misfire=Misfire.SKIP))
    clock.advance(65_000)
    [lease] = await claim(store, clock)
    fire, deleted = await asyncio.gather(store.advance([lease]), rival.delete_schedule("s1"))
    assert deleted is True
    assert await store.get_schedule("s1") is None
    assert await pending_of(store, "s1") == []
    skipped = await store.get(f"s1@{start}")
    # advanced first: skipped and deleted; deleted first: no schedule, so it fires
    assert (skipped is None) is (fire == [False])


async def test_a_schedule_that_keeps_changing_raises_store_unavailable(
    store: RedisStore, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.add_schedule(every(clock))
    [lease] = await claim(store, clock)

    async def always_changed(items: Sequence[Any], now: int) -> list[int]:
        return [CHANGED] * len(items)

    monkeypatch.setattr(store._schedules, "_steps", always_changed)
    with pytest.raises(StoreUnavailable, match="'s2' changed"):
        await store.add_schedule(every(clock, id="s2"))
    with pytest.raises(StoreUnavailable, match="'s1' changed"):
        await store.advance([lease])
    with pytest.raises(StoreUnavailable):
        await store.update_schedule(every(clock, 20))
    with pytest.raises(StoreUnavailable):
        await store.delete_schedule("s1")
    monkeypatch.undo()
    assert await store.get_schedule("s2") is None
    state = await store.get_schedule("s1")
    assert state is not None
    assert state.runs == 0
    assert await store.advance([lease]) == [True]


async def test_a_schedule_of_any_characters_is_compared_and_written_whole(
    store: RedisStore, clock: ManualClock
) -> None:
    """Steps frame values by their length in bytes: multi-byte text and newlines pass."""
    payload = {"text": "grüße → 雪\nline two", "n": [1, 2.5, None]}
    start = clock.now_ms
    await store.add_schedule(every(clock, payload=payload, queue="warm"))
    for _ in range(3):
        [lease] = await store.claim("warm", clock.now_ms, 10, LEASE_MS)
        assert lease.timer.payload == payload
        assert await store.advance([lease]) == [True]
        await store.ack(lease)
        clock.advance(10_000)
    changed = await store.update_schedule(
        every(clock, 20, start_ms=start, payload={**payload, "n": 3}, queue="warm")
    )
    assert changed is not None
    assert changed.runs == 3
    assert await store.get_schedule("s1") == changed
    assert await store.delete_schedule("s1")


async def test_list_schedules_walks_shards_in_order_at_any_limit(
    store: RedisStore, clock: ManualClock
) -> None:
    ids = [f"s{n:03d}" for n in range(30)]
    for schedule_id in ids:
        await store.add_schedule(every(clock, id=schedule_id))
    expected = sorted(ids, key=lambda i: (shard_of(i, store.shards), i))
    for limit in (1, 2, 3, 7, 29, 30, 31, 1000):
        seen: list[str] = []
        cursor = None
        while True:
            page = await store.list_schedules(limit=limit, cursor=cursor)
            assert len(page.schedules) <= limit
            seen += [state.schedule.id for state in page.schedules]
            if page.cursor is None:
                break
            cursor = page.cursor
        assert seen == expected, limit
    with pytest.raises(InvalidArgument):
        await store.list_schedules(cursor="nope")
    with pytest.raises(InvalidArgument):
        await store.list_schedules(cursor=f"{store.shards}:-")
    with pytest.raises(InvalidArgument):
        await store.list_schedules(limit=0)


async def test_an_occurrence_made_again_keeps_the_fencing_token_moving_on(
    store: RedisStore, clock: ManualClock
) -> None:
    start = clock.now_ms
    await store.add_schedule(every(clock))
    [old] = await claim(store, clock)
    assert await store.advance([old]) == [True]
    await store.ack(old)
    assert await store.delete_schedule("s1")
    await store.add_schedule(every(clock, start_ms=start, payload=2, callback=None))
    [new] = [x for x in await claim(store, clock) if x.timer.id == f"s1@{start}"]
    assert new.token > old.token
    with pytest.raises(LeaseLost):
        await store.ack(old)
    assert await store.advance([old]) == [False]


async def test_schedule_steps_keep_the_layout_and_counts_consistent(
    server: Server, store: RedisStore, clock: ManualClock
) -> None:
    for n in range(12):
        misfire = (Misfire.SKIP, Misfire.ONCE, Misfire.ALL)[n % 3]
        await store.add_schedule(every(clock, 10 + n, id=f"s{n}", misfire=misfire))
    clock.advance(65_000)
    leases = await claim(store, clock)
    fire = await store.advance(leases)
    assert fire.count(False) == 4  # the skips
    await store.ack_many([lease for lease, go in zip(leases, fire, strict=True) if go])
    await store.update_schedule(every(clock, 3600, id="s1", misfire=Misfire.ONCE))
    await store.update_schedule(every(clock, 11, id="s2", misfire=Misfire.ALL, paused=True))
    assert await store.delete_schedule("s3")
    assert_layout_consistent(server, store)
    stats = await store.stats()
    assert stats.counts[State.SCHEDULED] == 10  # one each but s2 (paused) and s3 (deleted)
    assert stats.counts[State.DONE] == 8
    for n in range(12):
        await store.delete_schedule(f"s{n}")
    assert not [key for key in all_keys(server, store.prefix) if key.endswith(("}:s", "}:si"))]
    assert (await store.stats()).counts[State.SCHEDULED] == 0
    assert_layout_consistent(server, store)
