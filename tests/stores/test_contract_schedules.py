"""The schedule half of the `Store` contract: every backend passes these unchanged.

A schedule's pending occurrence is an ordinary timer, ``<schedule id>@<nominal ms>``; `advance`
moves the series on while the claimer holds the occurrence's lease.
"""

from __future__ import annotations

import dataclasses

import pytest

from tickwheel.errors import InvalidTimer, ScheduleExists
from tickwheel.model import Callback, State, Timer
from tickwheel.schedule import Misfire, Schedule
from tickwheel.stores import Lease, Store

from .conftest import ManualClock

HOOK = Callback(url="https://example.com/tick")
LEASE_MS = 30_000


def every(clock: ManualClock, seconds: float = 10, **fields: object) -> Schedule:
    values: dict[str, object] = {"id": "s1", "every_s": seconds, "start_ms": clock.now_ms}
    values.update(fields)
    if "payload" not in values:
        values.setdefault("callback", HOOK)
    return Schedule(**values)  # type: ignore[arg-type]


async def claim(store: Store, clock: ManualClock, queue: str = "default") -> list[Lease]:
    return await store.claim(queue, clock.now_ms, 1000, LEASE_MS)


async def scheduled_ids(store: Store) -> list[str]:
    page = await store.list(State.SCHEDULED)
    return sorted(timer.id for timer in page.timers)


async def test_a_new_schedule_has_its_first_occurrence_as_a_timer(
    store: Store, clock: ManualClock
) -> None:
    state = await store.add_schedule(every(clock, start_ms=clock.now_ms + 5000))
    first = clock.now_ms + 5000
    assert state.next_ms == first
    assert state.runs == 0
    assert state.recent == ()
    assert state.created_ms == clock.now_ms
    timer = await store.get(f"s1@{first}")
    assert timer is not None
    assert timer.due_ms == first
    assert timer.callback == HOOK
    assert timer.state is State.SCHEDULED
    assert await store.get_schedule("s1") == state


async def test_a_schedule_round_trips_every_field(store: Store, clock: ManualClock) -> None:
    schedule = Schedule(
        id="report.daily",
        cron="30 9 * * 1-5",
        timezone="Europe/Berlin",
        start_ms=clock.now_ms,
        end_ms=clock.now_ms + 400 * 86_400_000,
        max_runs=300,
        jitter_s=12.5,
        misfire=Misfire.ALL,
        queue="reports",
        payload={"kind": "daily", "n": [1, 2.5, None, "ü"]},
    )
    await store.add_schedule(schedule)
    got = await store.get_schedule("report.daily")
    assert got is not None
    assert got.schedule == schedule
    assert got.schedule.spec() == schedule.spec()
    assert got.next_ms is not None
    timer = await store.get(f"report.daily@{got.next_ms}")
    assert timer is not None
    assert timer.queue == "reports"
    assert timer.due_ms == schedule.due_ms(got.next_ms) >= got.next_ms


async def test_adding_the_same_schedule_again_is_idempotent(
    store: Store, clock: ManualClock
) -> None:
    first = await store.add_schedule(every(clock))
    clock.advance(5)
    assert await store.add_schedule(every(clock, start_ms=first.schedule.start_ms)) == first
    with pytest.raises(ScheduleExists):
        await store.add_schedule(every(clock, 20, start_ms=first.schedule.start_ms))
    assert await scheduled_ids(store) == [f"s1@{first.next_ms}"]


async def test_get_and_delete_of_an_unknown_schedule(store: Store, clock: ManualClock) -> None:
    assert await store.get_schedule("nope") is None
    assert await store.delete_schedule("nope") is False
    assert await store.update_schedule(every(clock, id="nope")) is None


