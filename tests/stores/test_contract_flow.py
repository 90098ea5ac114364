"""The flow-control part of the `Store` contract: pausing timers, queue settings, host limits,
counts per queue and the list's filters, on every backend (see conftest's BACKENDS)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tickwheel.errors import InvalidArgument
from tickwheel.model import State, Timer
from tickwheel.schedule import Schedule
from tickwheel.stores import MemoryStore, Store, StoreSettings
from tickwheel.stores.base import LimitPage, QueueSettings
from tickwheel.stores.limit import MIN_RATE, Limit

from .conftest import BACKENDS, ManualClock, StoreFactory

MINUTE = 60_000


def timer(clock: ManualClock, delay_ms: int = 1000, **fields: object) -> Timer:
    return Timer(due_ms=clock.now_ms + delay_ms, **fields)  # type: ignore[arg-type]


async def claim_ids(store: Store, clock: ManualClock, queue: str = "default") -> list[str]:
    leases = await store.claim(queue, clock.now_ms, 1000, 30_000)
    return [lease.timer.id for lease in leases]


async def every_page(store: Store, limit: int = 3, **filters: object) -> list[Timer]:
    """Follow the list's cursor to the end; return what it listed, in its order."""
    listed: list[Timer] = []
    cursor = None
    while True:
        page = await store.list(limit=limit, cursor=cursor, **filters)  # type: ignore[arg-type]
        listed += page.timers
        if page.cursor is None:
            return listed
        cursor = page.cursor


async def test_pause_and_resume_keep_id_attempt_and_history(
    store: Store, clock: ManualClock
) -> None:
    await store.add(timer(clock, 0, id="a"))
    (lease,) = await store.claim("default", clock.now_ms, 1, 1000)
    await store.retry(lease, clock.now_ms + MINUTE, "boom")
    before = await store.get("a")
    assert before is not None
    assert before.attempt == 1
    clock.advance(5)
    assert await store.pause("a")
    paused = await store.get("a")
    assert paused is not None
    assert paused.state is State.PAUSED
    assert (paused.attempt, paused.last_error, paused.due_ms) == (1, "boom", before.due_ms)
    assert paused.first_claimed_ms == before.first_claimed_ms
    assert paused.updated_ms == clock.now_ms
    clock.advance(5)
    assert await store.resume("a")
    resumed = await store.get("a")
    assert resumed is not None
    assert resumed.state is State.SCHEDULED
    assert (resumed.attempt, resumed.last_error, resumed.due_ms) == (1, "boom", before.due_ms)
    assert resumed.updated_ms == clock.now_ms
    clock.advance(MINUTE)
    (again,) = await store.claim("default", clock.now_ms, 1, 1000)
    assert (again.timer.id, again.token) == ("a", 2)


async def test_a_paused_timer_is_never_claimed_even_overdue(
    store: Store, clock: ManualClock
) -> None:
    await store.add(timer(clock, 10, id="a"))
    await store.add(timer(clock, 20, id="b"))
    await store.add(timer(clock, 2 * 86_400_000, id="far"))  # in a Redis day slot
    assert await store.pause("a")
    assert await store.pause("far")
    clock.advance(3 * 86_400_000)
    assert await claim_ids(store, clock) == ["b"]
    assert await store.next_due_ms("default") == clock.now_ms + 30_000  # b's lease
    assert await claim_ids(store, clock) == []
    assert await store.queues() == ["default"]


async def test_resume_of_an_overdue_timer_is_claimable_at_once(
    store: Store, clock: ManualClock
) -> None:
    await store.add(timer(clock, 2 * MINUTE, id="a"))
    assert await store.pause("a")
    clock.advance(90 * MINUTE)
    assert await store.next_due_ms("default") is None
    assert await store.resume("a")
    assert await store.next_due_ms("default") == clock.now_ms - 88 * MINUTE
    assert await claim_ids(store, clock) == ["a"]


