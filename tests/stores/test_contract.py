"""The `Store` contract: every backend passes these unchanged (see conftest's BACKENDS)."""

from __future__ import annotations

import pytest

from tickwheel.errors import InvalidArgument, InvalidTimer, LeaseLost, TimerExists
from tickwheel.model import Callback, RetryPolicy, State, Timer
from tickwheel.stores import Store

from .conftest import ManualClock

MINUTE = 60_000


def timer(clock: ManualClock, delay_ms: int = 1000, **fields: object) -> Timer:
    return Timer(due_ms=clock.now_ms + delay_ms, **fields)  # type: ignore[arg-type]


async def claim_all(store: Store, clock: ManualClock, queue: str = "default") -> list[str]:
    leases = await store.claim(queue, clock.now_ms, 1000, 30_000)
    return [lease.timer.id for lease in leases]


async def test_add_then_get_returns_the_stored_timer(store: Store, clock: ManualClock) -> None:
    callback = Callback(url="https://example.com/hook", headers={"X-A": "1"}, body='{"a":1}')
    added = await store.add(timer(clock, callback=callback, retry=RetryPolicy(max_attempts=3)))
    got = await store.get(added.id)
    assert got == added
    assert got.state is State.SCHEDULED
    assert got.attempt == 0
    assert got.created_ms == clock.now_ms
    assert got.callback == callback
    assert got.retry.max_attempts == 3


async def test_get_unknown_is_none(store: Store) -> None:
    assert await store.get("nope") is None


async def test_payload_round_trips(store: Store, clock: ManualClock) -> None:
    payload = {"to": "ada@example.com", "n": [1, 2.5, None, "ü"]}
    added = await store.add(timer(clock, id="mail-1", queue="emails", payload=payload))
    got = await store.get("mail-1")
    assert got is not None
    assert got.payload == payload
    assert got.queue == "emails"
    assert added.callback is None


async def test_same_id_and_spec_is_idempotent(store: Store, clock: ManualClock) -> None:
    first = await store.add(timer(clock, id="t1", payload=1))
    clock.advance(5)
    again = await store.add(Timer(id="t1", due_ms=first.due_ms, payload=1))
    assert again == first
    assert await claim_all(store, clock.__class__(first.due_ms)) == ["t1"]


async def test_same_id_other_spec_conflicts(store: Store, clock: ManualClock) -> None:
    await store.add(timer(clock, id="t1", payload=1))
    with pytest.raises(TimerExists) as caught:
        await store.add(timer(clock, id="t1", payload=2))
    assert caught.value.timer_id == "t1"
    got = await store.get("t1")
    assert got is not None
    assert got.payload == 1


async def test_replace_overwrites(store: Store, clock: ManualClock) -> None:
    await store.add(timer(clock, 1000, id="t1", payload=1))
    await store.add(timer(clock, 5000, id="t1", payload=2), replace=True)
    clock.advance(1000)
    assert await claim_all(store, clock) == []
    clock.advance(4000)
    leases = await store.claim("default", clock.now_ms, 10, 1000)
    assert [(lease.timer.id, lease.timer.payload) for lease in leases] == [("t1", 2)]


async def test_re_adding_an_id_never_makes_two_timers(store: Store, clock: ManualClock) -> None:
    for _ in range(3):
        await store.add(timer(clock, 100, id="dup"))
    await store.add(timer(clock, 200, id="dup"), replace=True)
    clock.advance(MINUTE)
    assert await claim_all(store, clock) == ["dup"]
    assert (await store.stats()).counts[State.LEASED] == 1


async def test_nothing_is_claimed_before_its_due_ms(store: Store, clock: ManualClock) -> None:
    added = await store.add(timer(clock, 1234))
    assert await store.claim("default", added.due_ms - 1, 10, 1000) == []
    leases = await store.claim("default", added.due_ms, 10, 1000)
    assert [lease.timer.id for lease in leases] == [added.id]


