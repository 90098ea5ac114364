"""The engine against real failures: a killed worker, a flapping receiver, a Redis outage.

Everything is real: redis-server processes started here, worker processes killed with
SIGKILL, and an HTTP receiver on loopback. Each test counts that no timer was lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from engine.support import running, until
from tickwheel.callbacks.http import HttpTarget
from tickwheel.callbacks.settings import HttpSettings
from tickwheel.engine import Worker, WorkerSettings
from tickwheel.model import Callback, RetryPolicy, State, Timer
from tickwheel.stores import Store
from tickwheel.stores.redis import RedisStore
from tickwheel.testing.receiver import Received, Reply

# fixtures from the conftest files: a RedisServer and a Receiver factory
RedisServer = Any
MakeReceiver = Any

SECRET = "whsec_test_only"


@contextlib.asynccontextmanager
async def worker_running(
    store: Store, settings: WorkerSettings | None = None, **target: Any
) -> AsyncIterator[Worker]:
    http = HttpTarget(HttpSettings(allow_private_targets=True, **target))
    worker = Worker(store, http, settings or WorkerSettings(lookahead_ms=500, lease_ms=10_000))
    try:
        async with running(worker):
            yield worker
    finally:
        await http.close()


@pytest.fixture
async def redis_store(redis_server: RedisServer) -> AsyncIterator[RedisStore]:
    opened = RedisStore.from_url(redis_server.url, prefix=f"f{uuid.uuid4().hex[:10]}")
    yield opened
    await opened.close()


def callbacks(count: int, url: str, *, start_ms: int, spread_ms: int) -> list[Timer]:
    callback = Callback(url=url, body='{"hello": "world"}')
    # a short attempt timeout, so that a stalled callback is tried again within the test
    policy = RetryPolicy(timeout_s=1)
    return [
        Timer(due_ms=start_ms + i * spread_ms // count, callback=callback, retry=policy)
        for i in range(count)
    ]


async def all_arrived(receiver: Any, ids: set[str], timeout_s: float) -> None:
    """Wait until every timer in `ids` has arrived (duplicates count once), then a little more."""
    await until(lambda: ids <= {r.timer_id for r in receiver.received}, timeout_s, every_s=0.05)
    await asyncio.sleep(0.5)  # let late duplicates show


def never_early(received: list[Received]) -> None:
    early = [r for r in received if r.due_ms is None or r.at_ms < r.due_ms]
    assert not early, f"{len(early)} early, e.g. {early[:3]}"


@pytest.mark.latency  # its p99 bound on real time: the parallel part's load broke it
async def test_1000_signed_callbacks_over_2s_arrive_once_each_on_time(
    redis_store: RedisStore, make_receiver: MakeReceiver
) -> None:
    receiver = await make_receiver(signing_secret=SECRET)
    async with worker_running(redis_store, signing_secret=SECRET):
        # once a first callback has arrived, the worker runs: a start slowed by a busy machine
        # is no later callback's lateness
        (first,) = callbacks(1, f"{receiver.url}/first", start_ms=redis_store.now_ms(), spread_ms=0)
        await redis_store.add(first)
        await receiver.wait_for(1, timeout_s=20)
        added = await redis_store.add_many(
            callbacks(
                1000,
                f"{receiver.url}/hook",
                start_ms=redis_store.now_ms() + 300,
                spread_ms=2000,
            )
        )
        await receiver.wait_for(1001, timeout_s=20)
        await asyncio.sleep(0.2)  # no late duplicates
    received = [r for r in receiver.received if r.timer_id != first.id]
    got = Counter(r.timer_id for r in received)
    assert set(got) == {t.id for t in added}
    assert max(got.values()) == 1
    never_early(received)
    assert all(r.signature_ok for r in received)
    assert all(r.headers["idempotency-key"] for r in received)
    lateness = sorted(r.at_ms - r.due_ms for r in received if r.due_ms is not None)
    # on time, not to the ms (bench/engine.py measures that): a callback held back by a lapsed
    # lease or a retry would be a second or more late; a neighbouring `latency` test starting
    # its servers on the same two cores made p99 260-340 ms in CI
    assert lateness[len(lateness) * 99 // 100] < 500, lateness[-10:]


async def test_a_flapping_receiver_is_retried_and_a_refusing_one_dead_lettered(
    redis_store: RedisStore, make_receiver: MakeReceiver
) -> None:
    def respond(received: Received) -> Reply:
        if received.path == "/flaps":
            return Reply(500, body="busy") if (received.attempt or 0) <= 3 else Reply(200)
        if received.path == "/refuses":
            return Reply(400, body="no such hook")
        # /throttles answers 429 once, asking for 1 s
        return Reply(429, {"Retry-After": "1"}) if received.attempt == 1 else Reply(200)

    receiver = await make_receiver(respond=respond)
    policy = RetryPolicy(max_attempts=5, min_backoff_s=0.05, max_backoff_s=2, timeout_s=2)
    now = redis_store.now_ms()
    flaps, refuses, throttles = [
        await redis_store.add(
            Timer(due_ms=now, callback=Callback(url=receiver.url + path), retry=policy)
        )
        for path in ("/flaps", "/refuses", "/throttles")
    ]
    async with worker_running(redis_store):
        await receiver.wait_for(4 + 1 + 2, timeout_s=15)
        await asyncio.sleep(0.2)
    attempts: dict[str, list[Received]] = {}
    for received in receiver.received:
        attempts.setdefault(received.path, []).append(received)
    assert [r.attempt for r in attempts["/flaps"]] == [1, 2, 3, 4]
    assert [r.attempt for r in attempts["/refuses"]] == [1]
    throttled = attempts["/throttles"]
    assert throttled[1].at_ms - throttled[0].at_ms >= 1000  # Retry-After: 1
    for timer, state in ((flaps, State.DONE), (refuses, State.DEAD), (throttles, State.DONE)):
        stored = await redis_store.get(timer.id)
        assert stored is not None
        assert stored.state is state, timer.callback
    dead = await redis_store.get(refuses.id)
    assert dead is not None
    assert dead.last_error == "HTTP 400: no such hook"
    flapped = await redis_store.get(flaps.id)
    assert flapped is not None
    assert flapped.attempt == 4


async def test_kill_9_of_a_worker_with_5000_in_flight_loses_nothing(
    start_redis: Callable[..., RedisServer],
    worker_process: Callable[[str, int], subprocess.Popen[str]],
    make_receiver: MakeReceiver,
) -> None:
    server = start_redis()
    store = RedisStore.from_url(server.url)
    receiver = await make_receiver(keep=True)
    try:
        added = await store.add_many(
            callbacks(5000, f"{receiver.url}/t", start_ms=store.now_ms() + 400, spread_ms=1500)
        )
        first = worker_process(server.url, 4000)
        # kill it mid-run: some delivered, thousands claimed and held in its wheel
        await until(lambda: receiver.count >= 500, timeout_s=20, every_s=0.005)
        in_flight = (await store.stats()).counts.get(State.LEASED, 0)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
        delivered_by_first = receiver.count
        worker_process(server.url, 4000)
        await all_arrived(receiver, {t.id for t in added}, timeout_s=30)
        got = Counter(r.timer_id for r in receiver.received)
        assert set(got) == {t.id for t in added}, "a timer was lost"
        duplicates = sum(got.values()) - len(got)
        # only timers whose delivery the kill interrupted may arrive twice
        assert duplicates <= in_flight, (duplicates, in_flight, delivered_by_first)
        never_early(receiver.received)
        stats = await store.stats()
        assert stats.counts.get(State.DONE) == 5000
    finally:
        await store.close()


async def test_redis_down_for_5s_mid_run_loses_nothing(
    start_redis: Callable[..., RedisServer], make_receiver: MakeReceiver
) -> None:
    server = start_redis(appendonly=True)
    store = RedisStore.from_url(server.url, timeout_s=0.5)
    receiver = await make_receiver()
    try:
        added = await store.add_many(
            callbacks(1000, f"{receiver.url}/t", start_ms=store.now_ms() + 200, spread_ms=8000)
        )
        async with worker_running(store, WorkerSettings(lookahead_ms=500, lease_ms=4000)):
            await asyncio.sleep(2.0)
            before = receiver.count
            assert 0 < before < 1000
            await asyncio.to_thread(server.stop)
            await asyncio.sleep(5.0)
            await asyncio.to_thread(server.start)  # same port and dir: the AOF is replayed
            await all_arrived(receiver, {t.id for t in added}, timeout_s=30)
        got = Counter(r.timer_id for r in receiver.received)
        assert set(got) == {t.id for t in added}, "a timer was lost"
        never_early(receiver.received)
        counts = (await store.stats()).counts
        assert counts.get(State.DONE) == 1000, counts
    finally:
        await store.close()


async def test_logs_name_the_timer_and_never_a_secret(
    redis_store: RedisStore, make_receiver: MakeReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    receiver = await make_receiver(respond=lambda received: Reply(400, body="no such hook"))
    callback = Callback(url=f"{receiver.url}/x", headers={"Authorization": "Bearer hook-password"})
    timer = await redis_store.add(Timer(due_ms=redis_store.now_ms(), callback=callback))
    with caplog.at_level(logging.DEBUG, logger="tickwheel"):
        async with worker_running(redis_store, signing_secret=SECRET):
            await receiver.wait_for(1, timeout_s=10)
            await until(lambda: is_dead(redis_store, timer.id))
    dead_lettered = [r for r in caplog.records if getattr(r, "timer_id", None) == timer.id]
    assert dead_lettered, caplog.text
    assert f"timer={timer.id}" in dead_lettered[0].getMessage()
    assert "hook-password" not in caplog.text
    assert SECRET not in caplog.text


async def is_dead(store: Store, timer_id: str) -> bool:
    stored = await store.get(timer_id)
    return stored is not None and stored.state is State.DEAD


async def test_a_stop_during_a_redis_outage_ends_within_the_grace_and_loses_nothing(
    start_redis: Callable[..., RedisServer], make_receiver: MakeReceiver
) -> None:
    server = start_redis(appendonly=True)
    store = RedisStore.from_url(server.url, timeout_s=0.5)
    observer = RedisStore.from_url(server.url)  # the test's own reads keep the default timeout
    receiver = await make_receiver()
    try:
        added = await store.add_many(
            callbacks(50, f"{receiver.url}/t", start_ms=store.now_ms() + 2000, spread_ms=50)
        )
        held = WorkerSettings(lookahead_ms=3000, lease_ms=4000, grace_s=0.5)
        http = HttpTarget(HttpSettings(allow_private_targets=True))
        worker = Worker(store, http, held)
        task = asyncio.create_task(worker.run())
        await until(lambda: leased(observer, 50))
        await asyncio.to_thread(server.stop)
        began = asyncio.get_running_loop().time()
        worker.stop()
        await asyncio.wait_for(task, 5)
        await http.close()
        # one claim or wait timing out (0.5 s) and the grace for the hand-back (0.5 s)
        assert asyncio.get_running_loop().time() - began < 3
        await asyncio.to_thread(server.start)  # the AOF brings the leased timers back
        async with worker_running(store, WorkerSettings(lookahead_ms=500, lease_ms=4000)):
            await all_arrived(receiver, {t.id for t in added}, timeout_s=20)
        never_early(receiver.received)
    finally:
        await observer.close()
        await store.close()


async def leased(store: Store, count: int) -> bool:
    return (await store.stats()).counts.get(State.LEASED, 0) >= count
