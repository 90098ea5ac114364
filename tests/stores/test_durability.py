"""``durability=replicated``: a create or change answers only once a replica holds it.

Real processes: a master and a replica started with ``--replicaof``, and a Cluster of three
masters with a replica each. With the replica stopped (or frozen, still connected) a write
raises `StoreUnavailable` within its ``wait_ms`` and a margin; the default store answers.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from tickwheel.errors import InvalidArgument, StoreUnavailable
from tickwheel.model import Timer
from tickwheel.schedule import Schedule
from tickwheel.stores import open_store
from tickwheel.stores.redis import RedisStore
from tickwheel.stores.redis.durability import MAX_WAIT_MS, PARAMS, Replicated

if TYPE_CHECKING:
    from conftest import RedisServer

MARGIN_S = 1.0  # beyond wait_ms, for a loaded machine


@pytest.fixture
def pair(start_redis: Callable[..., RedisServer]) -> Iterator[tuple[RedisServer, RedisServer]]:
    """A master and one replica of it, the replica in sync."""
    master = start_redis(options=["--repl-diskless-sync-delay", "0"])  # sync at once
    replica = start_redis(options=["--replicaof", "127.0.0.1", str(master.port)])
    deadline = time.monotonic() + 10
    with master.client() as client:
        # online as the master sees it: WAIT counts only online replicas
        while client.info("replication").get("slave0", {}).get("state") != "online":
            assert time.monotonic() < deadline, "the replica did not sync"
            time.sleep(0.05)
        client.set("warm", 1)  # its first acknowledgement can be slow on a busy machine
        assert client.wait(1, 5_000) == 1
    yield master, replica
    if replica.pid is not None:
        os.kill(replica.pid, signal.SIGCONT)  # a frozen replica would not stop on SIGTERM


def replicated(server: RedisServer, wait_ms: int = 1_000) -> RedisStore:
    store = open_store(
        f"{server.url}?prefix=d{uuid.uuid4().hex[:10]}&durability=replicated&wait_ms={wait_ms}"
    )
    assert isinstance(store, RedisStore)
    return store


DUE_MS = int(time.time() * 1000) + 3_600_000  # one due time: a retried add has the same spec


def timer(n: int, **fields: Any) -> Timer:
    return Timer(id=f"t{n}", due_ms=DUE_MS, payload={"n": n}, **fields)


def record_on(server: RedisServer, store: RedisStore, timer_id: str) -> str | None:
    """The record of `timer_id` as `server` holds it (None: absent)."""
    keys = store.shard_keys(store._shards.of(timer_id))
    with server.client() as client:
        value: str | None = client.hget(keys.fixed[0], timer_id)
    return value


async def test_every_create_and_change_is_on_the_replica_when_it_answers(
    pair: tuple[RedisServer, RedisServer],
) -> None:
    master, replica = pair
    store = replicated(master)
    try:
        await store.add(timer(0))
        assert record_on(replica, store, "t0") is not None
        await store.add_many([timer(n) for n in range(1, 1001)])
        assert all(record_on(replica, store, f"t{n}") for n in (1, 500, 1000))
        # concurrent adds: coalesced into batches, some through the lane, some through the pool
        await asyncio.gather(*(store.add(timer(n)) for n in range(1001, 1101)))
        assert all(record_on(replica, store, f"t{n}") for n in range(1001, 1101))
        for call, timer_id in [
            (store.add(timer(0, queue="other"), replace=True), "t0"),
            (store.reschedule("t1", int(time.time() * 1000) + 90_000), "t1"),
            (store.pause("t2"), "t2"),
        ]:
            await call
            assert record_on(replica, store, timer_id) == record_on(master, store, timer_id)
        assert await store.resume("t2")
        assert record_on(replica, store, "t2") == record_on(master, store, "t2")
        assert await store.cancel("t3")
        assert record_on(replica, store, "t3") == record_on(master, store, "t3")
        state = await store.add_schedule(
            Schedule(id="s1", every_s=10, start_ms=int(time.time() * 1000), payload={})
        )
        tag = store.shard_keys(store._shards.of(state.schedule.id)).tag
        with replica.client() as client:
            assert client.hexists(f"{tag}:s", "s1")
        # a worker's calls do not wait, and work as on any store
        leases = await store.claim("default", DUE_MS, 5, 30_000)
        assert len(leases) == 5
        assert await store.ack_many(leases) == [True] * 5
    finally:
        await store.close()


@pytest.mark.parametrize("fault", ["stopped", "frozen"])
async def test_without_a_replica_a_write_raises_within_wait_ms(
    pair: tuple[RedisServer, RedisServer], fault: str
) -> None:
    master, replica = pair
    store = replicated(master, wait_ms=300)
    default = open_store(f"{master.url}?prefix=d{uuid.uuid4().hex[:10]}")
    try:
        await store.add(timer(0))
        if fault == "stopped":
            replica.stop()
        else:  # connected, never acknowledging
            os.kill(replica.pid or 0, signal.SIGSTOP)
        await default.add(timer(1))  # the default store does not wait
        for call in [
            lambda: store.add(timer(1)),
            lambda: store.add_many([timer(n) for n in range(2, 50)]),
            lambda: store.reschedule("t0", int(time.time() * 1000) + 90_000),
        ]:
            started = time.monotonic()
            with pytest.raises(StoreUnavailable, match="no replica acknowledged"):
                await call()
            assert 0.29 < time.monotonic() - started < 0.3 + MARGIN_S
        # concurrent callers: the lane carries one, the pool the others; each one waits
        results = await asyncio.gather(
            *(store.add(timer(n)) for n in range(100, 110)), return_exceptions=True
        )
        assert all(isinstance(result, StoreUnavailable) for result in results)
        assert record_on(master, store, "t1") is not None  # stored on the master all the same
        if fault == "frozen":
            os.kill(replica.pid or 0, signal.SIGCONT)
            assert (await store.add(timer(200))).id == "t200"
            assert record_on(replica, store, "t200") is not None
    finally:
        await store.close()
        await default.close()


async def test_a_retry_that_writes_nothing_still_waits_for_the_first_attempt(
    pair: tuple[RedisServer, RedisServer],
) -> None:
    master, replica = pair
    first = replicated(master, wait_ms=300)
    retrying = open_store(f"{master.url}?prefix={first.prefix}&durability=replicated&wait_ms=300")
    try:
        # its connection opened, its scripts loaded, never written on: the replica has
        # acknowledged (its once-a-second ACK) all that connection ever made
        assert await retrying.get("t1") is None
        await asyncio.sleep(1.2)
        os.kill(replica.pid or 0, signal.SIGSTOP)
        with pytest.raises(StoreUnavailable):
            await first.add(timer(1))
        # t1 is stored on the master: the retry finds it and writes nothing, yet t1 is not on
        # the replica, so the retry must not answer that it is
        with pytest.raises(StoreUnavailable, match="no replica acknowledged"):
            await retrying.add(timer(1))
        os.kill(replica.pid or 0, signal.SIGCONT)
        assert (await retrying.add(timer(1))).id == "t1"
        assert record_on(replica, first, "t1") is not None
    finally:
        await first.close()
        await retrying.close()


async def test_a_cluster_write_waits_on_the_node_that_took_it(
    start_redis_cluster: Callable[..., Any],
) -> None:
    cluster = start_redis_cluster(replicas=1)
    url = f"{cluster.url}?prefix=d{uuid.uuid4().hex[:10]}&durability=replicated&wait_ms=1000"
    store, retrying = open_store(url), open_store(url)
    assert isinstance(store, RedisStore)
    try:
        await store.add_many([timer(n) for n in range(200)])
        await store.add(timer(200))
        await asyncio.gather(*(store.reschedule(f"t{n}", timer(n).due_ms + 5) for n in range(20)))
        # writes on every node, acknowledged: what a retry's connections last wrote
        await retrying.add_many([timer(n) for n in range(300, 400)])
        replicas = [node for node in cluster.nodes if node.client().info()["role"] == "slave"]
        assert len(replicas) == 3
        for node in replicas:
            os.kill(node.pid or 0, signal.SIGSTOP)
        try:
            started = time.monotonic()
            with pytest.raises(StoreUnavailable, match="no replica acknowledged"):
                await store.add(timer(201))
            assert 0.99 < time.monotonic() - started < 1.0 + MARGIN_S
            # the retry finds t201 and writes nothing: it must still wait for t201's write
            with pytest.raises(StoreUnavailable, match="no replica acknowledged"):
                await retrying.add(timer(201))
        finally:
            for node in replicas:
                os.kill(node.pid or 0, signal.SIGCONT)
        assert (await retrying.add(timer(201))).id == "t201"
    finally:
        await store.close()
        await retrying.close()


@pytest.mark.parametrize(
    ("query", "argument"),
    [
        ("durability=fast", "durability"),
        ("durability=", "durability"),
        ("durability=REPLICATED", "durability"),
        ("durability=replicated&durability=replicated", "durability"),
        ("durability=replicated&wait_ms=0", "wait_ms"),
        ("durability=replicated&wait_ms=-1", "wait_ms"),
        (f"durability=replicated&wait_ms={MAX_WAIT_MS + 1}", "wait_ms"),
        ("durability=replicated&wait_ms=99999999999999999999", "wait_ms"),
        ("durability=replicated&wait_ms=1e3", "wait_ms"),
        ("durability=replicated&wait_ms=", "wait_ms"),
        ("durability=replicated&wait_ms=1&wait_ms=2", "wait_ms"),
        ("wait_ms=100", "wait_ms"),
    ],
)
def test_a_bad_durability_option_is_refused_naming_it(query: str, argument: str) -> None:
    for url in (f"redis://127.0.0.1:1/0?{query}", f"redis+cluster://127.0.0.1:1?{query}"):
        with pytest.raises(InvalidArgument) as caught:
            open_store(url)
        assert caught.value.argument == argument
        with pytest.raises(InvalidArgument) as caught:
            RedisStore.from_url(url)
        assert caught.value.argument == argument


@pytest.mark.parametrize("url", ["memory://", "sqlite:///{dir}/t.db"])
@pytest.mark.parametrize("query", ["durability=replicated", "wait_ms=100"])
def test_a_store_without_replicas_refuses_the_option(url: str, query: str, tmp_path: Any) -> None:
    with pytest.raises(InvalidArgument, match="only a Redis store") as caught:
        open_store(f"{url.format(dir=tmp_path)}?{query}")
    assert caught.value.argument == query.partition("=")[0]
    assert not list(tmp_path.iterdir())  # no file made under a name holding the query


async def test_wait_ms_is_bounded_in_code_too() -> None:
    for wait_ms in (0, MAX_WAIT_MS + 1, True):
        with pytest.raises(InvalidArgument, match="wait_ms"):
            Replicated(wait_ms)
    store = RedisStore.from_url("redis://127.0.0.1:1/0?durability=replicated")
    assert store.durability == Replicated(1_000)
    await store.close()


def test_open_store_knows_the_same_parameters_as_the_redis_store() -> None:
    from tickwheel.stores import open as opening

    assert opening._DURABILITY_PARAMS == PARAMS
