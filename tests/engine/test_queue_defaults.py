"""A queue's defaults applied when its timers fire: a `Worker` with the HTTP target against a
real receiver on loopback, on memory, SQLite and Redis stores. A timer with no policy of its
own takes the queue's attempts, backoff and timeout; the queue's headers arrive under the
timer's own; a timer's own policy wins."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from engine.support import running, until
from tickwheel.callbacks import HttpSettings, HttpTarget
from tickwheel.engine import Worker, WorkerSettings
from tickwheel.model import Callback, RetryPolicy, State, Timer
from tickwheel.stores import Store
from tickwheel.stores.queue_defaults import QueueDefaults
from tickwheel.testing.receiver import Received, Reply

MakeReceiver = Any  # the conftest's receiver factory
QUICK = WorkerSettings(lookahead_ms=200, lease_ms=10_000, grace_s=1.0)
TWO_QUICK = RetryPolicy(max_attempts=2, min_backoff_s=0.01, max_backoff_s=0.02, timeout_s=5)


@asynccontextmanager
async def worker(store: Store) -> AsyncIterator[Worker]:
    http = HttpTarget(HttpSettings(allow_private_targets=True))
    started = Worker(store, http, QUICK)
    try:
        async with running(started):
            yield started
    finally:
        await http.close()


async def state_of(store: Store, timer_id: str) -> State | None:
    timer = await store.get(timer_id)
    return None if timer is None else timer.state


async def test_a_timer_without_a_policy_goes_dead_after_the_queues_attempts(
    store: Store, make_receiver: MakeReceiver
) -> None:
    receiver = await make_receiver(respond=lambda received: Reply(status=503))
    await store.set_queue_defaults("q", QueueDefaults(retry=TWO_QUICK))
    hook = Callback(url=f"{receiver.url}/hook")
    own = RetryPolicy(max_attempts=3, min_backoff_s=0.01, max_backoff_s=0.02)
    await store.add(Timer(id="plain", due_ms=store.now_ms(), queue="q", callback=hook))
    await store.add(Timer(id="own", due_ms=store.now_ms(), queue="q", callback=hook, retry=own))
    async with worker(store):
        await until(lambda: state_of_all(store, "plain", "own"), timeout_s=15)
        await asyncio.sleep(0.2)  # no attempt beyond the bound comes later
    attempts = {
        timer_id: sorted(r.attempt or 0 for r in receiver.received if r.timer_id == timer_id)
        for timer_id in ("plain", "own")
    }
    assert attempts == {"plain": [1, 2], "own": [1, 2, 3]}
    dead = await store.get("plain")
    assert dead is not None
    assert dead.last_error == "gave up after attempt 2: HTTP 503"
    assert (
        dead.retry == RetryPolicy()
    )  # the stored timer keeps its own (none): defaults apply when fired


async def state_of_all(store: Store, *ids: str) -> bool:
    return all([await state_of(store, timer_id) is State.DEAD for timer_id in ids])


async def test_the_queues_timeout_applies(store: Store, make_receiver: MakeReceiver) -> None:
    async def hang(received: Received) -> Reply:
        await asyncio.sleep(30)
        return Reply()

    receiver = await make_receiver(respond=hang)
    await store.set_queue_defaults(
        "slow", QueueDefaults(retry=RetryPolicy(max_attempts=1, timeout_s=0.3))
    )
    hook = Callback(url=f"{receiver.url}/hook")
    await store.add(Timer(id="t", due_ms=store.now_ms(), queue="slow", callback=hook))
    started = time.monotonic()
    async with worker(store):
        # the built-in timeout is 10 s: dead within a few seconds means the queue's 0.3 s held
        await until(lambda: state_of_is_dead(store, "t"), timeout_s=5)
    took_s = time.monotonic() - started
    assert took_s < 5
    dead = await store.get("t")
    assert dead is not None
    assert dead.last_error is not None
    assert "timed out" in dead.last_error or "timeout" in dead.last_error


async def state_of_is_dead(store: Store, timer_id: str) -> bool:
    return await state_of(store, timer_id) is State.DEAD


async def test_the_queues_headers_arrive_under_the_timers_own(
    store: Store, make_receiver: MakeReceiver
) -> None:
    receiver = await make_receiver()
    defaults = QueueDefaults(headers={"Authorization": "Bearer queue-secret", "X-Team": "ops"})
    await store.set_queue_defaults("q", defaults)
    own = Callback(url=f"{receiver.url}/own", headers={"x-team": "mine"})
    bare = Callback(url=f"{receiver.url}/bare")
    await store.add(Timer(id="own", due_ms=store.now_ms(), queue="q", callback=own))
    await store.add(Timer(id="bare", due_ms=store.now_ms(), queue="q", callback=bare))
    await store.add(Timer(id="elsewhere", due_ms=store.now_ms(), queue="other", callback=bare))
    async with worker(store):
        await receiver.wait_for(3, timeout_s=10)
    got = {r.timer_id: r.headers for r in receiver.received}
    assert got["own"]["authorization"] == "Bearer queue-secret"
    assert got["own"]["x-team"] == "mine"  # the timer's own wins, names ignoring case
    assert got["bare"]["authorization"] == "Bearer queue-secret"
    assert got["bare"]["x-team"] == "ops"
    assert "authorization" not in got["elsewhere"]
    assert "x-team" not in got["elsewhere"]


async def test_a_change_of_defaults_reaches_a_running_worker(
    store: Store, make_receiver: MakeReceiver
) -> None:
    receiver = await make_receiver()
    bare = Callback(url=f"{receiver.url}/bare")
    async with worker(store):
        await store.add(Timer(id="before", due_ms=store.now_ms(), queue="q", callback=bare))
        await receiver.wait_for(1, timeout_s=10)
        await store.set_queue_defaults("q", QueueDefaults(headers={"X-Late": "yes"}))
        await asyncio.sleep(1.5)  # workers read settings once a second
        await store.add(Timer(id="after", due_ms=store.now_ms(), queue="q", callback=bare))
        await receiver.wait_for(2, timeout_s=10)
    got = {r.timer_id: r.headers for r in receiver.received}
    assert "x-late" not in got["before"]
    assert got["after"]["x-late"] == "yes"
