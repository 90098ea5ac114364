"""Fixtures for the HTTP API: an app over a memory or a temp-file SQLite store, and its client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tickwheel.service.api import create_app
from tickwheel.service.settings import ServiceSettings
from tickwheel.stores.base import Store
from tickwheel.stores.memory import MemoryStore
from tickwheel.stores.open import open_store

ClientFactory = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """Each API test runs once on a `MemoryStore` and once on a SQLite file."""
    opened = (
        MemoryStore() if request.param == "memory" else open_store(f"sqlite:///{tmp_path}/t.db")
    )
    try:
        yield opened
    finally:
        await opened.close()


@asynccontextmanager
async def serve(store: Store, **settings: Any) -> AsyncIterator[httpx.AsyncClient]:
    """Yield a client of a fresh app over `store` with `settings` (in process, no sockets)."""
    app = create_app(ServiceSettings(store_url="memory://", **settings), store)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        yield client


@pytest.fixture
def make_client(store: Store) -> ClientFactory:
    """Build a client of an app over the test's store with other settings (a token, say)."""
    return lambda **settings: serve(store, **settings)


@pytest.fixture
async def client(store: Store) -> AsyncIterator[httpx.AsyncClient]:
    """A client of an app with default settings over the test's store."""
    async with serve(store) as opened:
        yield opened