async def test_advance_creates_the_next_occurrence_and_counts_the_run(
    store: Store, clock: ManualClock
) -> None:
    start = clock.now_ms
    await store.add_schedule(every(clock))
    [lease] = await claim(store, clock)
    assert lease.timer.id == f"s1@{start}"
    assert await store.advance([lease]) == [True]
    state = await store.get_schedule("s1")
    assert state is not None
    assert (state.next_ms, state.runs, state.recent) == (start + 10_000, 1, (start,))
    assert await scheduled_ids(store) == [f"s1@{start + 10_000}"]
    # a second advance of the same occurrence (a claimer that retried) changes nothing
    assert await store.advance([lease]) == [True]
    assert await store.get_schedule("s1") == state
    await store.ack(lease)
    clock.advance(10_000)
    [second] = await claim(store, clock)
    assert await store.advance([second]) == [True]
    state = await store.get_schedule("s1")
    assert state is not None
    assert (state.runs, state.recent) == (2, (start + 10_000, start))


async def test_advance_passes_plain_timers_and_mixed_batches(
    store: Store, clock: ManualClock
) -> None:
    await store.add(Timer(id="plain", due_ms=clock.now_ms, payload=1))
    await store.add_schedule(every(clock))
    await store.add_schedule(every(clock, id="s2"))
    leases = sorted(await claim(store, clock), key=lambda lease: lease.timer.id)
    assert [lease.timer.id for lease in leases] == [
        "plain",
        f"s1@{clock.now_ms}",
        f"s2@{clock.now_ms}",
    ]
    assert await store.advance(leases) == [True, True, True]
    assert await store.advance([]) == []
    assert await scheduled_ids(store) == [
        f"s1@{clock.now_ms + 10_000}",
        f"s2@{clock.now_ms + 10_000}",
    ]


async def test_an_occurrence_reclaimed_after_its_claimer_died_fires_without_moving_on(
    store: Store, clock: ManualClock
) -> None:
    start = clock.now_ms
    await store.add_schedule(every(clock, misfire=Misfire.SKIP))
    [lease] = await claim(store, clock)
    assert await store.advance([lease]) == [True]
    clock.advance(LEASE_MS + 1)  # the claimer died; its lease lapses, late by far
    reclaimed = [x for x in await claim(store, clock) if x.timer.id == f"s1@{start}"]
    assert len(reclaimed) == 1
    assert await store.advance(reclaimed) == [True]
    state = await store.get_schedule("s1")
    assert state is not None
    assert state.runs == 1


async def test_advance_of_a_lease_lost_does_nothing(store: Store, clock: ManualClock) -> None:
    start = clock.now_ms
    await store.add_schedule(every(clock))
    [stale] = await claim(store, clock)
    clock.advance(LEASE_MS + 1)
    [current] = [x for x in await claim(store, clock) if x.timer.id == f"s1@{start}"]
    assert await store.advance([stale]) == [False]
    state = await store.get_schedule("s1")
    assert state is not None
    assert state.next_ms == start
    assert await store.advance([current]) == [True]


@pytest.mark.parametrize(
    ("misfire", "fires", "next_offset"),
    [(Misfire.SKIP, False, 70_000), (Misfire.ONCE, True, 70_000), (Misfire.ALL, True, 10_000)],
)
async def test_misfire_decides_an_occurrence_that_comes_up_late(
    store: Store, clock: ManualClock, misfire: Misfire, fires: bool, next_offset: int
) -> None:
    start = clock.now_ms
    await store.add_schedule(every(clock, misfire=misfire))
    clock.advance(65_000)  # nothing ran for 65 s: six occurrences missed after the first
    [lease] = await claim(store, clock)
    assert await store.advance([lease]) == [fires]
    state = await store.get_schedule("s1")
    assert state is not None
    assert state.next_ms == start + next_offset
    assert state.runs == (1 if fires else 0)
    assert state.recent == ((start,) if fires else ())
    skipped = await store.get(f"s1@{start}")
    assert (skipped is None) is (not fires)
    assert await scheduled_ids(store) == [f"s1@{start + next_offset}"]


async def test_max_runs_ends_the_series(store: Store, clock: ManualClock) -> None:
    await store.add_schedule(every(clock, max_runs=2))
    for _ in range(2):
        [lease] = await claim(store, clock)
        assert await store.advance([lease]) == [True]
        await store.ack(lease)
        clock.advance(10_000)
    state = await store.get_schedule("s1")
    assert state is not None
    assert (state.next_ms, state.runs) == (None, 2)
    assert await scheduled_ids(store) == []
    assert state.upcoming() == []


