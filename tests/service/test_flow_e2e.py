"""Flow control end to end with real ``tickwheel`` processes and a receiver on loopback.

A host limited to 50 callbacks a second, 500 timers due at once and two workers on one Redis
(``serve --no-worker`` and two ``worker``, one per queue, so both fire at once): no second
carries more than the rate plus the burst, all 500 arrive, none early. A paused queue with
timers due fires nothing, across a restart of its worker, and all of it once resumed.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest
import redis

from tickwheel.engine.controls import REFRESH_S
from tickwheel.engine.limiter import host_key
from tickwheel.stores import Store
from tickwheel.stores.base import Limit, QueueSettings
from tickwheel.stores.open import open_store
from tickwheel.testing.receiver import Receiver

from .e2e_helpers import Processes, processes

if TYPE_CHECKING:
    from conftest import RedisServer

pytestmark = pytest.mark.timeout(120)

RATE = 50
TIMERS = 500


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def rfc3339(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, UTC).isoformat(timespec="milliseconds")


@pytest.fixture
async def procs(tmp_path: Path) -> AsyncIterator[Processes]:
    async with processes(tmp_path) as started:
        yield started


def fresh_redis(server: RedisServer, db: int) -> str:
    with redis.Redis(port=server.port, db=db, socket_timeout=5) as client:
        client.flushdb()
    return f"{server.url}/{db}"


async def create(api: str, url: str, due_ms: int, queue: str, count: int) -> None:
    timers = [{"due": rfc3339(due_ms), "queue": queue, "callback": {"url": url}}] * count
    async with httpx.AsyncClient(base_url=api, timeout=30) as client:
        answer = await client.post("/v1/timers/batch", json={"timers": timers})
    assert answer.status_code == 200, answer.text
    assert all(result["status"] == 201 for result in answer.json()["results"]), answer.text


async def set_on(store_url: str, change: str, *args: object) -> None:
    """Change a setting the way the API's routes do: through the store the workers share."""
    store: Store = open_store(store_url)
    try:
        await getattr(store, change)(*args)
    finally:
        await store.close()


def most_in_one_second(times_ms: list[float]) -> int:
    times_ms = sorted(times_ms)
    most, first = 0, 0
    for last, at in enumerate(times_ms):
        while at - times_ms[first] >= 1000:
            first += 1
        most = max(most, last - first + 1)
    return most


async def test_a_host_limit_holds_across_two_redis_workers(
    redis_server: RedisServer, procs: Processes
) -> None:
    store = fresh_redis(redis_server, 12)
    api = await procs.start(
        "serve", "--port", "0", "--store", store, "--no-worker", "--allow-private-targets"
    )
    workers = [
        await procs.start("worker", "--store", store, "--allow-private-targets", "--queue", queue)
        for queue in ("a", "b")
    ]
    async with Receiver() as receiver:
        host = host_key(receiver.url)
        await set_on(store, "set_limit", host, Limit(rate=RATE))  # burst: one second's worth
        await asyncio.sleep(REFRESH_S + 0.5)  # every worker has read it
        due_ms = wall_ms() + 1500
        for queue in ("a", "b"):
            await create(api.url, receiver.url, due_ms, queue, TIMERS // 2)
        await receiver.wait_for(TIMERS, timeout_s=30)
        await asyncio.sleep(0.5)  # nothing more comes
        arrived = list(receiver.received)
    assert len(arrived) == TIMERS
    assert len({r.timer_id for r in arrived}) == TIMERS
    early = [r.timer_id for r in arrived if r.due_ms is None or r.at_ms < r.due_ms]
    assert not early, f"fired early: {early}"
    times = [r.at_ms for r in arrived]
    # one bucket for both workers: the rate plus the burst at most, in any second, as granted;
    # an arrival is its grant plus its delivery, which may put up to 100 ms of grants more
    # into a window on a loaded machine (two buckets would allow twice as many)
    assert most_in_one_second(times) <= 2 * RATE + RATE // 10
    span_s = (max(times) - due_ms) / 1000
    assert span_s >= (TIMERS - RATE) / RATE - 0.5, span_s  # two buckets would take half
    assert span_s <= (TIMERS - RATE) / RATE + 3, span_s
    for process in (api, *workers):
        assert await process.stop(signal.SIGTERM) == 0, process.stderr()


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
async def test_a_paused_queue_stays_paused_across_a_worker_restart_then_fires_all(
    backend: str, request: pytest.FixtureRequest, procs: Processes, tmp_path: Path
) -> None:
    if backend == "redis":
        store = fresh_redis(request.getfixturevalue("redis_server"), 13)
        serve = ["serve", "--port", "0", "--store", store, "--no-worker"]
        worker_args = ["worker", "--store", store, "--allow-private-targets"]
    else:  # the worker runs in the API's process: restarting it restarts both
        store = f"sqlite:///{tmp_path}/timers.db"
        serve = ["serve", "--port", "0", "--store", store]
        worker_args = []
    await set_on(store, "set_queue", "mail", QueueSettings(paused=True))
    api = await procs.start(*serve, "--allow-private-targets")
    worker = await procs.start(*worker_args) if worker_args else api
    async with Receiver() as receiver:
        due_ms = wall_ms() + 500
        await create(api.url, receiver.url, due_ms, "mail", 20)
        await create(api.url, receiver.url, due_ms, "default", 5)  # the worker is firing
        await receiver.wait_for(5, timeout_s=10)
        await asyncio.sleep(1.5)
        assert len(receiver.received) == 5
        async with httpx.AsyncClient(base_url=api.url, timeout=30) as client:
            scraped = (await client.get("/metrics")).text
        assert 'tickwheel_queue_paused{queue="mail"} 1.0' in scraped

        assert await worker.stop(signal.SIGTERM) == 0, worker.stderr()
        if worker_args:
            worker = await procs.start(*worker_args)
        else:
            serve[2] = api.url.rsplit(":", 1)[1]  # the same port again
            api = worker = await procs.start(*serve, "--allow-private-targets")
        await asyncio.sleep(REFRESH_S + 1.5)
        assert len(receiver.received) == 5, "a restarted worker fired a paused queue"

        resumed_ms = wall_ms()
        await set_on(store, "set_queue", "mail", QueueSettings())
        await receiver.wait_for(25, timeout_s=10)
        await asyncio.sleep(0.3)
        arrived = list(receiver.received)
    mail = arrived[5:]
    assert len(mail) == 20
    assert len({r.timer_id for r in mail}) == 20
    assert all(r.at_ms >= resumed_ms for r in mail)
    assert max(r.at_ms for r in mail) - resumed_ms <= (REFRESH_S + 1.5) * 1000
    for process in {id(p): p for p in (api, worker)}.values():
        assert await process.stop(signal.SIGTERM) == 0, process.stderr()
