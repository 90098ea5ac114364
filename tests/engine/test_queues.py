"""Which queues a worker fires: every queue by default, found as they appear; or the ones named."""

from __future__ import annotations

import asyncio

import pytest

from engine.support import running, until
from tickwheel.engine import ACKED, Outcome, Worker, WorkerSettings, dispatch
from tickwheel.model import Callback, Timer
from tickwheel.stores import Store

pytestmark = pytest.mark.latency  # tight bounds on real time: `make test` runs these alone

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


async def test_discovery_stops_at_the_most_queues_with_a_warning(
    store: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(dispatch, "MAX_DISCOVERED_QUEUES", 3)  # default's loop is one
    for queue in ("a", "b", "c"):
        await add(store, queue, queue)
    target = Fired()
    async with running(Worker(store, target, WorkerSettings(**QUICK))):
        await until(lambda: sorted(target.ids) == ["a", "b"])
        await asyncio.sleep(0.5)
    assert sorted(target.ids) == ["a", "b"]
    assert "serving the first 3 queues only; c and others are not fired" in caplog.text


def test_worker_settings_serve_every_queue_by_default() -> None:
    assert WorkerSettings().queues is None
