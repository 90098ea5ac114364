"""The `Store.defer` contract: a lease handed back unsent spends no attempt, on every backend."""

from __future__ import annotations

import pytest

from tickwheel.errors import LeaseLost
from tickwheel.model import RetryPolicy, State, Timer
from tickwheel.stores import Store

from .conftest import ManualClock


async def test_a_deferral_spends_no_attempt_but_the_token_still_rises(
    store: Store, clock: ManualClock
) -> None:
    await store.add(Timer(id="t", due_ms=clock.now_ms, retry=RetryPolicy(max_attempts=2)))
    tokens = []
    for _ in range(5):
        (lease,) = await store.claim("default", clock.now_ms, 10, 1000)
        tokens.append(lease.token)
        assert lease.timer.attempts_spent == 1  # each claim is the first attempt still
        await store.defer(lease, clock.now_ms + 10, "waiting for its turn under a limit")
        clock.advance(10)
    assert tokens == [1, 2, 3, 4, 5]  # fencing tokens only go up
    got = await store.get("t")
    assert got is not None
    assert (got.state, got.due_ms, got.attempt, got.deferrals, got.attempts_spent) == (
        State.SCHEDULED,
        clock.now_ms,
        5,
        5,
        0,
    )
    assert got.last_error == "waiting for its turn under a limit"
    (lease,) = await store.claim("default", clock.now_ms, 10, 1000)
    assert (lease.token, lease.timer.attempts_spent) == (6, 1)
    await store.retry(lease, clock.now_ms, "HTTP 500")  # a real attempt: it counts
    (lease,) = await store.claim("default", clock.now_ms, 10, 1000)
    assert (lease.token, lease.timer.deferrals, lease.timer.attempts_spent) == (7, 5, 2)


async def test_a_lease_from_before_a_deferral_cannot_settle_the_next_claim(
    store: Store, clock: ManualClock
) -> None:
    await store.add(Timer(id="t", due_ms=clock.now_ms))
    (old,) = await store.claim("default", clock.now_ms, 10, 1000)
    await store.defer(old, clock.now_ms, "no free connection")
    (new,) = await store.claim("default", clock.now_ms, 10, 1000)
    assert new.token == old.token + 1
    for stale in (
        store.defer(old, clock.now_ms, "again"),
        store.retry(old, clock.now_ms, "again"),
        store.ack(old),
        store.kill(old, "again"),
        store.extend(old, 1000),
    ):
        with pytest.raises(LeaseLost):
            await stale
    await store.ack(new)
    got = await store.get("t")
    assert got is not None
    assert (got.state, got.attempt, got.deferrals) == (State.DONE, 2, 1)


async def test_deferring_twice_is_lease_lost(store: Store, clock: ManualClock) -> None:
    await store.add(Timer(id="t", due_ms=clock.now_ms))
    (lease,) = await store.claim("default", clock.now_ms, 10, 1000)
    await store.defer(lease, clock.now_ms + 5, "held")
    with pytest.raises(LeaseLost):
        await store.defer(lease, clock.now_ms + 5, "held")
    got = await store.get("t")
    assert got is not None
    assert got.deferrals == 1


async def test_an_expired_lease_comes_back_as_an_attempt_spent(
    store: Store, clock: ManualClock
) -> None:
    """Only a hand-back says "not sent": a lease that lapses may have fired, so it counts."""
    await store.add(Timer(id="t", due_ms=clock.now_ms))
    (lease,) = await store.claim("default", clock.now_ms, 10, 1000)
    await store.defer(lease, clock.now_ms, "held")
    await store.claim("default", clock.now_ms, 10, 1000)
    clock.advance(1000)
    (again,) = await store.claim("default", clock.now_ms, 10, 1000)
    assert (again.token, again.timer.deferrals, again.timer.attempts_spent) == (3, 1, 2)


