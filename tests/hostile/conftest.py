"""Fixtures for the hostile-input tests: an app over a `MemoryStore`, and its client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx
import pytest

from tickwheel.service.api import create_app
from tickwheel.service.settings import ServiceSettings
from tickwheel.stores.memory import MemoryStore

ClientFactory = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]


@pytest.fixture
async def store() -> AsyncIterator[MemoryStore]:
    """The app's store: input validation happens before any store sees a timer."""
    opened = MemoryStore()
    try:
        yield opened
    finally:
        await opened.close()


@asynccontextmanager
async def serve(store: MemoryStore, **settings: Any) -> AsyncIterator[httpx.AsyncClient]:
    """Yield a client of a fresh app over `store` with `settings` (in process, no sockets)."""
    app = create_app(ServiceSettings(store_url="memory://", **settings), store)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://tickwheel.test") as client:
        yield client


@pytest.fixture
def make_client(store: MemoryStore) -> ClientFactory:
    """Build a client of an app over the test's store with other settings."""
    return lambda **settings: serve(store, **settings)


@pytest.fixture
async def client(store: MemoryStore) -> AsyncIterator[httpx.AsyncClient]:
    """A client of an app with default settings over the test's store."""
    async with serve(store) as opened:
        yield opened