async def test_resume_before_the_due_time_waits_for_it(store: Store, clock: ManualClock) -> None:
    await store.add(timer(clock, 2 * MINUTE, id="a"))
    assert await store.pause("a")
    assert await store.resume("a")
    clock.advance(MINUTE)
    assert await claim_ids(store, clock) == []
    clock.advance(MINUTE)
    assert await claim_ids(store, clock) == ["a"]


async def test_pause_of_a_timer_not_scheduled_is_false_and_changes_nothing(
    store: Store, clock: ManualClock
) -> None:
    for timer_id in ("leased", "done", "dead"):
        await store.add(timer(clock, 0, id=timer_id))
    claimed = await store.claim("default", clock.now_ms, 3, 1000)
    leases = {lease.timer.id: lease for lease in claimed}
    await store.ack(leases["done"])
    await store.kill(leases["dead"], "boom")
    before = {t.id: t for t in (await store.list()).timers}
    for timer_id in ("leased", "done", "dead", "unknown"):
        assert not await store.pause(timer_id)
        assert not await store.resume(timer_id)
    assert {t.id: t for t in (await store.list()).timers} == before
    await store.ack(leases["leased"])  # its lease still holds


async def test_pause_and_resume_twice(store: Store, clock: ManualClock) -> None:
    await store.add(timer(clock, id="a"))
    assert await store.pause("a")
    assert not await store.pause("a")
    assert await store.resume("a")
    assert not await store.resume("a")
    assert (await store.get("a")).state is State.SCHEDULED  # type: ignore[union-attr]


async def test_an_occurrence_is_not_paused(store: Store, clock: ManualClock) -> None:
    """A schedule's occurrence belongs to its schedule: pause the schedule instead."""
    state = await store.add_schedule(
        Schedule(id="s", every_s=60, start_ms=clock.now_ms + 1000, payload=1)
    )
    assert state.next_ms is not None
    assert not await store.pause(f"s@{state.next_ms}")
    assert (await store.get(f"s@{state.next_ms}")).state is State.SCHEDULED  # type: ignore[union-attr]


async def test_cancel_deletes_a_paused_timer(store: Store, clock: ManualClock) -> None:
    await store.add(timer(clock, id="a"))
    assert await store.pause("a")
    assert await store.cancel("a")
    assert await store.get("a") is None
    assert not await store.resume("a")


async def test_replacing_a_paused_timer_schedules_the_new_one(
    store: Store, clock: ManualClock
) -> None:
    await store.add(timer(clock, 0, id="a"))
    assert await store.pause("a")
    await store.add(timer(clock, 0, id="a", payload=2), replace=True)
    assert await claim_ids(store, clock) == ["a"]
    stats = await store.stats()
    assert (stats.counts[State.PAUSED], stats.counts[State.LEASED]) == (0, 1)


async def test_paused_timers_are_counted_and_listed(store: Store, clock: ManualClock) -> None:
    await store.add(timer(clock, id="a"))
    await store.add(timer(clock, id="b"))
    assert await store.pause("b")
    stats = await store.stats()
    assert stats.counts[State.PAUSED] == 1
    assert stats.counts[State.SCHEDULED] == 1
    assert [t.id for t in (await store.list(State.PAUSED)).timers] == ["b"]
    assert [t.id for t in (await store.list(State.SCHEDULED)).timers] == ["a"]


