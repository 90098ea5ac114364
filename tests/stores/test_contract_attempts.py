"""The attempt-history part of the `Store` contract, on every backend (see conftest's BACKENDS):
attempts are written by the settle they record, in the same atomic step, read newest first,
bounded per timer and by age, and go with their timer."""

from __future__ import annotations

from typing import Any

import pytest

from tickwheel.errors import LeaseLost
from tickwheel.model import State, Timer
from tickwheel.stores import Lease, Store, StoreSettings
from tickwheel.stores.attempt_record import Attempt

from .conftest import ManualClock, StoreFactory

MINUTE = 60_000


def attempt_of(number: int, at_ms: int, outcome: str = "retry", **fields: Any) -> Attempt:
    return Attempt(attempt=number, at_ms=at_ms, worker="host:1", outcome=outcome, **fields)


async def claim_one(store: Store, clock: ManualClock, timer_id: str = "a") -> Lease:
    leases = [
        lease
        for lease in await store.claim("default", clock.now_ms, 100, 30_000)
        if lease.timer.id == timer_id
    ]
    assert len(leases) == 1
    return leases[0]


async def fail_times(store: Store, clock: ManualClock, times: int, timer_id: str = "a") -> None:
    """Claim and retry the timer `times` times, each attempt recorded."""
    for _ in range(times):
        lease = await claim_one(store, clock, timer_id)
        number = lease.timer.attempts_spent
        record = attempt_of(number, clock.now_ms, status=500, body=f"no {number}")
        await store.retry(lease, clock.now_ms, "HTTP 500", attempt=record)
        clock.advance(1)


async def test_each_settle_records_its_attempt_newest_first(
    store: Store, clock: ManualClock
) -> None:
    await store.add(Timer(id="a", due_ms=clock.now_ms))
    lease = await claim_one(store, clock)
    await store.retry(
        lease,
        clock.now_ms + 10,
        "HTTP 503",
        attempt=attempt_of(
            1, clock.now_ms, status=503, latency_ms=1.5, next_due_ms=clock.now_ms + 10
        ),
    )
    clock.advance(10)
    lease = await claim_one(store, clock)
    await store.ack(lease, attempt=attempt_of(2, clock.now_ms, "ack", status=200, body="ok\n"))
    history = await store.attempts("a")
    assert [(a.attempt, a.outcome, a.status) for a in history] == [
        (2, "ack", 200),
        (1, "retry", 503),
    ]
    assert history[0].body == "ok\n"
    assert history[1].latency_ms == 1.5
    assert history[1].next_due_ms == history[1].at_ms + 10
    assert history[1].worker == "host:1"


async def test_ack_many_and_kill_record_and_settles_without_attempts_record_nothing(
    store: Store, clock: ManualClock
) -> None:
    for name in ("a", "b", "c", "d"):
        await store.add(Timer(id=name, due_ms=clock.now_ms))
    leases = {
        lease.timer.id: lease for lease in await store.claim("default", clock.now_ms, 10, 30_000)
    }
    landed = await store.ack_many(
        [leases["a"], leases["b"]], [attempt_of(1, clock.now_ms, "ack", status=204), None]
    )
    assert landed == [True, True]
    await store.kill(
        leases["c"], "HTTP 404", attempt=attempt_of(1, clock.now_ms, "dead", status=404)
    )
    await store.kill(leases["d"], "HTTP 404")
    assert [a.status for a in await store.attempts("a")] == [204]
    assert await store.attempts("b") == []
    assert [a.outcome for a in await store.attempts("c")] == ["dead"]
    assert await store.attempts("d") == []
    assert await store.attempts("unknown") == []


async def test_a_settle_that_loses_its_lease_records_nothing(
    store: Store, clock: ManualClock
) -> None:
    await store.add(Timer(id="a", due_ms=clock.now_ms))
    await store.add(Timer(id="b", due_ms=clock.now_ms))
    stale = await store.claim("default", clock.now_ms, 10, 1000)
    clock.advance(1001)  # the leases lapse; another claim takes the timers
    fresh = await store.claim("default", clock.now_ms, 10, 30_000)
    assert len(fresh) == 2
    by_id = {lease.timer.id: lease for lease in stale}
    with pytest.raises(LeaseLost):
        await store.ack(by_id["a"], attempt=attempt_of(1, clock.now_ms, "ack", status=200))
    with pytest.raises(LeaseLost):
        await store.retry(by_id["a"], clock.now_ms, "x", attempt=attempt_of(1, clock.now_ms))
    with pytest.raises(LeaseLost):
        await store.kill(by_id["a"], "x", attempt=attempt_of(1, clock.now_ms, "dead"))
    landed = await store.ack_many([by_id["b"]], [attempt_of(1, clock.now_ms, "ack", status=200)])
    assert landed == [False]
    assert await store.attempts("a") == []
    assert await store.attempts("b") == []


