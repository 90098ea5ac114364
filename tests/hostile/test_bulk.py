"""The bulk routes probed as a careless or hostile client would: purge states that are not
purgeable, unknown and impossible queues, huge and odd id lists, hostile queue defaults, and a
tenant reaching for another tenant's queue."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from service.conftest import serve

from tickwheel.model import State, Timer
from tickwheel.service.tenants import parse_tenants
from tickwheel.stores.memory import MemoryStore

ALICE = "alice-token-0123456789ab"
BOB = "bob-token-0123456789abcde"
READER = "reader-token-0123456789a"
TOKENS = f"""
[[token]]
name = "alice"
token = "{ALICE}"
queues = ["alice-*"]
role = "write"

[[token]]
name = "bob"
token = "{BOB}"
queues = ["bob"]
role = "write"

[[token]]
name = "reader"
token = "{READER}"
queues = ["*"]
role = "read"
"""


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def error(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    found: dict[str, Any] = response.json()["error"]
    return found


@pytest.fixture
async def tenants(store: MemoryStore) -> AsyncIterator[httpx.AsyncClient]:
    async with serve(store, tenants=parse_tenants(TOKENS)) as client:
        yield client


async def add(store: MemoryStore, queue: str, *ids: str) -> None:
    for timer_id in ids:
        await store.add(Timer(id=timer_id, due_ms=store.now_ms() + 3_600_000, queue=queue))


@pytest.mark.parametrize(
    "query",
    [
        {"state": "leased"},
        {"state": "done"},
        {"state": ""},
        {"state": "SCHEDULED"},
        {"state": "scheduled\x00"},
        {"state": "x" * 10_000},
        {},
    ],
)
async def test_a_state_not_purgeable_is_a_422_and_deletes_nothing(
    client: httpx.AsyncClient, store: MemoryStore, query: dict[str, str]
) -> None:
    await add(store, "q", "a")
    found = error(await client.delete("/v1/queues/q/timers", params=query), 422)
    assert found["field"] == "state"
    assert await store.get("a") is not None


async def test_the_state_given_twice_is_refused(client: httpx.AsyncClient) -> None:
    answer = await client.delete("/v1/queues/q/timers?state=dead&state=scheduled")
    assert answer.status_code == 400


async def test_an_unknown_queue_purges_nothing(client: httpx.AsyncClient) -> None:
    answer = await client.delete("/v1/queues/never-seen/timers", params={"state": "dead"})
    assert answer.json() == {"queue": "never-seen", "state": "dead", "purged": 0}


@pytest.mark.parametrize("queue", ["a%20b", "x" * 65, "%2A", "..%2F..%2Fetc"])
async def test_a_queue_no_timer_can_have_is_a_422(client: httpx.AsyncClient, queue: str) -> None:
    answer = await client.delete(f"/v1/queues/{queue}/timers", params={"state": "scheduled"})
    assert answer.status_code in (404, 422)
    if answer.status_code == 422:
        assert answer.json()["error"]["field"] == "queue"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"ids": []}, "ids"),
        ({"ids": [f"t{n}" for n in range(1001)]}, "ids"),
        ({"ids": ["x" * 100_000]}, "ids"),
        ({"ids": "t1"}, "ids"),
        ({"ids": [1, 2]}, "ids"),
        ({"ids": ["t1", "t1"]}, "ids"),
        ({"ids": ["t1"], "all": True}, "all"),
        ({}, "ids"),
        ([], None),
    ],
)
async def test_a_bad_id_list_is_a_422_and_cancels_nothing(
    client: httpx.AsyncClient, store: MemoryStore, body: Any, field: str | None
) -> None:
    await add(store, "q", "t1")
    found = error(await client.post("/v1/timers/cancel", json=body), 422)
    if field is not None:
        assert found["field"].split(".")[0].split("[")[0] == field
    assert await store.get("t1") is not None


async def test_a_thousand_ids_are_taken(client: httpx.AsyncClient, store: MemoryStore) -> None:
    await add(store, "q", *(f"t{n}" for n in range(0, 1000, 2)))
    answer = await client.post("/v1/timers/cancel", json={"ids": [f"t{n}" for n in range(1000)]})
    assert answer.status_code == 200
    assert answer.json()["cancelled"] == 500
    assert (await store.stats()).counts[State.SCHEDULED] == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"headers": {"Tickwheel-Attempt": "1"}}, "headers"),
        ({"headers": {"Host": "evil.example"}}, "headers"),
        ({"headers": {"Content-Length": "0"}}, "headers"),
        ({"headers": {"X-A": "line\r\nInjected: 1"}}, "headers"),
        ({"headers": {"bad name": "1"}}, "headers"),
        ({"headers": {"X-A": "1", "x-a": "2"}}, "headers"),
        ({"headers": {f"X-{n}": "v" for n in range(33)}}, "headers"),
        ({"headers": {"X-Big": "v" * 9000}}, "headers"),
        ({"headers": {"X-A": 1}}, "headers"),
        ({"retry": {"max_attempts": 0}}, "retry"),
        ({"retry": {"max_attempts": 10**30}}, "retry"),
        ({"retry": {"timeout": -1}}, "retry"),
        ({"retry": {"timeout": 1e9}}, "retry"),
        ({"retry": {"min_backoff": 10, "max_backoff": 1}}, "retry"),
        ({"retry": {"tries": 3}}, "retry"),
        ({"timeout": 3}, "timeout"),
    ],
)
async def test_hostile_queue_defaults_are_a_422_and_store_nothing(
    client: httpx.AsyncClient, store: MemoryStore, body: dict[str, Any], field: str
) -> None:
    found = error(await client.put("/v1/queues/q/defaults", json=body), 422)
    assert found["field"].split(".")[0] == field
    assert await store.queue_settings() == {}


async def test_defaults_of_a_queue_no_timer_can_have_are_refused(
    client: httpx.AsyncClient,
) -> None:
    answer = await client.put("/v1/queues/a%20b/defaults", json={"headers": {"X-A": "1"}})
    assert error(answer, 422)["field"] == "queue"


async def test_another_tenants_queue_is_a_403_and_stays_as_it_was(
    tenants: httpx.AsyncClient, store: MemoryStore
) -> None:
    await add(store, "bob", "bob-1", "bob-2")
    for method, path, body, params in [
        ("DELETE", "/v1/queues/bob/timers", None, {"state": "scheduled"}),
        ("PUT", "/v1/queues/bob/defaults", {"headers": {"X-Evil": "1"}}, None),
        ("DELETE", "/v1/queues/bob/defaults", None, None),
    ]:
        answer = await tenants.request(
            method, path, json=body, params=params, headers=bearer(ALICE)
        )
        assert error(answer, 403)["code"] == "forbidden", (method, path)
    cancel = await tenants.post(
        "/v1/timers/cancel", json={"ids": ["bob-1", "bob-2"]}, headers=bearer(ALICE)
    )
    assert cancel.json()["results"] == [
        {"id": "bob-1", "result": "not_found"},
        {"id": "bob-2", "result": "not_found"},
    ]
    assert await store.get("bob-1") is not None
    assert await store.queue_settings() == {}
    purged = await tenants.delete(
        "/v1/queues/bob/timers", params={"state": "scheduled"}, headers=bearer(BOB)
    )
    assert purged.json()["purged"] == 2


async def test_a_read_token_may_not_purge_cancel_or_set_defaults(
    tenants: httpx.AsyncClient, store: MemoryStore
) -> None:
    await add(store, "alice-a", "a1")
    for method, path, body, params in [
        ("DELETE", "/v1/queues/alice-a/timers", None, {"state": "scheduled"}),
        ("POST", "/v1/timers/cancel", {"ids": ["a1"]}, None),
        ("PUT", "/v1/queues/alice-a/defaults", {"headers": {"X-A": "1"}}, None),
    ]:
        answer = await tenants.request(
            method, path, json=body, params=params, headers=bearer(READER)
        )
        assert answer.status_code == 403, (method, path)
    assert await store.get("a1") is not None