async def test_claim_takes_the_earliest_first_up_to_the_limit(
    store: Store, clock: ManualClock
) -> None:
    for n, delay in enumerate([500, 100, 300, 100, 200]):
        await store.add(timer(clock, delay, id=f"t{n}"))
    clock.advance(1000)
    first = await store.claim("default", clock.now_ms, 3, 1000)
    assert [lease.timer.id for lease in first] == ["t1", "t3", "t4"]
    rest = await store.claim("default", clock.now_ms, 10, 1000)
    assert [lease.timer.id for lease in rest] == ["t2", "t0"]


async def test_claim_serves_one_queue(store: Store, clock: ManualClock) -> None:
    await store.add(timer(clock, 10, id="mail", queue="emails"))
    await store.add(timer(clock, 10, id="hook"))
    clock.advance(10)
    assert await claim_all(store, clock, "emails") == ["mail"]
    assert await claim_all(store, clock, "other") == []
    assert await claim_all(store, clock) == ["hook"]


async def test_lease_carries_token_and_deadline(store: Store, clock: ManualClock) -> None:
    await store.add(timer(clock, 0, id="t"))
    (lease,) = await store.claim("default", clock.now_ms, 10, 5000)
    assert lease.token == 1
    assert lease.timer.attempt == 1
    assert lease.timer.state is State.LEASED
    assert lease.deadline_ms == clock.now_ms + 5000
    got = await store.get("t")
    assert got is not None
    assert got.state is State.LEASED


async def test_seed_flaw_cancel_far_ahead_never_fires(store: Store, clock: ManualClock) -> None:
    """The seed's 120 s delete-set TTL let a timer cancelled 10 minutes ahead fire anyway."""
    added = await store.add(timer(clock, 10 * MINUTE))
    assert await store.cancel(added.id) is True
    assert await store.cancel(added.id) is False
    clock.advance(11 * MINUTE)
    assert await claim_all(store, clock) == []
    assert await store.get(added.id) is None


async def test_cancel_unknown_or_leased_is_false(store: Store, clock: ManualClock) -> None:
    assert await store.cancel("ghost") is False
    added = await store.add(timer(clock, 0))
    await claim_all(store, clock)
    assert await store.cancel(added.id) is False


async def test_seed_flaw_downtime_is_caught_up(store: Store, clock: ManualClock) -> None:
    """The seed read only the current second: a timer due while nobody claimed was lost."""
    ids = [(await store.add(timer(clock, delay))).id for delay in (1000, 60_000, 150_000)]
    clock.advance(3 * MINUTE)
    assert await claim_all(store, clock) == ids


async def test_seed_flaw_unacked_claim_comes_back(store: Store, clock: ManualClock) -> None:
    """The seed removed a timer before firing it: a crash in between lost it."""
    added = await store.add(timer(clock, 0))
    (first,) = await store.claim("default", clock.now_ms, 10, 5000)
    clock.advance(4999)
    assert await claim_all(store, clock) == []
    clock.advance(1)
    (second,) = await store.claim("default", clock.now_ms, 10, 5000)
    assert second.timer.id == added.id
    assert second.token == first.token + 1
    with pytest.raises(LeaseLost):
        await store.ack(first)
    await store.ack(second)
    got = await store.get(added.id)
    assert got is not None
    assert got.state is State.DONE


async def test_stale_token_changes_nothing(store: Store, clock: ManualClock) -> None:
    await store.add(timer(clock, 0, id="t"))
    (first,) = await store.claim("default", clock.now_ms, 10, 100)
    clock.advance(100)
    (second,) = await store.claim("default", clock.now_ms, 10, 100)
    for settle in (
        store.ack(first),
        store.retry(first, clock.now_ms, "late"),
        store.kill(first, "late"),
    ):
        with pytest.raises(LeaseLost):
            await settle
    got = await store.get("t")
    assert got is not None
    assert (got.state, got.attempt, got.last_error) == (State.LEASED, second.token, None)