async def test_history_keeps_the_last_twenty_attempts(store: Store, clock: ManualClock) -> None:
    await store.add(Timer(id="a", due_ms=clock.now_ms))
    await fail_times(store, clock, 23)
    history = await store.attempts("a")
    assert [a.attempt for a in history] == list(range(23, 3, -1))
    assert history[0].body == "no 23"


@pytest.mark.parametrize("most", [0, 3])
async def test_the_history_size_is_the_stores_setting(
    make_store: StoreFactory, clock: ManualClock, most: int
) -> None:
    store = make_store(clock, StoreSettings(retention_ms=MINUTE, attempt_history=most))
    try:
        await store.add(Timer(id="a", due_ms=clock.now_ms))
        await fail_times(store, clock, 5)
        assert [a.attempt for a in await store.attempts("a")] == [5, 4, 3][:most]
        timer = await store.get("a")
        assert timer is not None
        assert timer.attempts_spent == 5  # recording or not, the settles all landed
    finally:
        await store.close()


async def test_attempts_past_the_stores_retention_are_gone(
    make_store: StoreFactory, clock: ManualClock
) -> None:
    store = make_store(clock, StoreSettings(retention_ms=MINUTE, attempt_retention_ms=10_000))
    try:
        await store.add(Timer(id="a", due_ms=clock.now_ms))
        await fail_times(store, clock, 2)
        clock.advance(6_000)
        await fail_times(store, clock, 1)
        assert [a.attempt for a in await store.attempts("a")] == [3, 2, 1]
        clock.advance(5_000)
        assert [a.attempt for a in await store.attempts("a")] == [3]
    finally:
        await store.close()


async def test_attempts_go_with_their_timer(store: Store, clock: ManualClock) -> None:
    await store.add(Timer(id="a", due_ms=clock.now_ms))
    await fail_times(store, clock, 1)
    # cancelled, then a new timer of the same id: none of the old attempts show
    assert await store.cancel("a")
    assert await store.attempts("a") == []
    clock.advance(1)
    await store.add(Timer(id="a", due_ms=clock.now_ms))
    assert await store.attempts("a") == []
    # acked, then past the done timers' retention (a minute here): gone with the timer
    lease = await claim_one(store, clock)
    await store.ack(lease, attempt=attempt_of(lease.timer.attempts_spent, clock.now_ms, "ack"))
    assert len(await store.attempts("a")) == 1
    clock.advance(MINUTE + 1)
    assert await store.get("a") is None
    assert await store.attempts("a") == []
    await store.add(Timer(id="a", due_ms=clock.now_ms))
    assert await store.attempts("a") == []


async def test_a_replayed_dead_letter_keeps_its_history(store: Store, clock: ManualClock) -> None:
    await store.add(Timer(id="a", due_ms=clock.now_ms))
    lease = await claim_one(store, clock)
    await store.kill(lease, "HTTP 410", attempt=attempt_of(1, clock.now_ms, "dead", status=410))
    assert await store.replay("a")
    clock.advance(1)
    lease = await claim_one(store, clock)
    await store.ack(lease, attempt=attempt_of(2, clock.now_ms, "ack", status=200))
    timer = await store.get("a")
    assert timer is not None
    assert timer.state is State.DONE
    assert [(a.attempt, a.outcome) for a in await store.attempts("a")] == [(2, "ack"), (1, "dead")]


async def test_an_attempt_timed_by_a_clock_a_little_behind_still_counts(
    store: Store, clock: ManualClock
) -> None:
    await store.add(Timer(id="a", due_ms=clock.now_ms))
    lease = await claim_one(store, clock)
    # the worker's clock (another host's) is 2 s behind the one that created the timer
    await store.ack(lease, attempt=attempt_of(1, clock.now_ms - 2_000, "ack", status=200))
    assert [a.at_ms for a in await store.attempts("a")] == [clock.now_ms - 2_000]