async def test_queue_infos_count_each_queue(store: Store, clock: ManualClock) -> None:
    assert await store.queue_infos() == []
    await store.add(timer(clock, 0, id="a1", queue="a"))
    await store.add(timer(clock, 0, id="a2", queue="a"))
    await store.add(timer(clock, 0, id="a3", queue="a"))
    await store.add(timer(clock, 500, id="a4", queue="a"))
    await store.add(timer(clock, 0, id="a5", queue="a"))
    await store.add(timer(clock, 700, id="b1", queue="b"))
    await store.add(timer(clock, 800, id="b2", queue="b"))
    await store.add(timer(clock, MINUTE, id="d1"))
    leases = await store.claim("a", clock.now_ms, 3, 1000)
    await store.ack(leases[0])
    await store.kill(leases[1], "boom")
    assert await store.pause("a5")
    assert await store.pause("b1")
    await store.set_queue("idle", QueueSettings(paused=True))
    infos = {info.name: info for info in await store.queue_infos()}
    assert list(infos) == ["a", "b", "default", "idle"]
    zero = dict.fromkeys(State, 0)
    assert infos["a"].counts == zero | {
        State.SCHEDULED: 1,
        State.LEASED: 1,
        State.PAUSED: 1,
        State.DONE: 1,
        State.DEAD: 1,
    }
    assert infos["a"].earliest_due_ms == clock.now_ms + 500
    assert infos["b"].counts == zero | {State.SCHEDULED: 1, State.PAUSED: 1}
    assert infos["b"].earliest_due_ms == clock.now_ms + 800
    assert infos["default"].counts == zero | {State.SCHEDULED: 1}
    assert infos["default"].earliest_due_ms == clock.now_ms + MINUTE
    assert infos["idle"] == infos["idle"].__class__("idle", zero, None, QueueSettings(paused=True))
    assert infos["a"].settings == QueueSettings()
    stats = await store.stats()
    assert stats.counts == {
        state: sum(info.counts[state] for info in infos.values()) for state in State
    }


async def test_queue_infos_follow_every_transition(store: Store, clock: ManualClock) -> None:
    """Counts per queue stay exact through claim, retry, expiry, replay, cancel, replace."""
    await store.add(timer(clock, 0, id="x", queue="q"))
    await store.add(timer(clock, 0, id="y", queue="q"))
    (lx, _) = await store.claim("q", clock.now_ms, 2, 1000)
    await store.retry(lx, clock.now_ms, "again")
    clock.advance(1001)  # y's lease expires: back to scheduled on the next claim
    (lx2, ly2) = await store.claim("q", clock.now_ms, 2, 1000)
    await store.kill(lx2, "dead")
    assert await store.replay("x")
    await store.ack(ly2)
    await store.add(timer(clock, 0, id="x", queue="r", payload=1), replace=True)
    (info_q, info_r) = await store.queue_infos()
    assert info_q.counts[State.SCHEDULED] == 0
    assert info_q.counts[State.DONE] == 1
    assert sum(info_q.counts.values()) == 1
    assert info_r.counts[State.SCHEDULED] == 1
    assert await store.cancel("x")
    infos = await store.queue_infos()
    assert [(i.name, sum(i.counts.values())) for i in infos] == [("q", 1)]


async def test_queue_settings_set_replace_and_remove(store: Store) -> None:
    assert await store.queue_settings() == {}
    limited = QueueSettings(limit=Limit(rate=2.5, burst=5, concurrency=3))
    await store.set_queue("emails", QueueSettings(paused=True))
    await store.set_queue("sms", limited)
    assert await store.queue_settings() == {"emails": QueueSettings(paused=True), "sms": limited}
    await store.set_queue("emails", QueueSettings(paused=False, limit=Limit(concurrency=1)))
    await store.set_queue("sms", QueueSettings())
    assert await store.queue_settings() == {"emails": QueueSettings(limit=Limit(concurrency=1))}
    assert [i.name for i in await store.queue_infos()] == ["emails"]


async def test_set_queue_refuses_a_name_no_queue_can_have(store: Store) -> None:
    for bad in ("", "a b", "x" * 65, "é", "a/b"):
        with pytest.raises(InvalidArgument) as caught:
            await store.set_queue(bad, QueueSettings(paused=True))
        assert caught.value.argument == "queue"
    assert await store.queue_settings() == {}


