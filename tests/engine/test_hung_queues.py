"""Queues whose targets hang: claimed in paced turns, however many they are, while a prompt
queue beside them fires (`ClaimRoom.hung_turn`, `Fairness.come_back_ms`)."""

from __future__ import annotations

import asyncio

import pytest

from engine.support import running
from tickwheel.engine import ACKED, Outcome, Worker, WorkerSettings
from tickwheel.engine.claim_room import CLAIMS_AT_ONCE, HUNG_CLAIMS_PER_S
from tickwheel.engine.dispatch import REST_LOOK_S
from tickwheel.engine.outcome import TARGET_HANGS, Verdict
from tickwheel.model import Callback, State, Timer
from tickwheel.stores import Lease, MemoryStore
from tickwheel.stores.base import DueQueues

CALLBACK = Callback(url="https://hooks.example.com/t")
QUICK = WorkerSettings(lookahead_ms=100, lease_ms=10_000, grace_s=0.2)


class Hanging:
    """A target whose calls to `hang.example` never answer (until cancelled); others are acked."""

    async def fire(self, timer: Timer, attempt: int) -> Outcome:
        assert timer.callback is not None
        if "hang.example" in timer.callback.url:
            await asyncio.sleep(3600)
        return ACKED

    async def close(self) -> None:
        pass


class CountingClaims(MemoryStore):
    """A memory store that notes the store time of each claim, by queue, and of each look at
    its due-queue index."""

    def __init__(self) -> None:
        super().__init__()
        self.claims: list[tuple[int, str]] = []
        self.looks: list[int] = []

    async def claim(self, queue: str, horizon_ms: int, limit: int, lease_ms: int) -> list[Lease]:
        self.claims.append((self.now_ms(), queue))
        return await super().claim(queue, horizon_ms, limit, lease_ms)

    async def due_queues(
        self, horizon_ms: int, limit: int, *, since_ms: int | None = None
    ) -> DueQueues:
        self.looks.append(self.now_ms())
        return await super().due_queues(horizon_ms, limit, since_ms=since_ms)


async def test_queues_whose_targets_hang_are_claimed_in_paced_turns() -> None:
    """200 queues whose timers' target never answers come back from deferral again and again;
    claimed at `HUNG_CLAIMS_PER_S` at most, they cost a bounded number of claims a second,
    however many queues they are, and a prompt queue beside them fires on time."""
    store = CountingClaims()
    hung = Callback(url="https://hang.example/t")
    now = store.now_ms()
    await store.add_many(
        [Timer(due_ms=now + 100, queue=f"h{n:03}", callback=hung) for n in range(600)]
    )
    worker = Worker(store, Hanging(), QUICK)
    async with running(worker):
        await asyncio.sleep(4.0)  # the first pass, then the first come-backs from deferral
        window_start = store.now_ms()
        payment = await store.add(
            Timer(due_ms=window_start + 500, queue="payments", callback=CALLBACK)
        )
        await asyncio.sleep(3.0)
        window_end = store.now_ms()
        resting = worker.metrics.queues_resting
    in_window = [
        queue
        for at, queue in store.claims
        if window_start <= at < window_end and queue.startswith("h")
    ]
    assert len(in_window) <= HUNG_CLAIMS_PER_S * 3 + 5
    # their deferrals wake the due-queue look in vain: it looks at its pace for their turns
    looks = [at for at in store.looks if window_start <= at < window_end]
    assert len(looks) <= 3 / REST_LOOK_S + 4
    assert resting > 0  # the gauge shows the hung queues that wait for their turn
    stored = await store.get(payment.id)
    assert stored is not None
    assert stored.state is State.DONE