async def test_settling_twice_is_lease_lost(store: Store, clock: ManualClock) -> None:
    await store.add(timer(clock, 0))
    (lease,) = await store.claim("default", clock.now_ms, 10, 1000)
    await store.ack(lease)
    with pytest.raises(LeaseLost):
        await store.ack(lease)


async def test_ack_keeps_the_timer_for_the_retention_period(
    store: Store, clock: ManualClock
) -> None:
    added = await store.add(timer(clock, 0))
    (lease,) = await store.claim("default", clock.now_ms, 10, 1000)
    await store.ack(lease)
    clock.advance(59_999)
    got = await store.get(added.id)
    assert got is not None
    assert got.state is State.DONE
    clock.advance(1)
    assert await store.get(added.id) is None
    assert await claim_all(store, clock) == []


async def test_retry_schedules_again_with_the_error(store: Store, clock: ManualClock) -> None:
    added = await store.add(timer(clock, 0))
    (lease,) = await store.claim("default", clock.now_ms, 10, 1000)
    await store.retry(lease, clock.now_ms + 5000, "HTTP 503")
    got = await store.get(added.id)
    assert got is not None
    assert (got.state, got.due_ms, got.last_error) == (
        State.SCHEDULED,
        clock.now_ms + 5000,
        "HTTP 503",
    )
    clock.advance(4999)
    assert await claim_all(store, clock) == []
    clock.advance(1)
    (again,) = await store.claim("default", clock.now_ms, 10, 1000)
    assert again.token == 2


async def test_kill_then_replay(store: Store, clock: ManualClock) -> None:
    added = await store.add(timer(clock, 0))
    (lease,) = await store.claim("default", clock.now_ms, 10, 1000)
    await store.kill(lease, "HTTP 400")
    dead = await store.get(added.id)
    assert dead is not None
    assert (dead.state, dead.last_error) == (State.DEAD, "HTTP 400")
    assert await claim_all(store, clock) == []
    assert (await store.list(State.DEAD)).timers == [dead]
    clock.advance(10)
    assert await store.replay(added.id) is True
    assert await store.replay(added.id) is False
    assert await claim_all(store, clock) == [added.id]


async def test_reschedule_moves_a_scheduled_timer(store: Store, clock: ManualClock) -> None:
    added = await store.add(timer(clock, 1000))
    assert await store.reschedule(added.id, clock.now_ms + 9000) is True
    clock.advance(1000)
    assert await claim_all(store, clock) == []
    clock.advance(8000)
    assert await claim_all(store, clock) == [added.id]
    assert await store.reschedule(added.id, clock.now_ms) is False
    assert await store.reschedule("ghost", clock.now_ms) is False


async def test_due_beyond_the_horizon_is_refused(store: Store, clock: ManualClock) -> None:
    horizon = 10 * 365 * 86_400_000
    with pytest.raises(InvalidTimer) as caught:
        await store.add(timer(clock, horizon + 1))
    assert caught.value.argument == "due_ms"
    await store.add(timer(clock, horizon))


async def test_claim_arguments_are_checked(store: Store, clock: ManualClock) -> None:
    for limit, lease_ms in ((0, 1000), (10, 0)):
        with pytest.raises(InvalidArgument):
            await store.claim("default", clock.now_ms, limit, lease_ms)


async def test_list_pages_through_every_timer_once(store: Store, clock: ManualClock) -> None:
    """The order is the store's (memory and SQLite: by id; Redis: shard by shard, as it keeps
    no index by id)."""
    ids = [f"t{n:02}" for n in range(25)]
    for timer_id in reversed(ids):
        await store.add(timer(clock, id=timer_id))
    seen: list[str] = []
    cursor = None
    while True:
        page = await store.list(limit=10, cursor=cursor)
        seen.extend(t.id for t in page.timers)
        if page.cursor is None:
            break
        cursor = page.cursor
    assert sorted(seen) == ids