async def test_pause_queue_changes_the_pause_alone(store: Store) -> None:
    limited = Limit(rate=2.5, burst=5, concurrency=3)
    assert await store.pause_queue("emails", True)
    assert not await store.pause_queue("emails", True)  # already paused
    assert await store.queue_settings() == {"emails": QueueSettings(paused=True)}
    await store.set_queue("sms", QueueSettings(limit=limited))
    assert await store.pause_queue("sms", True)
    assert await store.pause_queue("sms", False)
    assert not await store.pause_queue("sms", False)
    assert await store.pause_queue("emails", False)
    assert await store.queue_settings() == {"sms": QueueSettings(limit=limited)}
    assert [i.name for i in await store.queue_infos()] == ["sms"]


async def test_set_queue_limit_changes_the_limit_alone(store: Store) -> None:
    await store.set_queue("emails", QueueSettings(paused=True))
    assert not await store.set_queue_limit("emails", Limit(concurrency=2))  # had none
    assert await store.set_queue_limit("emails", Limit(rate=0.5))  # replaced
    assert await store.queue_settings() == {
        "emails": QueueSettings(paused=True, limit=Limit(rate=0.5))
    }
    assert await store.set_queue_limit("emails", None)
    assert not await store.set_queue_limit("emails", None)
    assert await store.queue_settings() == {"emails": QueueSettings(paused=True)}
    assert not await store.set_queue_limit("sms", Limit(concurrency=1))
    assert await store.set_queue_limit("sms", None)
    assert "sms" not in await store.queue_settings()


async def test_queue_settings_keep_a_limit_exactly(store: Store) -> None:
    """A rate of one a day (the least a limit takes) and 0.1 + 0.2 come back bit for bit after
    the pause beside them changes."""
    slow = Limit(rate=MIN_RATE, burst=1)
    odd = Limit(rate=0.1 + 0.2, concurrency=7)
    await store.set_queue_limit("slow", slow)
    await store.set_queue("odd", QueueSettings(limit=odd))
    for queue in ("slow", "odd"):
        assert await store.pause_queue(queue, True)
        assert await store.pause_queue(queue, False)
    assert await store.queue_settings() == {
        "slow": QueueSettings(limit=slow),
        "odd": QueueSettings(limit=odd),
    }


async def test_concurrent_pause_and_limit_changes_both_survive(
    make_store: StoreFactory, clock: ManualClock, settings: StoreSettings
) -> None:
    """Two handles on one store (one where the store lives in the process) change the pause
    and the limit of the same queues at the same time: every queue keeps both changes."""
    first = make_store(clock, settings)
    second = first if isinstance(first, MemoryStore) else make_store(clock, settings)
    queues = [f"q{n}" for n in range(40)]
    try:
        # one call at a time first: redis-py's Cluster client drops connections when many
        # calls open its first ones at once
        for n, q in enumerate(queues):
            await first.set_queue(q, QueueSettings(paused=n % 2 == 1))
        assert await second.queue_settings() == {
            q: QueueSettings(paused=True) for q in queues[1::2]
        }
        assert not await second.pause_queue("warm", False)
        await asyncio.gather(
            *(first.pause_queue(q, n % 2 == 0) for n, q in enumerate(queues)),
            *(second.set_queue_limit(q, Limit(concurrency=n + 1)) for n, q in enumerate(queues)),
        )
        assert await second.queue_settings() == {
            q: QueueSettings(paused=n % 2 == 0, limit=Limit(concurrency=n + 1))
            for n, q in enumerate(queues)
        }
        await asyncio.gather(
            *(second.set_queue_limit(q, None) for q in queues),
            *(first.pause_queue(q, True) for q in queues),
        )
        assert await first.queue_settings() == {q: QueueSettings(paused=True) for q in queues}
    finally:
        await first.close()
        await second.close()