async def test_pause_cancels_the_pending_occurrence_and_resume_restores_it(
    store: Store, clock: ManualClock
) -> None:
    start = clock.now_ms + 10_000
    created = await store.add_schedule(every(clock, start_ms=start))
    paused = await store.update_schedule(every(clock, start_ms=start, paused=True))
    assert paused is not None
    assert paused.schedule.paused
    assert paused.next_ms == start
    assert await scheduled_ids(store) == []
    clock.advance(30_000)
    assert await claim(store, clock) == []
    resumed = await store.update_schedule(created.schedule)
    assert resumed is not None
    assert not resumed.schedule.paused
    assert resumed.next_ms == start
    # it comes up late: misfire (once) folds the missed ones into one run now
    [lease] = await claim(store, clock)
    assert lease.timer.id == f"s1@{start}"
    assert await store.advance([lease]) == [True]
    state = await store.get_schedule("s1")
    assert state is not None
    assert state.next_ms == start + 30_000


async def test_a_change_recomputes_the_pending_occurrence(store: Store, clock: ManualClock) -> None:
    start = clock.now_ms
    await store.add_schedule(every(clock, 60))
    clock.advance(1000)
    changed = await store.update_schedule(every(clock, 15, start_ms=start))
    assert changed is not None
    assert changed.next_ms == start + 15_000
    assert changed.schedule.every_s == 15
    assert await scheduled_ids(store) == [f"s1@{start + 15_000}"]
    target = Callback(url="https://example.com/other")
    moved = await store.update_schedule(every(clock, 15, start_ms=start, callback=target))
    assert moved is not None
    assert moved.next_ms == start + 15_000
    timer = await store.get(f"s1@{start + 15_000}")
    assert timer is not None
    assert timer.callback == target


async def test_a_change_with_an_occurrence_in_flight_comes_after_it(
    store: Store, clock: ManualClock
) -> None:
    start = clock.now_ms
    await store.add_schedule(every(clock, 10))
    [lease] = await claim(store, clock)  # claimed, not yet advanced
    changed = await store.update_schedule(every(clock, 5, start_ms=start))
    assert changed is not None
    assert changed.next_ms == start + 5000
    held = await store.get(f"s1@{start}")
    assert held is not None
    assert held.state is State.LEASED
    assert await store.advance([lease]) == [True]  # in flight: it fires, the series is on
    state = await store.get_schedule("s1")
    assert state is not None
    assert state.next_ms == start + 5000
    assert await scheduled_ids(store) == [f"s1@{start + 5000}"]


async def test_delete_cancels_the_pending_occurrence(store: Store, clock: ManualClock) -> None:
    state = await store.add_schedule(every(clock, start_ms=clock.now_ms + 1000))
    assert await store.delete_schedule("s1") is True
    assert await store.get_schedule("s1") is None
    assert await store.get(f"s1@{state.next_ms}") is None
    assert await store.delete_schedule("s1") is False


async def test_delete_with_an_occurrence_in_flight_lets_it_finish(
    store: Store, clock: ManualClock
) -> None:
    start = clock.now_ms
    await store.add_schedule(every(clock))
    [lease] = await claim(store, clock)
    assert await store.delete_schedule("s1") is True
    assert await store.advance([lease]) == [True]
    await store.ack(lease)
    assert await scheduled_ids(store) == []
    done = await store.get(f"s1@{start}")
    assert done is not None
    assert done.state is State.DONE


async def test_a_schedule_made_again_replaces_a_finished_occurrence_of_the_same_id(
    store: Store, clock: ManualClock
) -> None:
    start = clock.now_ms
    await store.add_schedule(every(clock))
    [lease] = await claim(store, clock)
    assert await store.advance([lease]) == [True]
    await store.ack(lease)
    assert await store.delete_schedule("s1")
    again = await store.add_schedule(every(clock, start_ms=start, payload=2, callback=None))
    assert again.next_ms == start
    timer = await store.get(f"s1@{start}")
    assert timer is not None
    assert (timer.state, timer.payload) == (State.SCHEDULED, 2)


