"""Store fixtures: every contract test runs unchanged against each backend."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from tickwheel.stores import MemoryStore, Store, StoreSettings
from tickwheel.stores.postgres import PostgresStore
from tickwheel.stores.redis import RedisStore
from tickwheel.stores.sqlite import SqliteStore

START_MS = 1_700_000_000_000


class ManualClock:
    """Epoch milliseconds that move only when a test says so."""

    def __init__(self, now_ms: int = START_MS) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> None:
        self.now_ms += ms


StoreFactory = Callable[[ManualClock, StoreSettings], Store]
# a backend gets the test's fixture request to reach what it needs (tmp_path, a server)
Backend = Callable[[pytest.FixtureRequest], StoreFactory]


def _memory(request: pytest.FixtureRequest) -> StoreFactory:
    return lambda clock, settings: MemoryStore(settings, clock=clock)


def _sqlite(request: pytest.FixtureRequest) -> StoreFactory:
    tmp_path: Path = request.getfixturevalue("tmp_path")
    return lambda clock, settings: SqliteStore(tmp_path / "timers.db", settings, clock=clock)


def _redis(server_fixture: str) -> Backend:
    """Stores on the session server that `server_fixture` (tests/conftest.py) starts."""

    def backend(request: pytest.FixtureRequest) -> StoreFactory:
        url = request.getfixturevalue(server_fixture).url
        prefix = f"t{uuid.uuid4().hex[:12]}"  # a clean keyspace for each test, no FLUSHALL
        return lambda clock, settings: RedisStore.from_url(
            url, settings, prefix=prefix, clock=clock
        )

    return backend


def _postgres(request: pytest.FixtureRequest) -> StoreFactory:
    """Stores on the session's PostgreSQL, each test in a schema of its own."""
    url = request.getfixturevalue("postgres_server").url
    schema = f"t{uuid.uuid4().hex[:12]}"
    return lambda clock, settings: PostgresStore(url, settings, schema=schema, clock=clock)


BACKENDS: dict[str, Backend] = {
    "memory": _memory,
    "sqlite": _sqlite,
    "redis": _redis("redis_server"),
    "redis-cluster": _redis("redis_cluster"),
    "postgres": _postgres,
}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def settings() -> StoreSettings:
    return StoreSettings(retention_ms=60_000)


@pytest.fixture(params=sorted(BACKENDS))
def make_store(request: pytest.FixtureRequest) -> StoreFactory:
    return BACKENDS[request.param](request)


@pytest.fixture
async def store(
    make_store: StoreFactory, clock: ManualClock, settings: StoreSettings
) -> AsyncIterator[Store]:
    opened = make_store(clock, settings)
    try:
        yield opened
    finally:
        await opened.close()