async def test_queue_changes_refuse_bad_arguments(store: Store) -> None:
    for bad in ("", "a b", "x" * 65, "é", "a/b", None):
        with pytest.raises(InvalidArgument) as caught:
            await store.pause_queue(bad, True)  # type: ignore[arg-type]
        assert caught.value.argument == "queue"
        with pytest.raises(InvalidArgument) as caught:
            await store.set_queue_limit(bad, Limit(rate=1.0))  # type: ignore[arg-type]
        assert caught.value.argument == "queue"
    for not_bool in (1, "true", None):
        with pytest.raises(InvalidArgument) as caught:
            await store.pause_queue("q", not_bool)  # type: ignore[arg-type]
        assert caught.value.argument == "paused"
    for not_limit in ({"rate": 1.0}, 5, QueueSettings()):
        with pytest.raises(InvalidArgument) as caught:
            await store.set_queue_limit("q", not_limit)  # type: ignore[arg-type]
        assert caught.value.argument == "limit"
    assert await store.queue_settings() == {}


async def test_queue_changes_wake_the_queue_waiters(store: Store) -> None:
    """A resume reaches a worker waiting on the queue at once, as `set_queue` does."""
    for change in (
        lambda: store.pause_queue("emails", False),
        lambda: store.set_queue_limit("emails", Limit(rate=1.0)),
    ):
        await store.next_due_ms("emails")
        waiting = asyncio.create_task(store.wait("emails", 5.0))
        await asyncio.sleep(0.05)  # the waiter subscribed (Redis) and is waiting
        await change()
        assert await asyncio.wait_for(waiting, 2.0)


async def test_reschedule_moves_a_paused_timer_and_keeps_it_paused(
    store: Store, clock: ManualClock
) -> None:
    await store.add(timer(clock, 0, id="a"))
    (lease,) = await store.claim("default", clock.now_ms, 1, 1000)
    await store.retry(lease, clock.now_ms + MINUTE, "boom")
    assert await store.pause("a")
    clock.advance(5)
    assert await store.reschedule("a", clock.now_ms + 10 * MINUTE)
    moved = await store.get("a")
    assert moved is not None
    assert moved.state is State.PAUSED
    assert (moved.due_ms, moved.updated_ms) == (clock.now_ms + 10 * MINUTE, clock.now_ms)
    assert (moved.attempt, moved.last_error, moved.first_claimed_ms) == (1, "boom", None)
    stats = await store.stats()
    assert (stats.counts[State.PAUSED], stats.counts[State.SCHEDULED]) == (1, 0)
    clock.advance(20 * MINUTE)  # past both due times: still paused, nothing to claim
    assert await store.next_due_ms("default") is None
    assert await claim_ids(store, clock) == []
    assert await store.resume("a")
    assert await claim_ids(store, clock) == ["a"]


async def test_a_rescheduled_paused_timer_fires_at_its_new_time_once_resumed(
    store: Store, clock: ManualClock
) -> None:
    """Moved from the near wheel to days ahead and from days ahead to minutes ahead (Redis
    keeps those in different places), it is claimed at the new time only, once."""
    start = clock.now_ms
    await store.add(timer(clock, 1000, id="near"))
    await store.add(timer(clock, 3 * 86_400_000, id="far"))
    assert await store.pause("near")
    assert await store.pause("far")
    assert await store.reschedule("near", start + 2 * 86_400_000)
    assert await store.reschedule("far", start + 5 * MINUTE)
    assert await store.resume("near")
    assert await store.resume("far")
    assert await store.next_due_ms("default") == start + 5 * MINUTE

    async def fired() -> list[str]:
        leases = await store.claim("default", clock.now_ms, 10, 30_000)
        assert await store.ack_many(leases) == [True] * len(leases)
        return [lease.timer.id for lease in leases]

    clock.advance(4 * MINUTE)
    assert await fired() == []
    clock.advance(MINUTE)
    assert await fired() == ["far"]
    clock.advance(86_400_000)
    assert await fired() == []
    clock.advance(86_400_000)
    assert await fired() == ["near"]
    clock.advance(2 * 86_400_000)
    assert await fired() == []


