"""The bulk part of the `Store` contract: purging a queue's timers of one state, and a queue's
defaults, on every backend (see conftest's BACKENDS)."""

from __future__ import annotations

import pytest

from tickwheel.errors import InvalidArgument, InvalidTimer
from tickwheel.model import Callback, RetryPolicy, State, Timer
from tickwheel.schedule import Schedule
from tickwheel.stores import Store
from tickwheel.stores.base import Limit, QueueSettings
from tickwheel.stores.memory import purging as memory_purging
from tickwheel.stores.postgres import purging as postgres_purging
from tickwheel.stores.queue_defaults import QueueDefaults
from tickwheel.stores.redis import purging as redis_purging
from tickwheel.stores.sqlite import purging as sqlite_purging

from .conftest import ManualClock

MINUTE = 60_000
HOUR = 60 * MINUTE
DAY = 24 * HOUR
LEASE_MS = 30_000
# due times that land in each level of every store's index: now, this minute (Redis's near
# set), within the hour (minute slots), days ahead (day slots)
DELAYS = (0, 20_000, 5 * MINUTE, 50 * MINUTE, 3 * HOUR, 2 * DAY, 40 * DAY)


def timer(clock: ManualClock, delay_ms: int, **fields: object) -> Timer:
    return Timer(due_ms=clock.now_ms + delay_ms, **fields)  # type: ignore[arg-type]


async def counts(store: Store, queue: str) -> dict[State, int]:
    for info in await store.queue_infos():
        if info.name == queue:
            return {state: n for state, n in info.counts.items() if n}
    return {}


async def fill(store: Store, clock: ManualClock, queue: str = "q") -> None:
    """Give `queue` two timers of each state but done, and one done; `other` one scheduled."""
    await store.add_many(
        [timer(clock, delay, id=f"s{n}", queue=queue) for n, delay in enumerate(DELAYS)]
    )
    for n in range(2):
        await store.add(timer(clock, 0, id=f"leased{n}", queue=queue))
        await store.add(timer(clock, 0, id=f"dead{n}", queue=queue))
        await store.add(timer(clock, 10 * MINUTE, id=f"paused{n}", queue=queue))
        assert await store.pause(f"paused{n}")
    await store.add(timer(clock, 0, id="done", queue=queue))
    await store.add(timer(clock, 0, id="o1", queue="other"))
    # claim only what is due now: leased, dead, done and s0
    leases = {
        lease.timer.id: lease for lease in await store.claim(queue, clock.now_ms, 100, LEASE_MS)
    }
    assert set(leases) == {"s0", "leased0", "leased1", "dead0", "dead1", "done"}
    for n in range(2):
        await store.kill(leases[f"dead{n}"], "boom")
    await store.ack(leases["done"])
    await store.retry(leases["s0"], clock.now_ms + 1000, "again")


async def test_purge_deletes_one_state_and_answers_the_count(
    store: Store, clock: ManualClock
) -> None:
    await fill(store, clock)
    before = await counts(store, "q")
    assert before == {
        State.SCHEDULED: 7,
        State.LEASED: 2,
        State.PAUSED: 2,
        State.DEAD: 2,
        State.DONE: 1,
    }
    assert await store.purge("q", State.PAUSED) == 2
    del before[State.PAUSED]
    assert await counts(store, "q") == before
    assert await store.purge("q", State.DEAD) == 2
    assert await store.purge("q", State.SCHEDULED) == 7
    assert await counts(store, "q") == {State.LEASED: 2, State.DONE: 1}
    assert await store.purge("q", State.SCHEDULED) == 0  # nothing left: still an answer
    for gone in ("s0", "s6", "paused0", "dead1"):
        assert await store.get(gone) is None
    stats = await store.stats()
    assert stats.counts[State.SCHEDULED] == 1  # the other queue's
    assert stats.counts[State.DEAD] == 0
    assert await counts(store, "other") == {State.SCHEDULED: 1}