async def test_list_filters_by_state(store: Store, clock: ManualClock) -> None:
    await store.add(timer(clock, 0, id="a"))
    await store.add(timer(clock, 0, id="b"))
    await store.add(timer(clock, MINUTE, id="c"))
    (lease, _) = await store.claim("default", clock.now_ms, 2, 1000)
    await store.kill(lease, "boom")
    assert [t.id for t in (await store.list(State.SCHEDULED)).timers] == ["c"]
    assert [t.id for t in (await store.list(State.LEASED)).timers] == ["b"]
    assert [t.id for t in (await store.list(State.DEAD)).timers] == ["a"]


async def test_stats_counts_states_and_earliest_due(store: Store, clock: ManualClock) -> None:
    empty = await store.stats()
    assert sum(empty.counts.values()) == 0
    assert empty.earliest_due_ms is None
    await store.add(timer(clock, 0, id="a"))
    await store.add(timer(clock, 700, id="b"))
    await store.add(timer(clock, 900, id="c", queue="other"))
    await store.claim("default", clock.now_ms, 1, 1000)
    stats = await store.stats()
    assert stats.counts[State.SCHEDULED] == 2
    assert stats.counts[State.LEASED] == 1
    assert stats.earliest_due_ms == clock.now_ms + 700


async def test_add_many_stores_all_in_order(store: Store, clock: ManualClock) -> None:
    timers = [timer(clock, 100 + n % 7, id=f"m{n:04}") for n in range(2500)]
    stored = await store.add_many(timers)
    assert [t.id for t in stored] == [t.id for t in timers]
    assert all(t.state is State.SCHEDULED and t.created_ms == clock.now_ms for t in stored)
    assert await store.add_many(timers[:10]) == stored[:10]  # idempotent repeat
    clock.advance(200)
    leases = await store.claim("default", clock.now_ms, 3000, 1000)
    assert sorted(lease.timer.id for lease in leases) == [t.id for t in timers]


async def test_add_many_conflict_stores_the_rest(store: Store, clock: ManualClock) -> None:
    await store.add(timer(clock, id="taken", payload=1))
    batch = [timer(clock, id="a"), timer(clock, id="taken", payload=2), timer(clock, id="b")]
    with pytest.raises(TimerExists):
        await store.add_many(batch)
    assert await store.get("a") is not None
    assert await store.get("b") is not None
    taken = await store.get("taken")
    assert taken is not None
    assert taken.payload == 1


async def test_extend_pushes_the_deadline(store: Store, clock: ManualClock) -> None:
    await store.add(timer(clock, 0, id="t"))
    (lease,) = await store.claim("default", clock.now_ms, 10, 1000)
    clock.advance(900)
    extended = await store.extend(lease, 1000)
    assert (extended.timer, extended.token) == (lease.timer, lease.token)
    assert extended.deadline_ms == clock.now_ms + 1000
    clock.advance(999)  # past the first deadline, not the new one
    assert await claim_all(store, clock) == []
    assert await store.next_due_ms("default") == extended.deadline_ms
    await store.ack(extended)
    got = await store.get("t")
    assert got is not None
    assert got.state is State.DONE


async def test_extend_a_stale_lease_is_lease_lost(store: Store, clock: ManualClock) -> None:
    await store.add(timer(clock, 0, id="t"))
    (first,) = await store.claim("default", clock.now_ms, 10, 100)
    clock.advance(100)
    (second,) = await store.claim("default", clock.now_ms, 10, 100)
    with pytest.raises(LeaseLost):
        await store.extend(first, 1000)
    with pytest.raises(InvalidArgument):
        await store.extend(second, 0)
    await store.ack(second)
    with pytest.raises(LeaseLost):
        await store.extend(second, 1000)
    got = await store.get("t")
    assert got is not None
    assert got.state is State.DONE


async def test_extended_leases_expire_in_deadline_order(store: Store, clock: ManualClock) -> None:
    for name in "abc":
        await store.add(timer(clock, 0, id=name))
    leases = await store.claim("default", clock.now_ms, 10, 1000)
    clock.advance(500)
    await store.extend(leases[0], 1000)  # a now expires 500 ms after b and c
    clock.advance(500)  # b and c expire, a holds
    assert [lease.timer.id for lease in await store.claim("default", clock.now_ms, 10, 50)] == [
        "b",
        "c",
    ]