class Noting(Hanging):
    """`Hanging`, noting the store time each call to another target is made."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.fired: dict[str, int] = {}

    async def fire(self, timer: Timer, attempt: int) -> Outcome:
        assert timer.callback is not None
        if "hang.example" not in timer.callback.url:
            self.fired[timer.id] = self.store.now_ms()
        return await super().fire(timer, attempt)


@pytest.mark.latency  # its on-time bound: the parallel part's load made it 355 ms late once
async def test_a_new_queue_due_with_a_crowd_of_new_queues_whose_targets_hang_fires_on_time() -> (
    None
):
    """60 queues new to the worker, 20 timers each to a target that never answers, fall due
    with a new queue whose target answers. Past half the worker's room (96 of 192) each new
    queue claims one timer until its callbacks tell what its targets do, so the crowd leaves
    room for the new queue's first claim: it fires on time, not once the crowd's callbacks
    have gone back to the store (1.5 s later)."""
    store = MemoryStore()
    target = Noting(store)
    hung = Callback(url="https://hang.example/t")
    due = store.now_ms() + 300
    await store.add_many(
        [Timer(due_ms=due, queue=f"h{n:03}", callback=hung) for n in range(60) for _ in range(20)]
    )
    payment = await store.add(Timer(due_ms=due, queue="payments", callback=CALLBACK))
    settings = WorkerSettings(
        lookahead_ms=100, lease_ms=10_000, grace_s=0.2, concurrency=64, batch=64
    )
    worker = Worker(store, target, settings)
    async with running(worker):
        started = store.now_ms()  # a loaded machine may take past `due` to add the crowd
        await asyncio.sleep(1.0)
        held = worker.metrics.in_flight
    assert payment.id in target.fired
    assert target.fired[payment.id] - max(due, started) < 200
    assert held <= 192


class NoConnection:
    """A target that finds no free connection for any call (as beside calls that hang)."""

    async def fire(self, timer: Timer, attempt: int) -> Outcome:
        return Outcome(Verdict.DEFER, "no free connection to hang.example:443 within 5 s", 0.2)

    async def close(self) -> None:
        pass


async def test_a_queue_whose_callbacks_find_no_connection_is_claimed_in_paced_turns() -> None:
    """A callback handed back because no connection came free in time says the same of its
    queue as one handed back because its target hangs: the queue rests between paced turns
    instead of being claimed whole each time its timers come back."""
    store = MemoryStore()
    now = store.now_ms()
    await store.add_many(
        [Timer(due_ms=now + 100, queue=f"n{n:02}", callback=CALLBACK) for n in range(40)]
    )
    worker = Worker(store, NoConnection(), QUICK)
    async with running(worker):
        await asyncio.sleep(1.5)  # deferred once, back after 0.2 s: due again
        resting = worker.metrics.queues_resting
    assert resting > 0


async def test_a_queue_another_worker_found_hung_costs_one_claim_not_batch_after_batch() -> None:
    """Timers another worker sent back because their target hangs tell a worker new to their
    queues what it would otherwise find out by holding them for a second: each queue's first
    claim notes it hung, and the rest waits in the store for the queue's paced turns instead of
    being claimed batch after batch (74 claims of 40 queues before, in the same half second)."""
    store = CountingClaims()
    hung = Callback(url="https://hang.example/t")
    now = store.now_ms()
    await store.add_many(
        [Timer(due_ms=now, queue=f"h{n:02}", callback=hung) for n in range(40) for _ in range(40)]
    )
    for n in range(40):  # the other worker: claimed, found hanging, sent back
        leases = await store.claim(f"h{n:02}", now, 40, 10_000)
        for lease in leases:
            await store.defer(lease, now + 100, TARGET_HANGS)
    store.claims.clear()
    settings = WorkerSettings(lookahead_ms=100, lease_ms=10_000, grace_s=0.2, batch=8)
    worker = Worker(store, Hanging(), settings)
    async with running(worker):
        await asyncio.sleep(0.5)
    claims = [queue for _, queue in store.claims if queue.startswith("h")]
    assert sorted(set(claims)) == [f"h{n:02}" for n in range(40)]
    assert len(claims) <= 42


class SlowClaims(MemoryStore):
    """A memory store whose claims take 10 ms, as a store's round trip does."""

    async def claim(self, queue: str, horizon_ms: int, limit: int, lease_ms: int) -> list[Lease]:
        await asyncio.sleep(0.01)
        return await super().claim(queue, horizon_ms, limit, lease_ms)


async def test_a_crowd_of_new_queues_claims_one_timer_each_while_the_worker_has_room() -> None:
    """200 queues new to the worker fall due at once, 10 timers each to a target that never
    answers. While their claims fill the line for unknown queues, each further one claims a
    single timer until its callbacks tell what its targets do: the crowd takes about one timer
    a queue beyond the line's first claims (335), not every timer it has (2,000 before: each
    claim took a whole batch while the worker was under half full when it joined the line)."""
    store = SlowClaims()
    hung = Callback(url="https://hang.example/t")
    now = store.now_ms()
    await store.add_many(
        [Timer(due_ms=now, queue=f"h{n:03}", callback=hung) for n in range(200) for _ in range(10)]
    )
    worker = Worker(store, Hanging(), QUICK)
    async with running(worker):
        await asyncio.sleep(0.8)
        held = worker.metrics.in_flight
    assert held <= CLAIMS_AT_ONCE * 10 + 200 + 20
