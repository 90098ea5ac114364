"""Paging of the operator's tables: ``GET /v1/queues`` and ``GET /v1/limits`` a page at a time
in name order, as ``GET /v1/timers`` is (the CLI following them: tests/cli/test_paging_cli.py)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tickwheel.model import Timer
from tickwheel.stores.base import Limit, QueueSettings, Store


async def every_page(client: httpx.AsyncClient, path: str, key: str, limit: int) -> list[Any]:
    rows: list[Any] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": limit} | ({} if cursor is None else {"cursor": cursor})
        response = await client.get(path, params=params)
        assert response.status_code == 200, response.text
        page = response.json()
        assert len(page[key]) <= limit
        rows += page[key]
        if (cursor := page["cursor"]) is None:
            return rows
        assert page[key], "a page with a cursor holds something"


async def test_limits_come_a_page_at_a_time_by_host(
    client: httpx.AsyncClient, store: Store
) -> None:
    hosts = [f"h{n:03}.example.com" for n in range(250)]
    for host in reversed(hosts):
        await store.set_limit(host, Limit(rate=2.0))
    first = (await client.get("/v1/limits")).json()
    assert [row["host"] for row in first["limits"]] == hosts[:100]  # the default page
    assert first["cursor"] is not None
    for size in (1, 99, 250, 1000):
        rows = await every_page(client, "/v1/limits", "limits", size)
        assert [row["host"] for row in rows] == hosts
    assert rows[0] == {"host": hosts[0], "rate": 2.0, "burst": None, "concurrency": None}


async def test_queues_come_a_page_at_a_time_by_name(
    client: httpx.AsyncClient, store: Store
) -> None:
    names = [f"q{n:03}" for n in range(130)]
    for name in names[::2]:
        await store.set_queue(name, QueueSettings(paused=True))
    for name in names[1::2]:
        await store.add(Timer(id=f"t-{name}", due_ms=store.now_ms() + 60_000, queue=name))
    first = (await client.get("/v1/queues")).json()
    assert [row["name"] for row in first["queues"]] == names[:100]
    for size in (1, 64, 130):
        rows = await every_page(client, "/v1/queues", "queues", size)
        assert [row["name"] for row in rows] == names
        assert [row["paused"] for row in rows] == [n % 2 == 0 for n in range(130)]
        assert all(row["counts"]["scheduled"] == n % 2 for n, row in enumerate(rows))


async def test_the_last_page_has_no_cursor(client: httpx.AsyncClient, store: Store) -> None:
    assert (await client.get("/v1/limits")).json() == {"limits": [], "cursor": None}
    assert (await client.get("/v1/queues")).json() == {"queues": [], "cursor": None}
    await store.set_limit("a.example.com", Limit(concurrency=1))
    page = (await client.get("/v1/limits", params={"limit": 1})).json()
    assert page["cursor"] is None


@pytest.mark.parametrize("path", ["/v1/limits", "/v1/queues"])
@pytest.mark.parametrize(
    "query", ["limit=0", "limit=1001", "limit=x", "cursor=", "cursor=a%20b", "page=2"]
)
async def test_paging_refuses_what_it_cannot_use(
    client: httpx.AsyncClient, path: str, query: str
) -> None:
    response = await client.get(f"{path}?{query}")
    assert response.status_code in (400, 422), response.text
    assert "error" in response.json()