async def test_extend_many_renews_the_leases_it_still_holds(
    store: Store, clock: ManualClock
) -> None:
    await store.add_many([timer(clock, 0, id=f"t{n:02}") for n in range(40)])
    leases = await store.claim("default", clock.now_ms, 40, 1000)
    await store.ack(leases[3])
    clock.advance(900)
    renewed = await store.extend_many(leases, 1000)
    assert [n for n, lease in enumerate(renewed) if lease is None] == [3]
    for old, new in zip(leases, renewed, strict=True):
        if new is not None:
            assert (new.timer, new.token) == (old.timer, old.token)
            assert new.deadline_ms == clock.now_ms + 1000
    clock.advance(999)  # past the first deadline, not the new one
    assert await claim_all(store, clock) == []
    held = [lease for lease in renewed if lease is not None]
    assert await store.ack_many(held) == [True] * 39
    assert await store.extend_many(held, 1000) == [None] * 39
    assert await store.extend_many([], 1000) == []
    with pytest.raises(InvalidArgument):
        await store.extend_many(held, 0)


async def test_ack_many_reports_lost_leases(store: Store, clock: ManualClock) -> None:
    for name in "abcd":
        await store.add(timer(clock, 0, id=name))
    a, b, c, d = await store.claim("default", clock.now_ms, 10, 1000)
    await store.ack(b)
    await store.retry(d, clock.now_ms + MINUTE, "later")
    assert await store.ack_many([a, b, c, d]) == [True, False, True, False]
    assert await store.ack_many([]) == []
    states = {t.id: t.state for t in (await store.list()).timers}
    assert states == {"a": State.DONE, "b": State.DONE, "c": State.DONE, "d": State.SCHEDULED}
    clock.advance(2 * MINUTE)  # a's retention ends; list purges it
    assert [t.id for t in (await store.list()).timers] == ["d"]
    assert await store.ack_many([a, a]) == [False, False]


async def test_ack_many_acks_a_burst(store: Store, clock: ManualClock) -> None:
    await store.add_many([timer(clock, n % 50, id=f"t{n:04}") for n in range(1200)])
    clock.advance(50)
    leases = await store.claim("default", clock.now_ms, 1200, 1000)
    assert len(leases) == 1200
    assert await store.ack_many(leases) == [True] * 1200
    stats = await store.stats()
    assert (stats.counts[State.DONE], stats.counts[State.LEASED]) == (1200, 0)


async def test_next_due_ms_is_the_earliest_due_or_lease_deadline(
    store: Store, clock: ManualClock
) -> None:
    assert await store.next_due_ms("default") is None
    await store.add(timer(clock, 5000, id="late"))
    await store.add(timer(clock, 3000, id="soon"))
    await store.add(timer(clock, 1000, id="other", queue="other"))
    start = clock.now_ms
    assert await store.next_due_ms("default") == start + 3000
    assert await store.next_due_ms("other") == start + 1000
    clock.advance(3000)
    (lease,) = await store.claim("default", clock.now_ms, 10, 500)
    assert await store.next_due_ms("default") == start + 3500  # the lease may expire first
    await store.ack(lease)
    assert await store.next_due_ms("default") == start + 5000
    assert await store.reschedule("late", start + 4000)
    assert await store.next_due_ms("default") == start + 4000
    assert await store.cancel("late")
    assert await store.next_due_ms("default") is None
    clock.advance(MINUTE)
    (lease,) = await store.claim("other", clock.now_ms, 10, 500)
    assert await store.next_due_ms("other") == clock.now_ms + 500
    clock.advance(500)  # expired: the lease deadline stays the next due time until claimed
    assert await store.next_due_ms("other") == clock.now_ms


