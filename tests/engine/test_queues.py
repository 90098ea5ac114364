"""Which queues a worker fires: every queue by default, found as they appear; or the ones named."""

from __future__ import annotations

import asyncio

import pytest

from engine.support import running, until
from tickwheel.engine import ACKED, Outcome, Worker, WorkerSettings, dispatch
from tickwheel.model import Callback, Timer
from tickwheel.stores import Store

pytestmark = pytest.mark.latency  # tight bounds on real time: `make test` runs these after the rest

CALLBACK = Callback(url="https://hooks.example.com/t")
QUICK = {"lookahead_ms": 200, "lease_ms": 10_000, "grace_s": 1.0}


class Fired:
    """A target that records the ids it fires and acks them."""

    def __init__(self) -> None:
        self.ids: list[str] = []

    async def fire(self, timer: Timer, attempt: int) -> Outcome:
        self.ids.append(timer.id)
        return ACKED

    async def close(self) -> None:
        pass


async def add(store: Store, timer_id: str, queue: str, delay_ms: int = 100) -> None:
    await store.add(
        Timer(id=timer_id, due_ms=store.now_ms() + delay_ms, queue=queue, callback=CALLBACK)
    )


async def test_a_default_worker_fires_every_queue_and_one_added_later(store: Store) -> None:
    await add(store, "d", "default")
    await add(store, "e", "emails")
    target = Fired()
    async with running(Worker(store, target, WorkerSettings(**QUICK))):
        await until(lambda: sorted(target.ids) == ["d", "e"])
        await asyncio.sleep(2.0)
        # a queue the store did not hold when the worker started: heard of at once, not at
        # the next periodic listing, so its first timer fires on time
        await add(store, "late", "reports", delay_ms=300)
        await until(lambda: "late" in target.ids, timeout_s=0.6)
    assert sorted(target.ids) == ["d", "e", "late"]
    assert await store.queues() == []


async def test_named_queues_restrict_the_worker(store: Store) -> None:
    await add(store, "d", "default")
    await add(store, "e", "emails")
    target = Fired()
    async with running(Worker(store, target, WorkerSettings(queues=("emails",), **QUICK))):
        await until(lambda: target.ids == ["e"])
        await asyncio.sleep(0.5)
    assert target.ids == ["e"]
    assert await store.queues() == ["default"]


async def test_a_due_queue_fires_behind_any_number_of_far_queues(store: Store) -> None:
    # the attack: one batch of far-future timers in queues named to sort first once starved
    # every later queue for good (a cap of 256 discovered queues, in name order)
    far = [
        Timer(id=f"junk-{n}", due_ms=store.now_ms() + 86_400_000, queue=f"{n:04d}", payload=1)
        for n in range(300)
    ]
    await store.add_many(far)
    target = Fired()
    worker = Worker(store, target, WorkerSettings(**QUICK))
    async with running(worker):
        await asyncio.sleep(0.3)
        await add(store, "pay", "payments", delay_ms=300)
        await until(lambda: target.ids == ["pay"], timeout_s=1.5)
        # cancelling the junk changes nothing for anyone; no loop serves a queue with no
        # work soon
        for timer in far[:10]:
            assert await store.cancel(timer.id)
        await add(store, "pay2", "payments", delay_ms=300)
        await until(lambda: target.ids == ["pay", "pay2"], timeout_s=1.5)
        await until(lambda: worker.metrics.queues_served <= 2)


async def test_past_the_most_claim_loops_due_queues_take_turns(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dispatch, "MAX_CLAIM_LOOPS", 3)  # default's loop is one
    now = store.now_ms()
    await store.add_many(
        [
            Timer(id=f"{queue}-{n}", due_ms=now + 50 * n, queue=queue, callback=CALLBACK)
            for queue in ("a", "b", "c", "d", "e", "f")
            for n in range(5)
        ]
    )
    target = Fired()
    worker = Worker(store, target, WorkerSettings(**QUICK))
    async with running(worker):
        await until(lambda: len(target.ids) == 30, timeout_s=5.0)
        await until(lambda: worker.metrics.queues_unserved == 0)
        assert worker.metrics.queues_served <= 3
    assert sorted(target.ids) == sorted(f"{q}-{n}" for q in "abcdef" for n in range(5))


async def test_a_paused_queue_waits_without_holding_a_loop(store: Store) -> None:
    await store.pause_queue("held", True)
    await add(store, "h", "held", delay_ms=0)
    await add(store, "o", "other", delay_ms=50)
    target = Fired()
    worker = Worker(store, target, WorkerSettings(**QUICK))
    async with running(worker):
        await until(lambda: target.ids == ["o"])
        await asyncio.sleep(0.3)
        assert target.ids == ["o"]
        await store.pause_queue("held", False)
        await until(lambda: target.ids == ["o", "h"], timeout_s=3.0)


def test_worker_settings_serve_every_queue_by_default() -> None:
    assert WorkerSettings().queues is None
