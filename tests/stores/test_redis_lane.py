"""The Redis store's lane: its own connection for one caller at a time, beside the pool.

What must hold: every caller gets its own reply (never another call's), whether the lane or the
pool carried its call, after a call cancelled midway, after an error reply, and after the
server dropped the connection or forgot the scripts.
"""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from typing import Any

import pytest

from tickwheel.errors import StoreUnavailable
from tickwheel.model import Timer
from tickwheel.stores.redis import RedisStore
from tickwheel.stores.redis.scripts import Scripts

from .conftest import ManualClock


def open_store(url: str, clock: ManualClock, **options: Any) -> RedisStore:
    return RedisStore.from_url(url, prefix=f"t{uuid.uuid4().hex[:12]}", clock=clock, **options)


def timer(clock: ManualClock, n: int) -> Timer:
    return Timer(id=f"t{n}", due_ms=clock.now_ms + 1000 + n, payload={"n": n})


async def test_concurrent_callers_each_get_their_own_reply(
    redis_server: Any, clock: ManualClock
) -> None:
    store = open_store(redis_server.url, clock)
    try:
        added = await asyncio.gather(*(store.add(timer(clock, n)) for n in range(200)))
        assert [t.id for t in added] == [f"t{n}" for n in range(200)]
        got = await asyncio.gather(*(store.get(f"t{n}") for n in range(200)))
        assert [t.payload if t else None for t in got] == [{"n": n} for n in range(200)]
    finally:
        await store.close()


async def test_a_call_cancelled_midway_leaves_no_reply_for_the_next(
    start_redis: Any, clock: ManualClock
) -> None:
    server = start_redis()
    store = open_store(server.url, clock)
    try:
        await store.add(timer(clock, 0))
        os.kill(server.pid, signal.SIGSTOP)
        try:
            pending = asyncio.ensure_future(store.get("t0"))
            await asyncio.sleep(0.1)  # the call is written, its reply not read
            pending.cancel()
            with pytest.raises(asyncio.CancelledError):
                await pending
        finally:
            os.kill(server.pid, signal.SIGCONT)
        # the cancelled call's reply must not be taken for this one's
        assert await store.get("t1") is None
        again = await store.get("t0")
        assert again is not None
        assert again.payload == {"n": 0}
    finally:
        await store.close()


async def test_a_hung_server_times_the_lane_out_then_it_recovers(
    start_redis: Any, clock: ManualClock
) -> None:
    server = start_redis()
    store = open_store(server.url, clock, timeout_s=0.3)
    try:
        await store.add(timer(clock, 0))
        os.kill(server.pid, signal.SIGSTOP)
        try:
            with pytest.raises(StoreUnavailable):
                await store.get("t0")
        finally:
            os.kill(server.pid, signal.SIGCONT)
        got = await store.get("t0")
        assert got is not None
        assert got.id == "t0"
    finally:
        await store.close()


async def test_an_error_reply_reaches_its_caller_and_the_lane_goes_on(
    redis_server: Any, clock: ManualClock
) -> None:
    store = open_store(redis_server.url, clock)
    try:
        await store.add(timer(clock, 0))
        records = store.shard_keys(store._shards.of("t1")).fixed[0]
        await store.client.set(records, "not a hash")  # the shard's record hash, broken
        with pytest.raises(StoreUnavailable, match="WRONGTYPE"):
            await store.add(timer(clock, 1))
        await store.client.delete(records)
        assert (await store.add(timer(clock, 1))).id == "t1"
    finally:
        await store.close()


async def test_scripts_flushed_on_the_server_are_loaded_again(
    redis_server: Any, clock: ManualClock
) -> None:
    store = open_store(redis_server.url, clock)
    try:
        await store.add(timer(clock, 0))
        await store.client.script_flush()
        assert (await store.add(timer(clock, 1))).id == "t1"
        assert [t.id for t in await store.add_many([timer(clock, 2), timer(clock, 3)])] == [
            "t2",
            "t3",
        ]
    finally:
        await store.close()


async def test_the_cluster_client_has_no_lane(redis_cluster: Any, clock: ManualClock) -> None:
    store = open_store(redis_cluster.url, clock)
    try:
        assert Scripts(store.client)._lane is None
        assert (await store.add(timer(clock, 0))).id == "t0"
    finally:
        await store.close()