async def test_first_claimed_ms_marks_the_start_of_a_run_of_attempts(
    store: Store, clock: ManualClock
) -> None:
    added = await store.add(timer(clock, 0, id="t"))
    assert added.first_claimed_ms is None
    start = clock.now_ms
    (lease,) = await store.claim("default", clock.now_ms, 10, 100)
    assert lease.timer.first_claimed_ms == start
    clock.advance(100)  # expires: kept
    (lease,) = await store.claim("default", clock.now_ms, 10, 100)
    assert lease.timer.first_claimed_ms == start
    await store.retry(lease, clock.now_ms, "again")  # kept
    got = await store.get("t")
    assert got is not None
    assert got.first_claimed_ms == start
    clock.advance(10)
    (lease,) = await store.claim("default", clock.now_ms, 10, 100)
    assert lease.timer.first_claimed_ms == start
    await store.kill(lease, "dead")
    assert await store.replay("t")  # cleared
    got = await store.get("t")
    assert got is not None
    assert got.first_claimed_ms is None
    clock.advance(10)
    (lease,) = await store.claim("default", clock.now_ms, 10, 100)
    assert lease.timer.first_claimed_ms == clock.now_ms
    await store.retry(lease, clock.now_ms + MINUTE, "again")
    assert await store.reschedule("t", clock.now_ms + 5)  # cleared
    got = await store.get("t")
    assert got is not None
    assert got.first_claimed_ms is None


async def test_replace_clears_first_claimed_ms(store: Store, clock: ManualClock) -> None:
    await store.add(timer(clock, 0, id="t", payload=1))
    (lease,) = await store.claim("default", clock.now_ms, 10, 100)
    await store.retry(lease, clock.now_ms + MINUTE, "again")
    replaced = await store.add(timer(clock, 0, id="t", payload=2), replace=True)
    assert replaced.first_claimed_ms is None
    got = await store.get("t")
    assert got is not None
    assert got.first_claimed_ms is None


async def test_ack_many_acks_a_lease_given_twice_once(store: Store, clock: ManualClock) -> None:
    await store.add(timer(clock, 0, id="t"))
    (lease,) = await store.claim("default", clock.now_ms, 1, 1000)
    assert await store.ack_many([lease, lease]) == [True, False]


async def test_queues_of_an_empty_store_is_empty(store: Store) -> None:
    assert await store.queues() == []


async def test_queues_lists_each_queue_with_timers_once_sorted(
    store: Store, clock: ManualClock
) -> None:
    await store.add(timer(clock, 1000, id="a", queue="sms"))
    await store.add(timer(clock, 2000, id="b", queue="emails"))
    await store.add(timer(clock, 3000, id="c", queue="emails"))
    await store.add(timer(clock, 90 * MINUTE, id="d", queue="default"))
    assert await store.queues() == ["default", "emails", "sms"]


async def test_queues_lists_a_queue_whose_only_timer_is_leased(
    store: Store, clock: ManualClock
) -> None:
    await store.add(timer(clock, 1000, id="mail", queue="emails"))
    await store.add(timer(clock, 5000, id="other", queue="default"))
    clock.advance(1000)
    assert await claim_all(store, clock, "emails") == ["mail"]
    assert await store.queues() == ["default", "emails"]
    # an expired lease still holds its timer until a claim returns it
    clock.advance(60_000)
    assert await store.queues() == ["default", "emails"]


async def test_queues_drops_a_queue_once_its_timers_are_finished(
    store: Store, clock: ManualClock
) -> None:
    for n, queue in enumerate(("acked", "killed", "cancelled", "kept")):
        await store.add(timer(clock, 1000 + n, id=queue, queue=queue))
    clock.advance(2000)
    (acked,) = await store.claim("acked", clock.now_ms, 10, 30_000)
    (killed,) = await store.claim("killed", clock.now_ms, 10, 30_000)
    await store.ack(acked)
    await store.kill(killed, "no")
    assert await store.cancel("cancelled")
    assert await store.queues() == ["kept"]
    (kept,) = await store.claim("kept", clock.now_ms, 10, 30_000)
    await store.ack_many([kept])
    assert await store.queues() == []