async def test_reschedule_of_a_paused_timer_checks_the_horizon(
    store: Store, clock: ManualClock, settings: StoreSettings
) -> None:
    await store.add(timer(clock, id="a"))
    assert await store.pause("a")
    with pytest.raises(InvalidArgument):
        await store.reschedule("a", clock.now_ms + settings.max_horizon_ms + 1)
    assert (await store.get("a")).due_ms == clock.now_ms + 1000  # type: ignore[union-attr]


async def test_host_limits_set_replace_and_delete(store: Store) -> None:
    assert await store.limits() == {}
    await store.set_limit("example.com", Limit(rate=50.0))
    await store.set_limit("[::1]:8080", Limit(rate=0.5, burst=2, concurrency=4))
    await store.set_limit("example.com", Limit(concurrency=10))
    assert await store.limits() == {
        "example.com": Limit(concurrency=10),
        "[::1]:8080": Limit(rate=0.5, burst=2, concurrency=4),
    }
    assert await store.delete_limit("example.com")
    assert not await store.delete_limit("example.com")
    assert await store.limits() == {"[::1]:8080": Limit(rate=0.5, burst=2, concurrency=4)}


async def every_limit_page(store: Store, limit: int) -> list[tuple[str, Limit]]:
    """Follow `list_limits` pages to the end; no page is over `limit`."""
    found: list[tuple[str, Limit]] = []
    cursor: str | None = None
    while True:
        page = await store.list_limits(limit, cursor)
        assert len(page.limits) <= limit
        found += page.limits
        if page.cursor is None:
            return found
        assert page.limits, "a page with a cursor holds something"
        cursor = page.cursor


async def test_host_limits_page_by_host(store: Store) -> None:
    assert await store.list_limits() == LimitPage([], None)
    hosts = [f"h{n:03}.example.com" for n in range(25)] + ["[::1]:8080", "a.example.com:1"]
    for n, host in enumerate(reversed(hosts)):
        await store.set_limit(host, Limit(concurrency=n + 1))
    expected = sorted((await store.limits()).items())
    assert [host for host, _ in expected] == sorted(hosts)
    for size in (1, 7, 27, 100):
        assert await every_limit_page(store, size) == expected
    first = await store.list_limits(10)
    assert first.cursor is not None
    # a change between pages: a host removed before the cursor, one added after it
    await store.delete_limit(expected[0][0])
    await store.set_limit("zz.example.com", Limit(rate=1.0))
    rest = await every_limit_page_from(store, first.cursor)
    assert [host for host, _ in rest] == [host for host, _ in expected[10:]] + ["zz.example.com"]


async def every_limit_page_from(store: Store, cursor: str) -> list[tuple[str, Limit]]:
    found: list[tuple[str, Limit]] = []
    next_cursor: str | None = cursor
    while next_cursor is not None:
        page = await store.list_limits(10, next_cursor)
        found += page.limits
        next_cursor = page.cursor
    return found


async def test_list_limits_refuses_a_page_size_out_of_range(store: Store) -> None:
    for bad in (0, -1, 1001):
        with pytest.raises(InvalidArgument) as caught:
            await store.list_limits(bad)
        assert caught.value.argument == "limit"


async def test_set_limit_refuses_a_host_no_callback_has(store: Store) -> None:
    for bad in ("", "Example.com", "a b", "user@example.com", "example.com/x", "[::0001]", "é.fr"):
        with pytest.raises(InvalidArgument) as caught:
            await store.set_limit(bad, Limit(rate=1.0))
        assert caught.value.argument == "host"
    assert await store.limits() == {}


