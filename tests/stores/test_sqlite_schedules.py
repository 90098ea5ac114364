"""What the SQLite store adds to the schedule contract: schedules in the file, shared by every
store on it, each call one transaction, and `advance` free for plain timers."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tickwheel.errors import LeaseLost, ScheduleExists, StoreUnavailable
from tickwheel.model import Callback, State, Timer
from tickwheel.schedule import Misfire, Schedule, ScheduleState
from tickwheel.stores import StoreSettings
from tickwheel.stores.sqlite import SqliteStore, queries
from tickwheel.stores.sqlite import stored_schedules as store_module

from .conftest import ManualClock

HOOK = Callback(url="https://example.com/tick")
LEASE_MS = 30_000


def every(clock: ManualClock, schedule_id: str = "s1", **fields: object) -> Schedule:
    values: dict[str, object] = {"id": schedule_id, "every_s": 10, "start_ms": clock.now_ms}
    values.update(fields)
    if "payload" not in values:
        values.setdefault("callback", HOOK)
    return Schedule(**values)  # type: ignore[arg-type]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "timers.db"


@pytest.fixture
async def store(path: Path, clock: ManualClock) -> AsyncIterator[SqliteStore]:
    opened = SqliteStore(path, StoreSettings(retention_ms=60_000), clock=clock)
    try:
        yield opened
    finally:
        await opened.close()


async def test_a_schedule_and_its_series_survive_reopening(
    store: SqliteStore, path: Path, clock: ManualClock
) -> None:
    start = clock.now_ms
    await store.add_schedule(every(clock, payload={"n": [1, 2]}))
    [lease] = await store.claim("default", clock.now_ms, 10, LEASE_MS)
    assert await store.advance([lease]) == [True]
    before = await store.get_schedule("s1")
    await store.close()

    again = SqliteStore(path, clock=clock)
    try:
        after = await again.get_schedule("s1")
        assert after == before
        assert after is not None
        assert (after.next_ms, after.runs, after.recent) == (start + 10_000, 1, (start,))
        assert after.schedule.payload == {"n": [1, 2]}
        # the lease taken before the restart still settles
        await again.ack(lease)
    finally:
        await again.close()


async def test_two_stores_on_one_file_share_the_series(
    store: SqliteStore, path: Path, clock: ManualClock
) -> None:
    other = SqliteStore(path, clock=clock)
    try:
        start = clock.now_ms
        await store.add_schedule(every(clock))
        [lease] = await other.claim("default", clock.now_ms, 10, LEASE_MS)
        assert await other.advance([lease]) == [True]
        state = await store.get_schedule("s1")
        assert state is not None
        assert state.next_ms == start + 10_000
        assert await store.get(f"s1@{start + 10_000}") is not None
        # the other store's codec decodes what this one wrote after its own change
        assert await store.update_schedule(every(clock, paused=True)) is not None
        paused = await other.get_schedule("s1")
        assert paused is not None
        assert paused.schedule.paused
        assert await other.get(f"s1@{start + 10_000}") is None
    finally:
        await other.close()


async def test_advance_of_plain_timers_does_not_touch_the_file(
    store: SqliteStore, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.add(Timer(id="plain", due_ms=clock.now_ms, payload=1))
    await store.add(Timer(id="other", due_ms=clock.now_ms, payload=2))
    leases = await store.claim("default", clock.now_ms, 10, LEASE_MS)
    assert len(leases) == 2

    async def no_file(*args: object) -> None:
        raise AssertionError("advance reached the file")

    monkeypatch.setattr(store, "_run", no_file)
    assert await store.advance(leases) == [True, True]
    assert await store.advance([]) == []


async def test_advance_is_one_transaction_for_the_whole_batch(
    store: SqliteStore, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    start = clock.now_ms
    await store.add_schedule(every(clock, "a"))
    await store.add_schedule(every(clock, "b"))
    leases = sorted(
        await store.claim("default", clock.now_ms, 10, LEASE_MS), key=lambda x: x.timer.id
    )
    encode = store_module.encode_schedule
    calls = 0

    def fail_second(state: ScheduleState) -> str:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise sqlite3.OperationalError("disk I/O error")
        return encode(state)

    monkeypatch.setattr(store_module, "encode_schedule", fail_second)
    with pytest.raises(StoreUnavailable, match="disk I/O error"):
        await store.advance(leases)
    monkeypatch.undo()
    # the first schedule's step was rolled back with the second's
    for schedule_id in "ab":
        state = await store.get_schedule(schedule_id)
        assert state is not None
        assert (state.next_ms, state.runs) == (start, 0)
        assert await store.get(f"{schedule_id}@{start + 10_000}") is None
    assert await store.advance(leases) == [True, True]


async def test_a_skipped_occurrence_is_deleted_only_while_its_lease_holds(
    store: SqliteStore, clock: ManualClock
) -> None:
    start = clock.now_ms
    await store.add_schedule(every(clock, misfire=Misfire.SKIP))
    clock.advance(65_000)
    [stale] = await store.claim("default", clock.now_ms, 10, LEASE_MS)
    clock.advance(LEASE_MS + 1)
    [current] = await store.claim("default", clock.now_ms, 10, LEASE_MS)
    assert await store.advance([stale]) == [False]
    assert await store.get(f"s1@{start}") is not None
    assert await store.advance([current]) == [False]
    assert await store.get(f"s1@{start}") is None
    with pytest.raises(LeaseLost):
        await store.ack(current)


async def test_new_occurrences_wake_a_waiting_worker(
    store: SqliteStore, clock: ManualClock
) -> None:
    await store.next_due_ms("jobs")  # as a worker looks before it waits
    assert await store.wait("jobs", 0.05) is False  # only a change wakes a waiter
    waiter = asyncio.create_task(store.wait("jobs", 5))
    await asyncio.sleep(0.01)
    await store.add_schedule(every(clock, queue="jobs"))
    assert await asyncio.wait_for(waiter, 1) is True

    [lease] = await store.claim("jobs", clock.now_ms, 10, LEASE_MS)
    waiter = asyncio.create_task(store.wait("jobs", 5))
    await asyncio.sleep(0.01)
    assert await store.advance([lease]) == [True]
    assert await asyncio.wait_for(waiter, 1) is True


async def test_a_finished_occurrence_replaced_keeps_its_lease_token_stale(
    store: SqliteStore, clock: ManualClock
) -> None:
    """As `add(replace=True)` does, the new timer's attempt goes on from the old one's."""
    start = clock.now_ms
    await store.add_schedule(every(clock))
    [old] = await store.claim("default", clock.now_ms, 10, LEASE_MS)
    assert await store.advance([old]) == [True]
    await store.ack(old)
    assert await store.delete_schedule("s1")
    await store.add_schedule(every(clock, start_ms=start))
    timer = await store.get(f"s1@{start}")
    assert timer is not None
    assert (timer.state, timer.attempt) == (State.SCHEDULED, old.token)
    [new] = await store.claim("default", clock.now_ms, 10, LEASE_MS)
    assert new.token == old.token + 1
    with pytest.raises(LeaseLost):
        await store.ack(old)
    await store.ack(new)


async def test_idempotent_add_schedule_compares_payloads_as_stored(
    store: SqliteStore, clock: ManualClock
) -> None:
    first = await store.add_schedule(every(clock, payload={"a": 1, "b": (1, 2)}))
    again = await store.add_schedule(every(clock, payload={"b": [1, 2], "a": 1}))
    assert again.created_ms == first.created_ms
    assert again.schedule.payload == {"a": 1, "b": [1, 2]}
    with pytest.raises(ScheduleExists):
        await store.add_schedule(every(clock, payload={"a": 1, "b": [2, 1]}))


async def test_a_schedule_past_the_horizon_writes_nothing(path: Path, clock: ManualClock) -> None:
    store = SqliteStore(path, StoreSettings(max_horizon_ms=60_000), clock=clock)
    try:
        with pytest.raises(ValueError, match="horizon"):
            await store.add_schedule(every(clock, start_ms=clock.now_ms + 120_000))
        assert await store.get_schedule("s1") is None
        assert (await store.list()).timers == []
    finally:
        await store.close()


async def test_schedule_lookups_read_the_indexes_not_the_tables(store: SqliteStore) -> None:
    await store.stats()  # creates the file
    conn = sqlite3.connect(store.path)
    try:
        statements = [
            (queries.HOLDS, {"id": "s@1", "token": 1}),
            (queries.DROP_HELD, {"id": "s@1", "token": 1}),
            (queries.STATE_OF, ("s@1",)),
            (queries.GET_SCHEDULE, ("s",)),
            (queries.DELETE_SCHEDULE, ("s",)),
            (queries.schedule_page(after_cursor=True), {"cursor": "s", "limit": 5}),
        ]
        for statement, params in statements:
            plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + statement, params)]
            assert all(step.startswith("SEARCH") for step in plan), (statement, plan)
    finally:
        conn.close()
