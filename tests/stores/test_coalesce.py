"""Group commit: a lone call goes out at once; calls made meanwhile share the next batch, and
each caller gets its own result or error."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import redis.asyncio as aredis

from tickwheel.errors import InvalidTimer, TimerExists
from tickwheel.model import State, Timer
from tickwheel.stores.coalesce import Coalescer
from tickwheel.stores.redis import RedisStore
from tickwheel.stores.sqlite import SqliteStore

if TYPE_CHECKING:
    from conftest import RedisServer

CALLERS = 64


class Flushes:
    """A flush that records its batches and holds each until released."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.release = asyncio.Event()
        self.fail: Exception | None = None

    async def __call__(self, items: list[str]) -> Sequence[str | Exception]:
        self.batches.append(list(items))
        await self.release.wait()
        if self.fail is not None:
            raise self.fail
        return [TimerExists(item) if item.startswith("taken") else item.upper() for item in items]


async def test_a_lone_call_goes_out_at_once() -> None:
    flush = Flushes()
    flush.release.set()
    coalescer = Coalescer(flush, max_batch=100)
    assert await coalescer.submit("a") == "A"
    assert await coalescer.submit("b") == "B"
    assert flush.batches == [["a"], ["b"]]


async def test_calls_made_while_a_batch_is_in_flight_share_the_next() -> None:
    flush = Flushes()
    coalescer = Coalescer(flush, max_batch=100)
    first = asyncio.ensure_future(coalescer.submit("a"))
    await asyncio.sleep(0.01)
    rest = [asyncio.ensure_future(coalescer.submit(x)) for x in "bcd"]
    await asyncio.sleep(0.01)
    flush.release.set()
    assert await first == "A"
    assert await asyncio.gather(*rest) == ["B", "C", "D"]
    assert flush.batches == [["a"], ["b", "c", "d"]]


async def test_each_caller_gets_its_own_error() -> None:
    flush = Flushes()
    coalescer = Coalescer(flush, max_batch=100)
    calls = [asyncio.ensure_future(coalescer.submit(x)) for x in ("a", "taken-1", "c")]
    flush.release.set()
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert results[0] == "A"
    assert isinstance(results[1], TimerExists)
    assert results[2] == "C"


async def test_a_failed_batch_reaches_every_caller_in_it_and_the_next_batch_goes_on() -> None:
    flush = Flushes()
    flush.fail = ConnectionError("down")
    coalescer = Coalescer(flush, max_batch=100)
    calls = [asyncio.ensure_future(coalescer.submit(x)) for x in "ab"]
    flush.release.set()
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert all(isinstance(result, ConnectionError) for result in results)
    flush.fail = None
    assert await coalescer.submit("c") == "C"


async def test_batches_are_bounded_and_a_cancelled_caller_does_not_stop_the_rest() -> None:
    flush = Flushes()
    coalescer = Coalescer(flush, max_batch=2)
    calls = [asyncio.ensure_future(coalescer.submit(x)) for x in "abcde"]
    await asyncio.sleep(0)
    calls[1].cancel()
    flush.release.set()
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert [r for n, r in enumerate(results) if n != 1] == ["A", "C", "D", "E"]
    assert isinstance(results[1], asyncio.CancelledError)
    assert flush.batches == [["a"], ["b", "c"], ["d", "e"]]


async def test_concurrent_redis_adds_share_round_trips(redis_server: RedisServer) -> None:
    store = RedisStore.from_url(redis_server.url, prefix=f"c{uuid.uuid4().hex[:10]}")
    admin = aredis.Redis.from_url(redis_server.url)
    try:
        due = store.now_ms() + 60_000
        await store.add(Timer(id="taken", due_ms=due, payload=1))
        before = (await admin.info("commandstats")).get("cmdstat_evalsha", {}).get("calls", 0)
        timers = [Timer(id=f"t{n}", due_ms=due, payload=n) for n in range(CALLERS)]
        timers.append(Timer(id="taken", due_ms=due, payload=2))
        results = await asyncio.gather(*map(store.add, timers), return_exceptions=True)
        after = (await admin.info("commandstats"))["cmdstat_evalsha"]["calls"]
        assert [getattr(r, "id", None) for r in results[:-1]] == [t.id for t in timers[:-1]]
        assert isinstance(results[-1], TimerExists)  # its caller's own error, nobody else's
        # a script call per shard and batch, not one per caller
        assert after - before < CALLERS / 2
        for timer in timers[:-1]:
            assert await store.get(timer.id) is not None
    finally:
        await admin.aclose()
        await store.close()


async def test_concurrent_sqlite_adds_each_get_their_own_answer(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "t.db")
    try:
        due = store.now_ms() + 60_000
        await store.add(Timer(id="taken", due_ms=due, payload=1))
        timers = [Timer(id=f"t{n}", due_ms=due, payload=n) for n in range(CALLERS)]
        timers.append(Timer(id="taken", due_ms=due, payload=2))
        timers.append(Timer(id="t0", due_ms=due, payload=0))  # the same again: idempotent
        far = Timer(id="far", due_ms=due + 20 * 365 * 86_400_000, payload=3)
        results = await asyncio.gather(*map(store.add, [*timers, far]), return_exceptions=True)
        assert [getattr(r, "id", None) for r in results[:CALLERS]] == [
            t.id for t in timers[:CALLERS]
        ]
        assert isinstance(results[CALLERS], TimerExists)
        assert getattr(results[CALLERS + 1], "id", None) == "t0"
        assert isinstance(results[-1], InvalidTimer)  # past the horizon: its own error
        assert (await store.stats()).counts[State.SCHEDULED] == CALLERS + 1
    finally:
        await store.close()
