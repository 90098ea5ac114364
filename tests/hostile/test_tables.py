"""20,000 host limits (issue 23) made ``GET /v1/limits`` answer 1.39 MB, polled by the dashboard
every 2 s, and ``/v1/queues`` had no paging either: both now answer one bounded page."""

from __future__ import annotations

import httpx

from tickwheel.stores.base import Limit
from tickwheel.stores.memory import MemoryStore

MAX_PAGE_BYTES = 120_000  # 1,000 rows of the longest page a client can ask for, with room


async def test_twenty_thousand_limits_answer_one_bounded_page(
    client: httpx.AsyncClient, store: MemoryStore
) -> None:
    for n in range(20_000):
        await store.set_limit(f"host-{n:05}.example.com", Limit(rate=10.0, concurrency=5))
    default = await client.get("/v1/limits")
    assert default.status_code == 200
    assert len(default.json()["limits"]) == 100
    assert len(default.content) < 12_000, len(default.content)
    largest = await client.get("/v1/limits", params={"limit": 1000})
    assert len(largest.json()["limits"]) == 1000
    assert len(largest.content) < MAX_PAGE_BYTES, len(largest.content)
    refused = await client.get("/v1/limits", params={"limit": 20_000})
    assert refused.status_code == 422
    # every host once, by following the cursor
    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": 1000} | ({} if cursor is None else {"cursor": cursor})
        page = (await client.get("/v1/limits", params=params)).json()
        seen += [row["host"] for row in page["limits"]]
        if (cursor := page["cursor"]) is None:
            break
    assert seen == sorted(f"host-{n:05}.example.com" for n in range(20_000))


async def test_ten_thousand_queues_answer_one_bounded_page(
    client: httpx.AsyncClient, store: MemoryStore
) -> None:
    for n in range(10_000):
        await store.set_queue_limit(f"queue-{n:05}", Limit(concurrency=1))
    response = await client.get("/v1/queues")
    assert response.status_code == 200
    page = response.json()
    assert [queue["name"] for queue in page["queues"]] == [f"queue-{n:05}" for n in range(100)]
    assert page["cursor"] == "queue-00099"
    assert len(response.content) < 40_000, len(response.content)
