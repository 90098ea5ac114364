"""Looks at the due-queue index read only what came due since the last look, and everything at
least every `FULL_LOOK_S` (`LookWindow`): a queue due long ago, new to the worker, still fires."""

from __future__ import annotations

import asyncio

import pytest

from engine.support import running
from engine.test_worker import QUICK, Recorder
from tickwheel.engine import Worker, dispatch
from tickwheel.engine.look_window import FULL_LOOK_S, LOOK_SLACK_MS, LookWindow
from tickwheel.model import Callback, Timer
from tickwheel.stores import MemoryStore
from tickwheel.stores.base import DueQueues

CALLBACK = Callback(url="https://hooks.example.com/t")


class Clock:
    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


def test_a_window_starts_a_slack_before_the_last_look_and_a_full_look_comes_every_second() -> None:
    clock = Clock()
    window = LookWindow(clock)
    paused: set[str] = set()
    assert window.since_ms(10_000, paused) is None  # the first look reads everything
    clock.now_s += 0.3
    assert window.since_ms(10_300, paused) == 10_000 - LOOK_SLACK_MS
    clock.now_s += FULL_LOOK_S
    assert window.since_ms(11_300, paused) is None
    clock.now_s += 0.1
    assert window.since_ms(11_400, {"resumed"}) is None  # the paused queues changed
    clock.now_s += 0.1
    window.read_all_next()
    assert window.since_ms(11_500, paused) is None  # the look before failed, or was cut


class Looks(MemoryStore):
    """A memory store that notes the `since_ms` of each look at its due-queue index."""

    def __init__(self) -> None:
        super().__init__()
        self.since: list[int | None] = []

    async def due_queues(
        self, horizon_ms: int, limit: int, *, since_ms: int | None = None
    ) -> DueQueues:
        self.since.append(since_ms)
        return await super().due_queues(horizon_ms, limit, since_ms=since_ms)


async def test_a_new_queue_due_long_ago_is_found_by_the_next_full_look() -> None:
    store = Looks()
    target = Recorder(store)
    async with running(Worker(store, target, QUICK)):
        # keep the looks coming: a new queue every 100 ms
        for n in range(5):
            await store.add(Timer(queue=f"fresh{n}", due_ms=store.now_ms(), callback=CALLBACK))
            await asyncio.sleep(0.1)
        await store.add(
            Timer(id="old", queue="overdue", due_ms=store.now_ms() - 60_000, callback=CALLBACK)
        )
        added_ms = store.now_ms()
        await target.wait_for(6, timeout_s=5)
    fired = {f.timer_id: f for f in target.fired}
    assert fired["old"].at_ms - added_ms <= FULL_LOOK_S * 1000 + 300
    assert any(since is not None for since in store.since)  # most looks read a window


async def test_overdue_queues_beyond_one_looks_limit_are_found_without_waiting_for_the_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a look lists 2 queues beyond those served: 40 queues overdue by far more than a window
    monkeypatch.setattr(dispatch, "DUE_QUEUES_PER_LOOK", 2)
    store = Looks()
    target = Recorder(store)
    async with running(Worker(store, target, QUICK)):
        await asyncio.sleep(0.2)  # past the first full look
        overdue_ms = store.now_ms() - 60_000
        await store.add_many(
            [Timer(queue=f"q{n:02d}", due_ms=overdue_ms, callback=CALLBACK) for n in range(40)]
        )
        added_ms = store.now_ms()
        await target.wait_for(40, timeout_s=10)
    # each look cut at its limit makes the next read everything: not one full look a second
    assert max(f.at_ms for f in target.fired) - added_ms < 2 * FULL_LOOK_S * 1000