async def test_list_schedules_pages_through_every_one_once(
    store: Store, clock: ManualClock
) -> None:
    ids = {f"s{n:03d}" for n in range(25)}
    for schedule_id in ids:
        await store.add_schedule(every(clock, id=schedule_id))
    seen: list[str] = []
    cursor = None
    while True:
        page = await store.list_schedules(limit=7, cursor=cursor)
        assert len(page.schedules) <= 7
        seen += [state.schedule.id for state in page.schedules]
        cursor = page.cursor
        if cursor is None:
            break
    assert sorted(seen) == sorted(ids)


async def test_upcoming_starts_at_the_pending_occurrence(store: Store, clock: ManualClock) -> None:
    start = clock.now_ms
    state = await store.add_schedule(every(clock, 30))
    assert state.upcoming() == [start + n * 30_000 for n in range(5)]


async def test_a_lease_on_a_finished_occurrence_never_settles_its_replacement(
    store: Store, clock: ManualClock
) -> None:
    start = clock.now_ms
    await store.add_schedule(every(clock))
    [old] = await claim(store, clock)
    assert await store.advance([old]) == [True]
    await store.ack(old)
    assert await store.delete_schedule("s1")
    await store.add_schedule(every(clock, start_ms=start, payload=2, callback=None))
    [new] = await claim(store, clock)
    assert new.timer.id == old.timer.id
    assert new.token != old.token
    assert await store.ack_many([old]) == [False]


async def test_a_change_past_the_horizon_is_refused_and_changes_nothing(
    store: Store, clock: ManualClock
) -> None:
    before = await store.add_schedule(every(clock))
    rare = every(clock, start_ms=clock.now_ms, every_s=None, cron="0 0 29 2 *")
    far = Schedule(
        id="s1", cron="0 0 1 1 *", start_ms=clock.now_ms + 20 * 365 * 86_400_000, callback=HOOK
    )
    with pytest.raises(InvalidTimer, match=r"^start: .*horizon"):  # the field placing it
        await store.update_schedule(far)
    with pytest.raises(InvalidTimer, match=r"^start: the first occurrence .*horizon"):
        await store.add_schedule(dataclasses.replace(far, id="s2"))
    assert await store.get_schedule("s1") == before
    assert (await store.update_schedule(rare)) is not None  # within the horizon: fine


async def test_a_start_just_passed_is_still_the_first_occurrence(
    store: Store, clock: ManualClock
) -> None:
    start = clock.now_ms
    clock.advance(300)  # the caller read its clock a moment before the store
    state = await store.add_schedule(every(clock, start_ms=start))
    assert state.next_ms == start
    clock.advance(5000)  # a start long past: the series begins at the next occurrence
    later = await store.add_schedule(every(clock, id="s2", start_ms=start))
    assert later.next_ms == start + 10_000


@pytest.mark.parametrize("misfire", [Misfire.SKIP, Misfire.ONCE])
async def test_occurrences_due_while_a_dead_claimer_held_the_series_are_not_missed(
    store: Store, clock: ManualClock, misfire: Misfire
) -> None:
    start = clock.now_ms
    await store.add_schedule(every(clock, misfire=misfire))
    [taken] = await claim(store, clock)  # in time; the claimer dies before deciding it
    clock.advance(LEASE_MS + 1)  # three more occurrences fall due while its lease holds
    fired = []
    while True:
        leases = [x for x in await claim(store, clock) if x.timer.id.startswith("s1@")]
        if not leases:
            break
        assert await store.advance(leases) == [True] * len(leases)
        fired += [lease.timer.id for lease in leases]
        for lease in leases:
            await store.ack(lease)
    assert fired == [f"s1@{start + n * 10_000}" for n in range(4)]
    assert taken.timer.id == fired[0]
    state = await store.get_schedule("s1")
    assert state is not None
    assert (state.next_ms, state.runs) == (start + 40_000, 4)