async def test_a_replaced_timer_keeps_its_deferrals(store: Store, clock: ManualClock) -> None:
    await store.add(Timer(id="t", due_ms=clock.now_ms, payload=1))
    (lease,) = await store.claim("default", clock.now_ms, 10, 1000)
    await store.defer(lease, clock.now_ms + 5, "held")
    replaced = await store.add(Timer(id="t", due_ms=clock.now_ms, payload=2), replace=True)
    assert (replaced.attempt, replaced.deferrals) == (1, 1)
    assert await store.get("t") == replaced
    (lease,) = await store.claim("default", clock.now_ms, 10, 1000)
    assert (lease.token, lease.timer.payload, lease.timer.attempts_spent) == (2, 2, 1)


async def test_a_deferral_is_listed_with_its_count(store: Store, clock: ManualClock) -> None:
    await store.add(Timer(id="t", due_ms=clock.now_ms))
    (lease,) = await store.claim("default", clock.now_ms, 10, 1000)
    await store.defer(lease, clock.now_ms + 5, "held")
    (listed,) = (await store.list(State.SCHEDULED)).timers
    assert (listed.attempt, listed.deferrals, listed.attempts_spent) == (1, 1, 0)


async def test_the_run_of_attempts_begins_with_the_first_attempt_not_a_deferral(
    store: Store, clock: ManualClock
) -> None:
    """`max_retry_s` counts from the first claim that was an attempt: a timer held back for
    hours under a limit still has its whole retry window when it is first sent."""
    await store.add(Timer(id="t", due_ms=clock.now_ms))
    (lease,) = await store.claim("default", clock.now_ms, 10, 1000)
    assert lease.timer.first_claimed_ms == clock.now_ms
    await store.defer(lease, clock.now_ms + 5000, "held")
    got = await store.get("t")
    assert got is not None
    assert got.first_claimed_ms is None
    clock.advance(5000)
    (lease,) = await store.claim("default", clock.now_ms, 10, 1000)
    assert lease.timer.first_claimed_ms == clock.now_ms  # the first attempt's claim
    await store.retry(lease, clock.now_ms, "HTTP 500")
    started = clock.now_ms
    clock.advance(10)
    (lease,) = await store.claim("default", clock.now_ms, 10, 1000)
    await store.defer(lease, clock.now_ms, "held")  # an attempt was made: the run goes on
    got = await store.get("t")
    assert got is not None
    assert (got.first_claimed_ms, got.attempts_spent) == (started, 1)


async def test_many_deferrals_land_together_and_a_lost_lease_only_fails_its_own(
    store: Store, clock: ManualClock
) -> None:
    await store.add_many([Timer(id=f"t{n}", due_ms=clock.now_ms) for n in range(5)])
    leases = await store.claim("default", clock.now_ms, 10, 1000)
    stale = leases[2]
    await store.defer(stale, clock.now_ms, "handed back alone")
    later = clock.now_ms + 5000
    landed = await store.defer_many([(lease, later, "its target hangs") for lease in leases])
    assert landed == [True, True, False, True, True]
    for n in (0, 1, 3, 4):
        got = await store.get(f"t{n}")
        assert got is not None
        assert (got.state, got.due_ms, got.deferrals, got.attempts_spent) == (
            State.SCHEDULED,
            later,
            1,
            0,
        )
        assert got.last_error == "its target hangs"
    kept = await store.get("t2")
    assert kept is not None
    assert (kept.due_ms, kept.last_error) == (clock.now_ms, "handed back alone")
    assert await store.defer_many([]) == []


async def test_a_lease_twice_in_one_call_is_deferred_once_and_every_shard_lands(
    store: Store, clock: ManualClock
) -> None:
    """A store settles many leases in few calls (per shard on Redis): each lease lands once,
    in its place, whatever its shard."""
    await store.add_many([Timer(id=f"t{n}", due_ms=clock.now_ms) for n in range(200)])
    leases = await store.claim("default", clock.now_ms, 200, 1000)
    later = clock.now_ms + 5000
    deferrals = [(lease, later + n, "its target hangs") for n, lease in enumerate(leases)]
    landed = await store.defer_many([*deferrals, deferrals[7]])
    assert landed == [True] * 200 + [False]
    for lease, due_ms, _ in deferrals:
        got = await store.get(lease.timer.id)
        assert got is not None
        assert (got.state, got.due_ms, got.deferrals) == (State.SCHEDULED, due_ms, 1)
    assert (await store.stats()).counts[State.SCHEDULED] == 200
