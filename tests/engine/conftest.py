"""Engine fixtures: a real HTTP receiver on loopback (`receiver`, `make_receiver`) and a store
on each backend (`store`)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tickwheel.stores import MemoryStore, Store
from tickwheel.stores.redis import RedisStore
from tickwheel.stores.sqlite import SqliteStore
from tickwheel.testing.receiver import Receiver

MakeReceiver = Callable[..., Awaitable[Receiver]]


@pytest.fixture
async def make_receiver() -> AsyncIterator[MakeReceiver]:
    """Start receivers with `Receiver(**kwargs)`; all are stopped after the test."""
    started: list[Receiver] = []

    async def make(**kwargs: Any) -> Receiver:
        receiver = Receiver(**kwargs)
        await receiver.start()
        started.append(receiver)
        return receiver

    yield make
    for receiver in started:
        await receiver.stop()


@pytest.fixture
async def receiver(make_receiver: MakeReceiver) -> Receiver:
    """A started receiver on a free loopback port: no secret, always 200."""
    return await make_receiver()


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A store with a real clock on each backend; Redis on the session server, own prefix."""
    opened: Store
    if request.param == "memory":
        opened = MemoryStore()
    elif request.param == "sqlite":
        opened = SqliteStore(tmp_path / "timers.db")
    else:
        url = request.getfixturevalue("redis_server").url
        opened = RedisStore.from_url(url, prefix=f"e{uuid.uuid4().hex[:10]}")
    yield opened
    await opened.close()
