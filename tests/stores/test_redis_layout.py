"""A Redis prefix's shard count is recorded by the first store and taken by every other
(`stores/redis/layout.py`): timers written in one count are never looked for in another."""

from __future__ import annotations

import subprocess
import sys
import uuid
from typing import Any

import pytest

from tickwheel.errors import InvalidArgument
from tickwheel.model import Timer
from tickwheel.stores.open import open_store
from tickwheel.stores.redis import RedisStore
from tickwheel.stores.redis.keys import layout_key


def new_prefix() -> str:
    return f"t{uuid.uuid4().hex[:12]}"


async def add_some(store: RedisStore, count: int = 24) -> list[str]:
    ids = [f"t{n}" for n in range(count)]
    await store.add_many([Timer(id=i, due_ms=store.now_ms()) for i in ids])
    return ids


async def claimed_ids(store: RedisStore) -> set[str]:
    leases = await store.claim("default", store.now_ms(), 1000, 5000)
    return {lease.timer.id for lease in leases}


async def test_a_new_prefix_on_a_standalone_server_is_one_shard_and_recorded(
    redis_server: Any,
) -> None:
    prefix = new_prefix()
    store = open_store(f"{redis_server.url}/0?prefix={prefix}")
    assert isinstance(store, RedisStore)
    try:
        await add_some(store)
        assert store.shards == 1
        assert redis_server.client().get(layout_key(prefix)) == "1"
        assert redis_server.client().keys(f"{{{prefix}:*}}:r") == [f"{{{prefix}:0}}:r"]
    finally:
        await store.close()


async def test_the_count_is_unknown_until_a_call_reads_it(redis_server: Any) -> None:
    store = RedisStore.from_url(redis_server.url, prefix=new_prefix())
    try:
        with pytest.raises(RuntimeError, match="first call"):
            _ = store.shards
        await store.sync_clock()
        assert store.shards == 1
    finally:
        await store.close()


async def test_a_one_shard_prefix_whose_record_was_deleted_is_read_as_one_again(
    redis_server: Any,
) -> None:
    prefix = new_prefix()
    first = RedisStore.from_url(redis_server.url, prefix=prefix)
    try:
        ids = await add_some(first)
    finally:
        await first.close()
    redis_server.client().delete(layout_key(prefix))
    store = RedisStore.from_url(redis_server.url, prefix=prefix)
    try:
        assert set(ids) == await claimed_ids(store)
        assert store.shards == 1
    finally:
        await store.close()


async def test_a_new_prefix_on_a_cluster_is_sixteen_shards(redis_cluster: Any) -> None:
    store = RedisStore.from_url(redis_cluster.url, prefix=new_prefix())
    try:
        await add_some(store)
        assert store.shards == 16
    finally:
        await store.close()


async def test_a_store_without_a_count_takes_the_recorded_one(redis_server: Any) -> None:
    prefix = new_prefix()
    first = RedisStore.from_url(redis_server.url, prefix=prefix, shards=4)
    later = RedisStore.from_url(redis_server.url, prefix=prefix)
    try:
        ids = await add_some(first)
        assert set(ids) == await claimed_ids(later)
        assert later.shards == 4
        assert (await later.get("t7")) is not None
    finally:
        await first.close()
        await later.close()


async def test_another_count_than_the_recorded_one_is_refused_before_anything_is_written(
    redis_server: Any,
) -> None:
    prefix = new_prefix()
    first = RedisStore.from_url(redis_server.url, prefix=prefix)
    other = RedisStore.from_url(redis_server.url, prefix=prefix, shards=16)
    try:
        await add_some(first, 3)
        keys_before = set(redis_server.client().keys(f"*{prefix}*"))
        with pytest.raises(InvalidArgument, match=r"holds timers in 1 shards.*\?shards=1"):
            await other.add(Timer(id="stray", due_ms=other.now_ms()))
        with pytest.raises(InvalidArgument):
            await other.sync_clock()  # what a worker calls first: it does not start
        assert set(redis_server.client().keys(f"*{prefix}*")) == keys_before
    finally:
        await first.close()
        await other.close()


async def test_a_prefix_written_before_counts_were_recorded_is_read_as_sixteen_shards(
    redis_server: Any,
) -> None:
    prefix = new_prefix()
    old = RedisStore.from_url(redis_server.url, prefix=prefix, shards=16)
    try:
        ids = await add_some(old)
    finally:
        await old.close()
    redis_server.client().delete(layout_key(prefix))  # as the earlier layout left it
    store = RedisStore.from_url(redis_server.url, prefix=prefix)
    try:
        assert set(ids) == await claimed_ids(store)
        assert store.shards == 16
        assert redis_server.client().get(layout_key(prefix)) == "16"
    finally:
        await store.close()


async def test_a_garbled_record_is_refused_with_its_key(redis_server: Any) -> None:
    prefix = new_prefix()
    redis_server.client().set(layout_key(prefix), "many")
    store = RedisStore.from_url(redis_server.url, prefix=prefix)
    try:
        with pytest.raises(InvalidArgument, match=f"{prefix}:layout holds b'many'"):
            await store.stats()
    finally:
        await store.close()


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_a_process_asking_another_count_stops_at_start_with_one_message(
    redis_server: Any, command: str
) -> None:
    prefix = new_prefix()
    redis_server.client().set(layout_key(prefix), "1")  # as a first store on it records
    url = f"{redis_server.url}/0?prefix={prefix}&shards=16"
    args = ["--port", "0"] if command == "serve" else []
    ran = subprocess.run(
        [sys.executable, "-m", "tickwheel", command, "--store", url, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 2
    assert "serving" not in ran.stdout
    assert "Traceback" not in ran.stderr, ran.stderr
    assert f"prefix {prefix!r} holds timers in 1 shards" in ran.stderr