async def test_list_filters_by_queue_and_due_range(store: Store, clock: ManualClock) -> None:
    for n in range(12):
        await store.add(timer(clock, 1000 * n, id=f"a{n:02}", queue="a"))
        await store.add(timer(clock, 1000 * n, id=f"b{n:02}", queue="b"))
    await store.add(timer(clock, 3 * 86_400_000, id="a-far", queue="a"))
    assert await store.pause("a04")
    start = clock.now_ms
    listed = await every_page(store, queue="a", due_from_ms=start + 3000, due_to_ms=start + 9000)
    assert sorted(t.id for t in listed) == [f"a{n:02}" for n in range(3, 9)]
    assert len(listed) == 6
    assert sorted(t.id for t in await every_page(store, queue="b")) == [
        f"b{n:02}" for n in range(12)
    ]
    paused = await every_page(store, state=State.PAUSED, queue="a")
    assert [t.id for t in paused] == ["a04"]
    assert await every_page(store, state=State.PAUSED, queue="b") == []
    late = await every_page(store, due_from_ms=start + 11_000)
    assert sorted(t.id for t in late) == ["a-far", "a11", "b11"]
    assert await every_page(store, queue="nothing") == []


async def test_list_filters_apply_to_every_state(store: Store, clock: ManualClock) -> None:
    for n in range(6):
        await store.add(timer(clock, 0, id=f"a{n}", queue="a"))
        await store.add(timer(clock, 0, id=f"b{n}", queue="b"))
    leases = await store.claim("a", clock.now_ms, 4, 1000)
    leases += await store.claim("b", clock.now_ms, 4, 1000)
    for lease in leases[:2] + leases[4:6]:
        await store.kill(lease, "boom")
    dead = await every_page(store, 1, state=State.DEAD, queue="b")
    assert sorted(t.id for t in dead) == ["b0", "b1"]
    leased = await every_page(store, 1, state=State.LEASED, queue="a")
    assert sorted(t.id for t in leased) == ["a2", "a3"]
    assert await every_page(store, state=State.DEAD, due_to_ms=clock.now_ms) == []
    assert len(await every_page(store, state=State.DEAD, due_to_ms=clock.now_ms + 1)) == 4


async def test_list_filters_are_checked(store: Store) -> None:
    with pytest.raises(InvalidArgument) as caught:
        await store.list(queue="a b")
    assert caught.value.argument == "queue"
    with pytest.raises(InvalidArgument) as caught:
        await store.list(due_from_ms=-1)
    assert caught.value.argument == "due_from_ms"


@pytest.fixture(params=sorted(set(BACKENDS) - {"memory"}))
def make_durable_store(request: pytest.FixtureRequest) -> StoreFactory:
    return BACKENDS[request.param](request)


@pytest.fixture
async def durable(
    make_durable_store: StoreFactory, clock: ManualClock, settings: StoreSettings
) -> AsyncIterator[tuple[Store, StoreFactory]]:
    opened = make_durable_store(clock, settings)
    try:
        yield opened, make_durable_store
    finally:
        await opened.close()


async def test_settings_limits_and_pauses_survive_reopening(
    durable: tuple[Store, StoreFactory], clock: ManualClock, settings: StoreSettings
) -> None:
    store, reopen = durable
    await store.set_queue("emails", QueueSettings(paused=True, limit=Limit(rate=1.5, burst=3)))
    await store.set_limit("api.example.com:8443", Limit(concurrency=2))
    await store.add(timer(clock, 0, id="a", queue="emails"))
    assert await store.pause("a")
    await store.close()
    again = reopen(clock, settings)
    try:
        assert await again.queue_settings() == {
            "emails": QueueSettings(paused=True, limit=Limit(rate=1.5, burst=3))
        }
        assert await again.limits() == {"api.example.com:8443": Limit(concurrency=2)}
        page = LimitPage([("api.example.com:8443", Limit(concurrency=2))], None)
        assert await again.list_limits() == page
        assert (await again.get("a")).state is State.PAUSED  # type: ignore[union-attr]
        assert await again.resume("a")
        assert await claim_ids(again, clock, "emails") == ["a"]
    finally:
        await again.close()
