"""``durability=replicated`` without a replica: a write that was stored says so, by its own error.

Before, a create answered 503 with ``Retry-After`` although the timer was stored: a client
retrying without an id made a second timer. Now the store raises `NotReplicated` naming the
ids written, the API answers 507 ``not_replicated`` with them, and ``serve`` says at start when
the master has no replica. Real redis-servers: a master alone, and a master with a replica.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from cli.cli_support import Service
from service.conftest import serve
from stores.test_durability import pair, replicated

from tickwheel.errors import NotReplicated, StoreUnavailable
from tickwheel.model import Timer
from tickwheel.schedule import Schedule
from tickwheel.stores import open_store
from tickwheel.stores.redis import RedisStore

if TYPE_CHECKING:
    from conftest import RedisServer

__all__ = ["pair"]  # a fixture, used by name

pytestmark = pytest.mark.timeout(120)

WAIT_MS = 200
DUE_IN_S = 3600


@pytest.fixture
def alone(start_redis: Callable[..., RedisServer]) -> RedisServer:
    """A master with no replica."""
    return start_redis()


async def test_a_create_answers_507_naming_the_timer_it_stored(alone: RedisServer) -> None:
    store = replicated(alone, wait_ms=WAIT_MS)
    try:
        async with serve(store) as client:
            body = {"delay": DUE_IN_S, "callback": {"url": "https://example.com/hook"}}
            response = await client.post("/v1/timers", json=body)
            assert response.status_code == 507, response.text
            assert "retry-after" not in response.headers  # not an invitation to send it again
            answer = response.json()
            assert answer["error"]["code"] == "not_replicated"
            [timer_id] = answer["ids"]
            assert timer_id in answer["error"]["message"]
            found = await client.get(f"/v1/timers/{timer_id}")
            assert found.status_code == 200, found.text  # it exists: no need to create it again
            assert found.json()["state"] == "scheduled"

            # a batch: each item carries its stored timer beside the error
            batch = {"timers": [body, {**body, "id": "given-1"}]}
            response = await client.post("/v1/timers/batch", json=batch)
            assert response.status_code == 200, response.text
            results = response.json()["results"]
            assert [r["status"] for r in results] == [507, 507]
            assert [r["error"]["code"] for r in results] == ["not_replicated"] * 2
            assert results[1]["timer"]["id"] == "given-1"
            for result in results:
                stored = await client.get(f"/v1/timers/{result['timer']['id']}")
                assert stored.status_code == 200

            # a change is stored too, and named
            response = await client.delete("/v1/timers/given-1")
            assert response.status_code == 507, response.text
            assert response.json()["ids"] == ["given-1"]
    finally:
        await store.close()


async def test_the_store_names_only_the_callers_own_writes(alone: RedisServer) -> None:
    store = replicated(alone, wait_ms=WAIT_MS)
    due_ms = store.now_ms() + DUE_IN_S * 1000
    try:
        with pytest.raises(NotReplicated) as raised:
            await store.add(Timer(id="one", due_ms=due_ms))
        assert raised.value.ids == ("one",)
        assert isinstance(raised.value, StoreUnavailable)  # code that retries by id still does
        # concurrent adds share a round trip; each caller hears of its own timer only
        results = await asyncio.gather(
            *(store.add(Timer(id=f"c{n}", due_ms=due_ms)) for n in range(8)),
            return_exceptions=True,
        )
        assert [getattr(r, "ids", None) for r in results] == [(f"c{n}",) for n in range(8)]
        with pytest.raises(NotReplicated) as raised:
            await store.add_many([Timer(id="a", due_ms=due_ms), Timer(id="b", due_ms=due_ms)])
        assert raised.value.ids == ("a", "b")
        with pytest.raises(NotReplicated) as raised:
            await store.cancel("one")
        assert raised.value.ids == ("one",)
        schedule = Schedule(id="sched-1", every_s=60, start_ms=due_ms, payload={})
        with pytest.raises(NotReplicated) as raised:
            await store.add_schedule(schedule)
        assert raised.value.ids == ("sched-1",)
        assert await store.get("a") is not None
        assert await store.replicas() == 0
    finally:
        await store.close()


async def test_a_master_with_a_replica_counts_it(pair: tuple[RedisServer, RedisServer]) -> None:
    store = replicated(pair[0])
    try:
        assert await store.replicas() == 1
    finally:
        await store.close()


def _serve(tmp_path: Path, server: RedisServer) -> Service:
    url = f"{server.url}?prefix=s{uuid.uuid4().hex[:8]}&durability=replicated&wait_ms={WAIT_MS}"
    return Service(tmp_path, "--store", url, "--no-worker")


def test_serve_warns_at_start_when_the_master_has_no_replica(
    tmp_path: Path, alone: RedisServer
) -> None:
    service = _serve(tmp_path, alone)
    try:
        assert "has no replica" in service.stderr()
        assert "507 not_replicated" in service.stderr()
    finally:
        service.stop()


def test_serve_says_nothing_alarming_with_a_replica(
    tmp_path: Path, pair: tuple[RedisServer, RedisServer]
) -> None:
    service = _serve(tmp_path, pair[0])
    try:
        assert "no replica" not in service.stderr()
        assert "durability=replicated: 1 replica(s) connected" in service.stderr()
    finally:
        service.stop()


@pytest.mark.parametrize("replicas", [0, 1])
async def test_a_cluster_counts_the_fewest_replicas_of_any_master(
    start_redis_cluster: Callable[..., Any], replicas: int
) -> None:
    cluster = start_redis_cluster(replicas=replicas)
    store = open_store(f"{cluster.url}?prefix=r{uuid.uuid4().hex[:8]}&durability=replicated")
    assert isinstance(store, RedisStore)
    try:
        assert await store.replicas() == replicas
    finally:
        await store.close()
