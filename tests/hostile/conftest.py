"""Fixtures for the hostile-input tests: an app over a `MemoryStore`, and its client."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from service.conftest import ClientFactory, serve

from tickwheel.stores.memory import MemoryStore


@pytest.fixture
async def store() -> AsyncIterator[MemoryStore]:
    """The app's store: input validation happens before any store sees a timer."""
    opened = MemoryStore()
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
def make_client(store: MemoryStore) -> ClientFactory:
    """Build a client of an app over the test's store with other settings."""
    return lambda **settings: serve(store, **settings)


@pytest.fixture
async def client(store: MemoryStore) -> AsyncIterator[httpx.AsyncClient]:
    """A client of an app with default settings over the test's store."""
    async with serve(store) as opened:
        yield opened
