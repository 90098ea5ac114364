"""Queues whose targets hang: claimed in paced turns, however many they are, while a prompt
queue beside them fires (`ClaimRoom.hung_turn`, `Fairness.come_back_ms`)."""

from __future__ import annotations

import asyncio

from engine.support import running
from tickwheel.engine import ACKED, Outcome, Worker, WorkerSettings
from tickwheel.engine.claim_room import HUNG_CLAIMS_PER_S
from tickwheel.model import Callback, State, Timer
from tickwheel.stores import Lease, MemoryStore

CALLBACK = Callback(url="https://hooks.example.com/t")


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
    """A memory store that notes the store time of each claim, by queue."""

    def __init__(self) -> None:
        super().__init__()
        self.claims: list[tuple[int, str]] = []

    async def claim(self, queue: str, horizon_ms: int, limit: int, lease_ms: int) -> list[Lease]:
        self.claims.append((self.now_ms(), queue))
        return await super().claim(queue, horizon_ms, limit, lease_ms)


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
    worker = Worker(
        store, Hanging(), WorkerSettings(lookahead_ms=100, lease_ms=10_000, grace_s=0.2)
    )
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
    assert resting > 0  # the gauge shows the hung queues that wait for their turn
    stored = await store.get(payment.id)
    assert stored is not None
    assert stored.state is State.DONE