async def test_a_leased_timer_survives_a_purge_of_every_state(
    store: Store, clock: ManualClock
) -> None:
    await store.add(timer(clock, 0, id="held", queue="q"))
    (lease,) = await store.claim("q", clock.now_ms, 10, LEASE_MS)
    for state in (State.SCHEDULED, State.PAUSED, State.DEAD):
        assert await store.purge("q", state) == 0
    got = await store.get("held")
    assert got is not None
    assert got.state is State.LEASED
    assert await store.ack_many([lease]) == [True]  # its worker's ack still lands
    assert await counts(store, "q") == {State.DONE: 1}


@pytest.mark.parametrize("state", [State.LEASED, State.DONE, "nonsense"])
async def test_purging_a_state_not_purgeable_is_refused(store: Store, state: State) -> None:
    with pytest.raises(InvalidArgument) as caught:
        await store.purge("q", state)
    assert caught.value.argument == "state"


@pytest.mark.parametrize("queue", ["", "a b", "x" * 65, "*"])
async def test_purging_a_queue_no_timer_can_have_is_refused(store: Store, queue: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        await store.purge(queue, State.SCHEDULED)
    assert caught.value.argument == "queue"


async def test_the_index_forgets_an_emptied_queue(store: Store, clock: ManualClock) -> None:
    await store.add_many(
        [timer(clock, delay, id=f"t{n}", queue="q") for n, delay in enumerate(DELAYS)]
    )
    await store.add(timer(clock, 1000, id="kept", queue="other"))
    assert "q" in (await store.due_queues(clock.now_ms + 100 * DAY, 10)).queues
    assert await store.purge("q", State.SCHEDULED) == len(DELAYS)
    due = await store.due_queues(clock.now_ms + 100 * DAY, 10)
    assert due.queues == ["other"]
    assert await store.next_due_ms("q") is None
    assert "q" not in await store.queues()
    assert await store.claim("q", clock.now_ms + 100 * DAY, 100, LEASE_MS) == []
    # the queue works as before once timers come back
    await store.add(timer(clock, 0, id="back", queue="q"))
    assert "q" in (await store.due_queues(clock.now_ms, 10)).queues
    assert [lease.timer.id for lease in await store.claim("q", clock.now_ms, 10, LEASE_MS)] == [
        "back"
    ]


async def test_a_purge_of_many_goes_in_batches(
    store: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    for module in (memory_purging, sqlite_purging, redis_purging, postgres_purging):
        if hasattr(module, "PURGE_BATCH"):
            monkeypatch.setattr(module, "PURGE_BATCH", 3)
    timers = [timer(clock, DELAYS[n % len(DELAYS)] + n, id=f"t{n}", queue="q") for n in range(80)]
    await store.add_many(timers)
    await store.add_many(
        [timer(clock, 10 * MINUTE + n, id=f"x{n}", queue="keep") for n in range(5)]
    )
    assert await store.purge("q", State.SCHEDULED) == 80
    assert await counts(store, "q") == {}
    assert await counts(store, "keep") == {State.SCHEDULED: 5}
    listed = await store.list(State.SCHEDULED, limit=1000)
    assert sorted(t.id for t in listed.timers) == [f"x{n}" for n in range(5)]


@pytest.mark.parametrize("ahead_ms", [1000, 5 * MINUTE, 2 * DAY])
async def test_a_schedules_pending_occurrence_is_not_purged(
    store: Store, clock: ManualClock, ahead_ms: int
) -> None:
    hook = Callback(url="https://example.com/tick")
    state = await store.add_schedule(
        Schedule(id="s1", every_s=60, start_ms=clock.now_ms + ahead_ms, callback=hook, queue="q")
    )
    await store.add_many([timer(clock, ahead_ms + n, id=f"plain{n}", queue="q") for n in range(3)])
    assert await store.purge("q", State.SCHEDULED) == 3
    pending = await store.list(State.SCHEDULED, queue="q")
    assert [t.id for t in pending.timers] == [f"s1@{state.next_ms}"]
    assert await store.next_due_ms("q") == state.next_ms
    clock.advance(ahead_ms)
    leases = await store.claim("q", clock.now_ms, 10, LEASE_MS)
    assert [lease.timer.id for lease in leases] == [f"s1@{state.next_ms}"]


async def test_moved_and_cancelled_timers_leave_nothing_behind(
    store: Store, clock: ManualClock
) -> None:
    """A timer moved or cancelled far ahead may leave a stale entry in a store's index (Redis
    day slots): the purge deletes each timer once and counts only those."""
    await store.add_many([timer(clock, 2 * DAY + n, id=f"t{n}", queue="q") for n in range(6)])
    assert await store.reschedule("t0", clock.now_ms + 3 * DAY)
    assert await store.reschedule("t1", clock.now_ms + 30_000)
    assert await store.cancel("t2")
    assert await store.pause("t3")
    assert await store.purge("q", State.SCHEDULED) == 4
    assert await counts(store, "q") == {State.PAUSED: 1}
    assert await store.purge("q", State.PAUSED) == 1
    assert await counts(store, "q") == {}
    clock.advance(4 * DAY)
    assert await store.claim("q", clock.now_ms, 100, LEASE_MS) == []


async def test_queue_defaults_round_trip_beside_pause_and_limit(store: Store) -> None:
    defaults = QueueDefaults(
        retry=RetryPolicy(max_attempts=2, min_backoff_s=0.5, max_backoff_s=2, timeout_s=1.5),
        headers={"Authorization": "Bearer abc", "X-Team": "ops"},
    )
    version = (await store.settings_versions())[0]
    assert await store.set_queue_defaults("q", defaults) is False
    assert (await store.settings_versions())[0] != version
    assert await store.pause_queue("q", True)
    assert await store.set_queue_limit("q", Limit(rate=5)) is False
    settings = (await store.queue_settings())["q"]
    assert settings == QueueSettings(paused=True, limit=Limit(rate=5), defaults=defaults)
    assert settings.defaults is not None
    assert dict(settings.defaults.headers) == {"Authorization": "Bearer abc", "X-Team": "ops"}
    infos = {info.name: info for info in await store.queue_infos()}
    assert infos["q"].settings.defaults == defaults
    headers_only = QueueDefaults(headers={"X-Team": "ops"})
    assert await store.set_queue_defaults("q", headers_only) is True
    assert (await store.queue_settings())["q"].defaults == headers_only
    assert await store.set_queue_defaults("q", None) is True
    assert (await store.queue_settings())["q"] == QueueSettings(paused=True, limit=Limit(rate=5))
    assert await store.set_queue_defaults("q", None) is False


async def test_empty_queue_defaults_are_none_and_set_queue_replaces_them(store: Store) -> None:
    await store.set_queue_defaults("q", QueueDefaults())
    assert "q" not in await store.queue_settings()
    defaults = QueueDefaults(retry=RetryPolicy(max_attempts=3))
    await store.set_queue("q", QueueSettings(defaults=defaults))
    assert (await store.queue_settings())["q"] == QueueSettings(defaults=defaults)
    await store.set_queue("q", QueueSettings(paused=True))
    assert (await store.queue_settings())["q"] == QueueSettings(paused=True)


async def test_queue_defaults_refuse_what_a_timer_refuses(store: Store) -> None:
    with pytest.raises(InvalidTimer) as caught:
        QueueDefaults(headers={"Tickwheel-Attempt": "1"})
    assert caught.value.argument == "headers"
    with pytest.raises(InvalidTimer):
        QueueDefaults(headers={f"X-{n}": "v" for n in range(33)})
    with pytest.raises(InvalidArgument) as refused:
        await store.set_queue_defaults("a b", QueueDefaults(headers={"X-A": "1"}))
    assert refused.value.argument == "queue"
