"""`Controls` reads the store's settings tables only when their versions moved (issue 23: with
20,000 host limits every worker read every limit each second), and still sees every change
within a refresh."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tickwheel.engine.controls import Controls
from tickwheel.engine.metrics import Metrics
from tickwheel.stores import MemoryStore, Store
from tickwheel.stores.base import Limit, QueueSettings
from tickwheel.stores.redis import RedisStore
from tickwheel.stores.sqlite import SqliteStore

HOSTS = 2_000


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    opened: Store
    if request.param == "memory":
        opened = MemoryStore()
    elif request.param == "sqlite":
        opened = SqliteStore(tmp_path / "timers.db")
    else:
        server: Any = request.getfixturevalue("redis_server")  # tests/conftest.py
        opened = RedisStore.from_url(server.url, prefix=f"t{uuid.uuid4().hex[:12]}")
    try:
        yield opened
    finally:
        await opened.close()


async def test_an_idle_worker_reads_many_limits_once_then_only_their_versions(
    store: Store,
) -> None:
    for n in range(HOSTS):
        await store.set_limit(f"h{n}.example", Limit(rate=10))
    controls = Controls(store, Metrics())
    await controls.refresh()
    assert len(controls.hosts) == HOSTS
    assert controls.reads == 2
    for _ in range(5):
        await controls.refresh()
    assert controls.reads == 2  # nothing changed: no table read again

    await store.set_limit("h0.example", Limit(rate=1))
    await controls.refresh()
    assert controls.reads == 3  # the limits alone
    assert controls.hosts["h0.example"] == Limit(rate=1)

    await store.pause_queue("q", True)
    await controls.refresh()
    assert controls.reads == 4  # the queue settings alone
    assert controls.paused("q")
    await store.delete_limit("h1.example")
    await store.set_queue("q", QueueSettings())
    await controls.refresh()
    assert controls.reads == 6
    assert not controls.paused("q")
    assert "h1.example" not in controls.hosts


async def test_both_tables_are_read_whole_every_full_read_s(store: Store) -> None:
    await store.set_limit("api.example.com", Limit(rate=5))
    controls = Controls(store, Metrics(), full_read_s=0)
    for _ in range(3):
        await controls.refresh()
    assert controls.reads == 6
    assert controls.hosts == {"api.example.com": Limit(rate=5)}
