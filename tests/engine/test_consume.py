"""`consume`: Python consumers get each timer of their queue on its due ms and settle it."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence

import pytest

from engine.support import until
from tickwheel import consume
from tickwheel.engine import Delivery, Metrics, WorkerSettings
from tickwheel.engine.pace import PACE_HOLD_S
from tickwheel.errors import Closed, InvalidArgument, LeaseLost, StoreUnavailable
from tickwheel.model import RetryPolicy, State, Timer
from tickwheel.stores import Lease, MemoryStore, Store

QUICK = WorkerSettings(queues=("emails",), lookahead_ms=200, lease_ms=10_000)


def email(store: Store, in_ms: int, to: str, **fields: object) -> Timer:
    return Timer(due_ms=store.now_ms() + in_ms, queue="emails", payload={"to": to}, **fields)


async def take(store: Store, count: int, settings: WorkerSettings = QUICK) -> list[Delivery]:
    """Collect `count` deliveries (unsettled) and stop consuming."""
    got: list[Delivery] = []
    async with asyncio.timeout(10):
        async with contextlib.aclosing(consume(store, "emails", settings=settings)) as deliveries:
            async for delivery in deliveries:
                got.append(delivery)
                if len(got) == count:
                    break
    return got


async def is_scheduled(store: Store, timer_id: str) -> bool:
    return await state_of(store, timer_id) is State.SCHEDULED


async def state_of(store: Store, timer_id: str) -> State:
    stored = await store.get(timer_id)
    assert stored is not None
    return stored.state


async def test_deliveries_arrive_in_due_order_on_their_ms_and_ack(store: Store) -> None:
    added = [await store.add(email(store, 100 + 50 * i, f"u{i}")) for i in range(5)]
    other = await store.add(Timer(due_ms=store.now_ms(), queue="sms", payload=1))
    seen: list[tuple[str, int]] = []
    async with asyncio.timeout(10):
        async with contextlib.aclosing(consume(store, "emails", settings=QUICK)) as deliveries:
            async for delivery in deliveries:
                seen.append((delivery.timer.id, store.now_ms() - delivery.timer.due_ms))
                assert delivery.attempt == 1
                await delivery.ack()
                if len(seen) == 5:
                    break
    assert [timer_id for timer_id, _ in seen] == [t.id for t in added]
    assert min(late for _, late in seen) >= 0
    for timer in added:
        assert await state_of(store, timer.id) is State.DONE
    assert await state_of(store, other.id) is State.SCHEDULED  # another queue's


async def test_retry_with_a_delay_delivers_again_with_the_next_attempt(store: Store) -> None:
    timer = await store.add(email(store, 0, "a"))
    attempts: list[int] = []
    arrivals: list[int] = []
    async with asyncio.timeout(10):
        async with contextlib.aclosing(consume(store, "emails", settings=QUICK)) as deliveries:
            async for delivery in deliveries:
                attempts.append(delivery.attempt)
                arrivals.append(store.now_ms())
                if delivery.attempt == 1:
                    await delivery.retry(0.3)
                else:
                    await delivery.ack()
                    break
    assert attempts == [1, 2]
    assert arrivals[1] - arrivals[0] >= 300
    assert await state_of(store, timer.id) is State.DONE


async def test_retry_without_delay_follows_the_timers_policy(store: Store) -> None:
    policy = RetryPolicy(max_attempts=2, min_backoff_s=0.05, max_backoff_s=0.05, timeout_s=1)
    timer = await store.add(email(store, 0, "a", retry=policy))
    async with asyncio.timeout(10):
        async with contextlib.aclosing(consume(store, "emails", settings=QUICK)) as deliveries:
            async for delivery in deliveries:
                await delivery.retry()
                if delivery.attempt == 2:
                    break
    stored = await store.get(timer.id)
    assert stored is not None
    assert stored.state is State.DEAD  # attempt 2 of 2 failed: the policy gives up
    assert stored.last_error == "gave up after attempt 2: retried by the consumer"


async def test_kill_dead_letters_with_the_reason(store: Store) -> None:
    timer = await store.add(email(store, 0, "a"))
    [delivery] = await take(store, 1)
    # taken but unsettled: breaking out handed it back; take it again and kill it
    assert await state_of(store, timer.id) is State.SCHEDULED
    async with asyncio.timeout(10):
        async with contextlib.aclosing(consume(store, "emails", settings=QUICK)) as deliveries:
            async for delivery in deliveries:
                assert delivery.attempt == 2
                await delivery.kill("mailbox does not exist")
                break
    stored = await store.get(timer.id)
    assert stored is not None
    assert (stored.state, stored.last_error) == (State.DEAD, "mailbox does not exist")


async def test_breaking_out_hands_back_everything_held(store: Store) -> None:
    added = [await store.add(email(store, 10 * i, f"u{i}")) for i in range(10)]
    got = await take(store, 3)
    assert len(got) == 3
    # nothing stays leased: the 3 taken and the ones waiting in the wheel are scheduled again
    for timer in added:
        assert await state_of(store, timer.id) is State.SCHEDULED
    again = await take(store, 10)
    assert sorted(d.timer.id for d in again) == sorted(t.id for t in added)


async def test_cancelling_the_consuming_task_hands_back(store: Store) -> None:
    timer = await store.add(email(store, 0, "a"))
    holding = asyncio.Event()

    async def hold_forever() -> None:
        async for _ in consume(store, "emails", settings=QUICK):
            holding.set()
            await asyncio.sleep(3600)

    task = asyncio.create_task(hold_forever())
    await asyncio.wait_for(holding.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # the abandoned generator is closed by the loop's finalizer hook, which hands back
    await until(lambda: is_scheduled(store, timer.id), timeout_s=5)


async def test_a_settled_delivery_cannot_be_settled_again(store: Store) -> None:
    await store.add(email(store, 0, "a"))
    async with asyncio.timeout(10):
        async with contextlib.aclosing(consume(store, "emails", settings=QUICK)) as deliveries:
            async for delivery in deliveries:
                await delivery.ack()
                with pytest.raises(Closed):
                    await delivery.ack()
                with pytest.raises(Closed):
                    await delivery.kill("late")
                break


async def test_ack_after_the_lease_passed_on_raises_lease_lost(store: Store) -> None:
    timer = await store.add(email(store, 0, "a"))
    [delivery] = await take(store, 1)  # handed back on break: its lease is gone
    assert await state_of(store, timer.id) is State.SCHEDULED
    with pytest.raises(LeaseLost):
        await delivery.ack()


async def test_settings_must_name_the_consumed_queue() -> None:
    store = MemoryStore()
    with pytest.raises(InvalidArgument) as info:
        async for _ in consume(store, "emails", settings=WorkerSettings(queues=("sms",))):
            pass
    assert info.value.argument == "settings.queues"


class CountingAcks(MemoryStore):
    """A memory store that counts its ack calls, and can refuse them as an outage would."""

    def __init__(self) -> None:
        super().__init__()
        self.ack_calls = 0
        self.down = False
        self.lost = False

    async def ack_many(self, leases: Sequence[Lease]) -> list[bool]:
        self.ack_calls += 1
        if self.down:
            raise StoreUnavailable("down for the test")
        if self.lost:
            return [False] * len(leases)
        return await super().ack_many(leases)


async def test_a_plain_ack_loop_does_not_wait_for_a_round_trip_per_ack() -> None:
    store = CountingAcks()
    added = await store.add_many([email(store, 50, f"u{i}") for i in range(300)])
    seen = 0
    async with asyncio.timeout(10):
        async with contextlib.aclosing(consume(store, "emails", settings=QUICK)) as deliveries:
            async for delivery in deliveries:
                await delivery.ack()
                seen += 1
                if seen == len(added):
                    break
    # closing the loop flushed every queued ack, in a few batches rather than one call each
    assert [await state_of(store, t.id) for t in added] == [State.DONE] * len(added)
    assert store.ack_calls <= 10


async def test_a_lost_ack_is_counted_or_with_confirm_raised() -> None:
    store = CountingAcks()
    store.lost = True
    await store.add_many([email(store, 0, "a"), email(store, 10, "b")])
    metrics = Metrics()
    async with asyncio.timeout(10):
        deliveries = consume(store, "emails", settings=QUICK, metrics=metrics)
        async with contextlib.aclosing(deliveries):
            first = await anext(deliveries)
            await first.ack()  # queued: the loss is counted, not raised
            second = await anext(deliveries)
            with pytest.raises(LeaseLost):
                await second.ack(confirm=True)
    assert metrics.leases_lost == 2


async def test_an_ack_that_never_lands_means_a_redelivery_not_a_loss() -> None:
    store = CountingAcks()
    store.down = True
    timer = await store.add(email(store, 0, "a"))
    short = WorkerSettings(queues=("emails",), lookahead_ms=100, lease_ms=500, grace_s=5)
    [delivery] = await take_and(store, short, lambda d: d.ack())
    assert delivery.attempt == 1
    store.down = False  # back after the lease lapsed: the timer comes round again
    [again] = await take_and(store, short, lambda d: d.ack())
    assert (again.timer.id, again.attempt) == (timer.id, 2)
    assert await state_of(store, timer.id) is State.DONE


async def test_retry_and_kill_are_queued_and_land_by_the_end_of_the_loop(store: Store) -> None:
    retried = await store.add(email(store, 0, "a"))
    killed = await store.add(email(store, 0, "b"))
    async with asyncio.timeout(10):
        async with contextlib.aclosing(consume(store, "emails", settings=QUICK)) as deliveries:
            async for delivery in deliveries:
                if delivery.timer.id == retried.id:
                    await delivery.retry(60)
                else:
                    await delivery.kill("no such mailbox")
                if delivery.timer.id == killed.id or await state_of(store, killed.id) is State.DEAD:
                    break
    assert await state_of(store, retried.id) is State.SCHEDULED
    assert await state_of(store, killed.id) is State.DEAD


async def take_and(
    store: Store, settings: WorkerSettings, settle: Callable[[Delivery], Awaitable[None]]
) -> list[Delivery]:
    """Take one delivery, settle it with `settle`, and end the loop."""
    async with asyncio.timeout(10):
        async with contextlib.aclosing(consume(store, "emails", settings=settings)) as deliveries:
            async for delivery in deliveries:
                await settle(delivery)
                return [delivery]
    return []


async def test_a_backlog_held_when_the_loop_breaks_is_all_handed_back(store: Store) -> None:
    # claims of a backlog follow one another: the ones held when the loop ends, delivered
    # or not, go back to the store rather than stay leased until they lapse
    settings = WorkerSettings(queues=("emails",), lookahead_ms=200, lease_ms=60_000, batch=100)
    added = await store.add_many([email(store, 0, f"u{i}") for i in range(1000)])
    got = await take(store, 150, settings)
    assert len(got) == 150
    counts = (await store.stats()).counts
    assert counts.get(State.LEASED, 0) == 0
    assert counts.get(State.SCHEDULED, 0) == len(added)


# a worker's room is 10 + 2 * 50 = 110 timers; claims start half a second ahead at least
PACED = WorkerSettings(
    queues=("emails",), batch=50, concurrency=10, max_in_flight=2_000, lookahead_ms=1_000
)


async def test_a_consumer_that_settles_fast_claims_a_coming_burst_ahead_whole() -> None:
    store = MemoryStore()
    await store.add_many([email(store, 0, f"w{i}") for i in range(400)])
    metrics = Metrics()
    held_at_burst = 0
    seen = 0
    async with asyncio.timeout(10):
        deliveries = consume(store, "emails", settings=PACED, metrics=metrics)
        async with contextlib.aclosing(deliveries):
            async for delivery in deliveries:
                await delivery.ack()
                seen += 1
                if seen == 400:
                    await store.add_many([email(store, 1_500, f"b{i}") for i in range(1_000)])
                elif seen == 401:
                    held_at_burst = metrics.in_flight + 1  # with the one just acked
                elif seen == 1_400:
                    break
    assert held_at_burst == 1_000  # claimed before its instant, not a room of 110 at a time


async def test_a_slow_consumer_holds_about_a_second_of_its_work_the_rest_stays_stored() -> None:
    store = MemoryStore()
    await store.add_many([email(store, 0, f"w{i}") for i in range(2_000)])
    metrics = Metrics()
    most_held = seen = 0
    began = time.monotonic()
    async with asyncio.timeout(10):
        deliveries = consume(store, "emails", settings=PACED, metrics=metrics)
        async with contextlib.aclosing(deliveries):
            async for delivery in deliveries:
                most_held = max(most_held, metrics.in_flight)
                await asyncio.sleep(0.004)  # a few hundred a second
                await delivery.ack()
                seen += 1
                if seen == 600:
                    stored = (await store.stats()).counts.get(State.SCHEDULED, 0)
                    break
    pace = seen / (time.monotonic() - began)
    assert most_held <= max(110, 1.25 * pace * PACE_HOLD_S)
    assert stored >= 2_000 - seen - most_held


async def test_a_consumer_of_slow_tasks_is_as_fast_as_they_settle_not_as_it_hands_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("tickwheel.engine.pace.PACE_SAMPLE", 32)  # a pace within the test
    store = MemoryStore()
    await store.add_many([email(store, 0, f"w{i}") for i in range(2_000)])
    metrics = Metrics()
    most_held = 0
    tasks: list[asyncio.Task[None]] = []

    async def handle(delivery: Delivery) -> None:
        await asyncio.sleep(1.2)  # each task outlasts the second a room holds
        await delivery.ack()

    async with asyncio.timeout(10):
        deliveries = consume(store, "emails", settings=PACED, metrics=metrics)
        async with contextlib.aclosing(deliveries):
            async for delivery in deliveries:
                most_held = max(most_held, metrics.in_flight)
                tasks.append(asyncio.create_task(handle(delivery)))
                if len(tasks) == 300:  # the third room's worth: two samples of the pace
                    break
    for task in tasks:
        task.cancel()
    assert most_held <= 110  # its loop hands out thousands a second; its tasks settle 92
