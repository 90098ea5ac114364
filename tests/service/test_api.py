"""The HTTP API, in process over a memory and a SQLite store: every route and every error path."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry, Counter

from tickwheel.errors import InvalidArgument, InvalidTimer
from tickwheel.model import State, Timer
from tickwheel.service.api import create_app
from tickwheel.service.settings import DEFAULT_MAX_BODY_BYTES, ServiceSettings
from tickwheel.stores import checks, contract
from tickwheel.stores.base import Store
from tickwheel.stores.memory import MemoryStore
from tickwheel.stores.redis import RedisStore

from .conftest import ClientFactory, serve

HOOK = "https://example.com/hook"
HOUR_MS = 3_600_000


def timer(**fields: Any) -> dict[str, Any]:
    """A valid timer body due in an hour; `fields` replace or add fields."""
    body: dict[str, Any] = {"delay": 3600, "callback": {"url": HOOK}}
    body.update(fields)
    return body


def error_of(response: httpx.Response, status: int) -> dict[str, Any]:
    """Check the status and the error shape, and return the error."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "field"}
    assert body["error"]["message"]
    error: dict[str, Any] = body["error"]
    return error


async def make_dead(store: Store, timer_id: str) -> None:
    """Claim the (due) timer and dead-letter it, as a worker would after a 4xx."""
    leases = await store.claim("default", store.now_ms(), 100, 60_000)
    (lease,) = [lease for lease in leases if lease.timer.id == timer_id]
    await store.kill(lease, "HTTP 410")


# --- creating --------------------------------------------------------------------------------


async def test_create_returns_201_and_the_timer(client: httpx.AsyncClient, store: Store) -> None:
    before = store.now_ms()
    response = await client.post("/v1/timers", json=timer(id="t1", queue="mail"))
    assert response.status_code == 201
    body = response.json()
    assert set(body) == {
        "id", "queue", "due", "due_ms", "state", "attempt", "callback", "payload", "retry",
        "created", "updated", "last_error",
    }  # fmt: skip
    assert body["id"] == "t1"
    assert body["queue"] == "mail"
    assert body["state"] == "scheduled"
    assert body["attempt"] == 0
    assert before + HOUR_MS <= body["due_ms"] <= store.now_ms() + HOUR_MS
    assert body["due"].endswith("Z")
    assert len(body["due"]) == len("2030-01-01T00:00:00.000Z")
    assert body["callback"] == {"url": HOOK, "method": "POST", "headers": {}, "body": None}
    assert body["retry"] == {
        "max_attempts": 10, "min_backoff": 1.0, "max_backoff": 3600.0, "timeout": 10.0,
        "max_retry": None,
    }  # fmt: skip
    stored = await store.get("t1")
    assert stored is not None
    assert stored.due_ms == body["due_ms"]


async def test_create_generates_an_id(client: httpx.AsyncClient) -> None:
    first = (await client.post("/v1/timers", json=timer())).json()
    second = (await client.post("/v1/timers", json=timer())).json()
    assert len(first["id"]) == 26
    assert first["id"] != second["id"]


@pytest.mark.parametrize(
    ("due", "due_ms"),
    [
        ("2030-01-01T09:00:00Z", 1_893_488_400_000),
        ("2030-01-01T10:00:00.250+01:00", 1_893_488_400_250),
        ("2030-01-01t09:00:00.123456789z", 1_893_488_400_123),
        (1_893_488_400, 1_893_488_400_000),
        (1_893_488_400.5, 1_893_488_400_500),
    ],
)
async def test_due_as_rfc3339_or_epoch_seconds(
    client: httpx.AsyncClient, due: str | float, due_ms: int
) -> None:
    response = await client.post("/v1/timers", json=timer(delay=None, due=due))
    assert response.status_code == 201, response.text
    assert response.json()["due_ms"] == due_ms


async def test_past_due_is_accepted(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/timers", json=timer(delay=None, due="1999-12-31T23:59:59Z"))
    assert response.status_code == 201
    assert response.json()["due"] == "1999-12-31T23:59:59.000Z"


async def test_repeat_with_the_same_spec_is_200(client: httpx.AsyncClient) -> None:
    for body in (timer(id="d", delay=None, due=2_000_000_000), timer(id="r", delay=90)):
        created = await client.post("/v1/timers", json=body)
        repeated = await client.post("/v1/timers", json=body)
        assert (created.status_code, repeated.status_code) == (201, 200)
        assert repeated.json() == created.json()


async def test_same_id_with_another_spec_is_409(client: httpx.AsyncClient) -> None:
    assert (await client.post("/v1/timers", json=timer(id="c"))).status_code == 201
    for other in (
        timer(id="c", delay=7200),
        timer(id="c", queue="other"),
        timer(id="c", payload=1),
    ):
        error = error_of(await client.post("/v1/timers", json=other), 409)
        assert error == {
            "code": "conflict", "message": "timer 'c' exists with a different spec", "field": "id",
        }  # fmt: skip


async def test_payload_timer_needs_no_callback(client: httpx.AsyncClient) -> None:
    body = {"delay": 1, "queue": "emails", "payload": {"to": ["a@example.com"], "n": 1.5}}
    response = await client.post("/v1/timers", json=body)
    assert response.status_code == 201
    assert response.json()["callback"] is None
    assert response.json()["payload"] == body["payload"]


async def test_retry_policy_in_seconds(client: httpx.AsyncClient, store: Store) -> None:
    retry = {"max_attempts": 3, "min_backoff": 0.5, "max_backoff": 60, "timeout": 2.5}
    response = await client.post("/v1/timers", json=timer(id="p", retry=retry))
    assert response.json()["retry"] == {**retry, "max_backoff": 60.0, "max_retry": None}
    stored = await store.get("p")
    assert stored is not None
    assert (stored.retry.min_backoff_s, stored.retry.timeout_s) == (0.5, 2.5)


INVALID_BODIES = [
    (timer(delay=None), "due"),
    (timer(due=1_893_488_400), "due"),
    (timer(delay=None, due="2030-01-01T09:00:00"), "due"),
    (timer(delay=None, due="2030-01-01"), "due"),
    (timer(delay=None, due="2030-02-30T00:00:00Z"), "due"),
    (timer(delay=None, due="1893488400"), "due"),
    (timer(delay=None, due=-1), "due"),
    (timer(delay=None, due=True), "due"),
    (timer(delay=None, due=1e300), "due"),
    (timer(delay=None, due=10**400), "due"),
    (timer(delay=None, due="9999-12-31T23:59:59Z"), "due"),
    (timer(delay=-1), "delay"),
    (timer(delay="60"), "delay"),
    (timer(delay=20 * 365 * 86_400), "delay"),
    ({"delay": 1}, "callback"),
    (timer(callback={"url": "ftp://example.com/x"}), "callback.url"),
    (timer(callback={"url": "https://user:pw@example.com/"}), "callback.url"),
    (timer(callback={"url": HOOK, "method": "TRACE"}), "callback.method"),
    (timer(callback={"url": HOOK, "headers": {"Bad Name": "x"}}), "callback.headers"),
    (timer(callback={"url": HOOK, "headers": {"Host": "evil"}}), "callback.headers"),
    (timer(callback={"url": HOOK, "headers": {"X": 1}}), "callback.headers.X"),
    (timer(callback={"url": HOOK, "body": "x" * 70_000}), "callback.body"),
    (timer(callback={"url": HOOK, "extra": 1}), "callback.extra"),
    (timer(id="has/slash"), "id"),
    (timer(id="é"), "id"),
    (timer(id="x" * 129), "id"),
    (timer(queue=""), "queue"),
    (timer(retry={"max_attempts": 0}), "retry.max_attempts"),
    (timer(retry={"max_attempts": 10**100}), "retry.max_attempts"),
    (timer(retry={"timeout": 0}), "retry.timeout"),
    (timer(retry={"min_backoff": 10, "max_backoff": 1}), "retry.min_backoff"),
    (timer(payload="x" * 70_000), "payload"),
    (timer(unknown=1), "unknown"),
]


@pytest.mark.parametrize(("body", "field"), INVALID_BODIES)
async def test_invalid_timer_is_422_naming_the_field(
    client: httpx.AsyncClient, body: dict[str, Any], field: str
) -> None:
    error = error_of(await client.post("/v1/timers", json=body), 422)
    assert error["field"] == field
    assert error["code"] == "invalid"


@pytest.mark.parametrize(
    "raw",
    [
        b'{"delay": NaN, "payload": 1}',
        b'{"delay": Infinity, "payload": 1}',
        b'{"delay": 1, "payload": [NaN]}',
        b'{"delay": 1, "payload": 1e400}',
        b'{"delay": 1e400, "payload": 1}',
        b"[]",
        b'"text"',
        b"null",
        b'{"delay": 1, "payload": "\\ud800"}',
        b'{"delay": 1, "payload": {"\\udc00": 1}}',
        b'{"delay": 1, "payload": 1, "\\ud800": 1}',
        b'{"delay": 1, "callback": {"url": "https://example.com/\\ud800"}}',
        b'{"delay": 1, "callback": {"url": "https://example.com/", "headers": {"X": "\\ud800"}}}',
        b'{"delay": 1, "callback": {"url": "https://example.com/", "body": "\\ud800"}}',
    ],
)
async def test_non_finite_non_object_or_non_unicode_json_is_422(
    client: httpx.AsyncClient, store: Store, raw: bytes
) -> None:
    headers = {"content-type": "application/json"}
    error_of(await client.post("/v1/timers", content=raw, headers=headers), 422)
    assert (await store.stats()).counts[State.SCHEDULED] == 0


async def test_paired_surrogates_are_one_character(client: httpx.AsyncClient) -> None:
    raw = b'{"delay": 1, "payload": "\\ud83d\\udca5"}'
    response = await client.post(
        "/v1/timers", content=raw, headers={"content-type": "application/json"}
    )
    assert response.status_code == 201
    assert response.json()["payload"] == "\U0001f4a5"


@pytest.mark.parametrize(
    "raw",
    [
        b"{",
        b'{"delay": 1,}',
        b"\xff\xfe{}",
        b'{"payload": "\xc3\x28"}',
        b"[" * 100_000 + b"]" * 100_000,
        b'{"delay": ' + b"9" * 5000 + b"}",
    ],
    ids=["truncated", "trailing-comma", "bad-bom", "bad-utf8", "deep", "huge-int"],
)
async def test_unparsable_body_is_400(client: httpx.AsyncClient, raw: bytes) -> None:
    headers = {"content-type": "application/json"}
    error = error_of(await client.post("/v1/timers", content=raw, headers=headers), 400)
    assert error["code"] in {"invalid_json", "bad_request"}


async def test_deep_but_parsable_payload_is_not_a_server_error(client: httpx.AsyncClient) -> None:
    raw = b'{"delay": 1, "payload": ' + b"[" * 900 + b"]" * 900 + b"}"
    response = await client.post(
        "/v1/timers", content=raw, headers={"content-type": "application/json"}
    )
    assert response.status_code in {201, 400, 422}


async def test_body_that_is_not_json_is_415(client: httpx.AsyncClient) -> None:
    for headers in ({"content-type": "text/plain"}, {}):
        response = await client.post("/v1/timers", content=json.dumps(timer()), headers=headers)
        assert error_of(response, 415)["code"] == "unsupported_media_type"
    vendor = {"content-type": "application/vnd.api+json; charset=utf-8"}
    response = await client.post("/v1/timers", content=json.dumps(timer()), headers=vendor)
    assert response.status_code == 201


# --- SSRF ------------------------------------------------------------------------------------

PRIVATE_URLS = [
    "http://127.0.0.1:8080/x",
    "http://169.254.169.254/latest/meta-data/",
    "http://10.0.0.5/",
    "http://[::1]/",
    "http://localhost/",
    "http://db.internal/",
]


@pytest.mark.parametrize("url", PRIVATE_URLS)
async def test_private_callback_is_refused(client: httpx.AsyncClient, url: str) -> None:
    error = error_of(await client.post("/v1/timers", json=timer(callback={"url": url})), 422)
    assert error["field"] == "callback.url"
    assert "private" in error["message"]


async def test_private_callback_is_allowed_when_configured(make_client: ClientFactory) -> None:
    async with make_client(allow_private_targets=True) as client:
        for url in PRIVATE_URLS:
            response = await client.post("/v1/timers", json=timer(callback={"url": url}))
            assert response.status_code == 201, url


# --- secrets ---------------------------------------------------------------------------------


async def test_header_values_are_redacted_everywhere(
    client: httpx.AsyncClient, store: Store
) -> None:
    headers = {"Authorization": "Bearer hunter2", "Content-Type": "application/json"}
    body = timer(id="s", callback={"url": HOOK, "headers": headers})
    responses = [
        await client.post("/v1/timers", json=body),
        await client.post("/v1/timers", json=body),
        await client.get("/v1/timers/s"),
        await client.get("/v1/timers"),
        await client.post("/v1/timers/batch", json={"timers": [body, {**body, "id": "s2"}]}),
        await client.patch("/v1/timers/s", json={"delay": 10}),
    ]
    for response in responses:
        assert response.status_code in {200, 201}
        assert "hunter2" not in response.text
        assert '"Authorization":"***"' in response.text
    stored = await store.get("s")
    assert stored is not None
    assert stored.callback is not None
    assert stored.callback.headers == headers


# --- PUT, GET, PATCH, DELETE -----------------------------------------------------------------


async def test_put_creates_then_replaces(client: httpx.AsyncClient, store: Store) -> None:
    created = await client.put("/v1/timers/p1", json=timer())
    assert created.status_code == 201
    assert created.json()["id"] == "p1"
    again = await client.put("/v1/timers/p1", json=timer())
    assert again.status_code == 200
    assert again.json() == created.json()
    replaced = await client.put("/v1/timers/p1", json=timer(delay=None, due=2_000_000_000))
    assert replaced.status_code == 200
    assert replaced.json()["due_ms"] == 2_000_000_000_000
    stored = await store.get("p1")
    assert stored is not None
    assert stored.due_ms == 2_000_000_000_000


async def test_put_checks_the_ids(client: httpx.AsyncClient) -> None:
    error = error_of(await client.put("/v1/timers/a", json=timer(id="b")), 422)
    assert error["field"] == "id"
    assert (await client.put("/v1/timers/a", json=timer(id="a"))).status_code == 201
    error_of(await client.put("/v1/timers/caf%C3%A9", json=timer()), 422)


async def test_get(client: httpx.AsyncClient) -> None:
    created = (await client.post("/v1/timers", json=timer(id="g.1:x-y_z"))).json()
    response = await client.get("/v1/timers/g.1:x-y_z")
    assert response.status_code == 200
    assert response.json() == created


@pytest.mark.parametrize(
    "path", ["nope", "a%2Fb", "caf%C3%A9", "%00", "x" * 500, "..", "%F0%9F%92%A5"]
)
async def test_get_unknown_or_impossible_id_is_404(client: httpx.AsyncClient, path: str) -> None:
    error = error_of(await client.get(f"/v1/timers/{path}"), 404)
    assert error["code"] == "not_found"


async def test_id_with_a_slash_matches_no_route(client: httpx.AsyncClient) -> None:
    error_of(await client.get("/v1/timers/a/b"), 404)
    error_of(await client.delete("/v1/timers/a/b"), 404)


async def test_reschedule(client: httpx.AsyncClient, store: Store) -> None:
    await client.post("/v1/timers", json=timer(id="m"))
    response = await client.patch("/v1/timers/m", json={"due": "2031-01-01T00:00:00Z"})
    assert response.status_code == 200
    assert response.json()["due"] == "2031-01-01T00:00:00.000Z"
    before = store.now_ms()
    response = await client.patch("/v1/timers/m", json={"delay": 60})
    assert before + 60_000 <= response.json()["due_ms"] <= store.now_ms() + 60_000


async def test_reschedule_errors(client: httpx.AsyncClient, store: Store) -> None:
    assert error_of(await client.patch("/v1/timers/none", json={"delay": 1}), 404)["field"] == "id"
    await client.post("/v1/timers", json=timer(id="m", delay=0))
    error = error_of(await client.patch("/v1/timers/m", json={"delay": 1, "due": 1}), 422)
    assert error["field"] == "due"
    error = error_of(await client.patch("/v1/timers/m", json={"delay": 10 * 3650 * 86_400}), 422)
    assert error["field"] == "delay"
    await store.claim("default", store.now_ms(), 10, 60_000)
    error = error_of(await client.patch("/v1/timers/m", json={"delay": 1}), 404)
    assert error["code"] == "not_scheduled"
    assert "leased" in error["message"]


async def test_cancel(client: httpx.AsyncClient, store: Store) -> None:
    await client.post("/v1/timers", json=timer(id="x"))
    response = await client.delete("/v1/timers/x")
    assert response.status_code == 204
    assert response.content == b""
    assert await store.get("x") is None
    assert error_of(await client.delete("/v1/timers/x"), 404)["code"] == "not_found"


async def test_cancel_after_fire_is_404(client: httpx.AsyncClient, store: Store) -> None:
    await client.post("/v1/timers", json=timer(id="f", delay=0))
    (lease,) = await store.claim("default", store.now_ms(), 10, 60_000)
    error = error_of(await client.delete("/v1/timers/f"), 404)
    assert (error["code"], "leased" in error["message"]) == ("not_scheduled", True)
    await store.ack(lease)
    error = error_of(await client.delete("/v1/timers/f"), 404)
    assert "done" in error["message"]
    assert (await client.get("/v1/timers/f")).json()["state"] == "done"


# --- lists -----------------------------------------------------------------------------------


async def test_list_pages_to_the_end(client: httpx.AsyncClient) -> None:
    ids = {f"t{n:02}" for n in range(25)}
    for timer_id in ids:
        await client.post("/v1/timers", json=timer(id=timer_id))
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params: dict[str, Any] = {"limit": 10, **({"cursor": cursor} if cursor else {})}
        page = (await client.get("/v1/timers", params=params)).json()
        pages += 1
        seen += [item["id"] for item in page["timers"]]
        cursor = page["cursor"]
        if cursor is None:
            break
    assert pages == 3
    assert seen == sorted(ids)


async def test_list_filters_by_state(client: httpx.AsyncClient, store: Store) -> None:
    await client.post("/v1/timers", json=timer(id="later"))
    await client.post("/v1/timers", json=timer(id="now", delay=0))
    await make_dead(store, "now")
    page = (await client.get("/v1/timers", params={"state": "scheduled"})).json()
    assert [item["id"] for item in page["timers"]] == ["later"]
    page = (await client.get("/v1/timers", params={"state": "dead"})).json()
    assert [item["id"] for item in page["timers"]] == ["now"]
    assert len((await client.get("/v1/timers")).json()["timers"]) == 2


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"state": "gone"}, "state"),
        ({"limit": 0}, "limit"),
        ({"limit": 1001}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"limit": "9" * 50}, "limit"),
        ({"cursor": "a b"}, "cursor"),
        ({"cursor": "x" * 513}, "cursor"),
        ({"cursor": "caf\u00e9"}, "cursor"),
    ],
)
async def test_list_query_errors(
    client: httpx.AsyncClient, query: dict[str, Any], field: str
) -> None:
    assert error_of(await client.get("/v1/timers", params=query), 422)["field"] == field


async def test_dead_letters_and_replay(client: httpx.AsyncClient, store: Store) -> None:
    await client.post("/v1/timers", json=timer(id="d1", delay=0))
    await client.post("/v1/timers", json=timer(id="alive"))
    await make_dead(store, "d1")
    page = (await client.get("/v1/dead")).json()
    assert [item["id"] for item in page["timers"]] == ["d1"]
    assert page["timers"][0]["last_error"] == "HTTP 410"
    assert page["cursor"] is None
    replayed = await client.post("/v1/dead/d1/replay")
    assert replayed.status_code == 200
    assert replayed.json()["state"] == "scheduled"
    assert (await client.get("/v1/dead")).json()["timers"] == []
    for timer_id in ("d1", "alive", "unknown", "caf%C3%A9"):
        error_of(await client.post(f"/v1/dead/{timer_id}/replay"), 404)


async def test_stats(client: httpx.AsyncClient, store: Store) -> None:
    empty = (await client.get("/v1/stats")).json()
    assert empty == {
        "counts": {"scheduled": 0, "leased": 0, "paused": 0, "done": 0, "dead": 0},
        "earliest_due": None,
        "earliest_due_ms": None,
    }
    await client.post("/v1/timers", json=timer(delay=None, due="2030-01-01T00:00:00Z"))
    await client.post("/v1/timers", json=timer(delay=None, due="2029-01-01T00:00:00Z"))
    await client.post("/v1/timers", json=timer(id="d", delay=0))
    await make_dead(store, "d")
    stats = (await client.get("/v1/stats")).json()
    assert stats["counts"] == {"scheduled": 2, "leased": 0, "paused": 0, "done": 0, "dead": 1}
    assert stats["earliest_due"] == "2029-01-01T00:00:00.000Z"


# --- batch -----------------------------------------------------------------------------------


async def test_batch_answers_each_item_in_order(client: httpx.AsyncClient) -> None:
    await client.post("/v1/timers", json=timer(id="old"))
    await client.post("/v1/timers", json=timer(id="taken"))
    items = [
        timer(id="new"),
        timer(id="old"),
        timer(id="taken", delay=5),
        timer(delay=None),
        "not an object",
        timer(id="twice", delay=9),
        timer(id="twice", delay=9),
        timer(id="twice", delay=8),
        timer(callback={"url": "http://127.0.0.1/"}),
        timer(delay=20 * 365 * 86_400),
        timer(),
        timer(payload=[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]),
    ]
    response = await client.post("/v1/timers/batch", json={"timers": items})
    assert response.status_code == 200
    results = response.json()["results"]
    statuses = [result["status"] for result in results]
    assert statuses == [201, 200, 409, 422, 422, 201, 200, 409, 422, 422, 201, 201]
    for result in results:
        assert (result["timer"] is None) == (result["status"] >= 400)
        assert (result["error"] is None) == (result["status"] < 400)
    assert results[0]["timer"]["id"] == "new"
    assert results[3]["error"]["field"] == "due"
    assert results[8]["error"]["field"] == "callback.url"
    assert results[6]["timer"] == results[5]["timer"]
    listed = (await client.get("/v1/timers", params={"limit": 1000})).json()["timers"]
    assert len(listed) == 6


async def test_batch_item_too_deep_fails_alone(client: httpx.AsyncClient) -> None:
    deep: Any = 1
    for _ in range(300):
        deep = [deep]
    items = [timer(payload=deep), timer(), timer(payload="\ud800")]
    raw = json.dumps({"timers": items}).encode()  # ASCII, the surrogate escaped
    response = await client.post(
        "/v1/timers/batch", content=raw, headers={"content-type": "application/json"}
    )
    statuses = [result["status"] for result in response.json()["results"]]
    assert statuses == [422, 201, 422]


async def test_batch_item_past_the_horizon_fails_alone(client: httpx.AsyncClient) -> None:
    # refused as its due time is read, naming the field; every other item is still stored
    far = timer(id="far", delay=None, due=4_000_000_000)
    items = [timer(id="a"), far, timer(id="b")]
    results = (await client.post("/v1/timers/batch", json={"timers": items})).json()["results"]
    assert [result["status"] for result in results] == [201, 422, 201]
    assert results[1]["error"]["field"] == "due"


async def test_a_due_time_is_compared_with_the_horizon_once(
    client: httpx.AsyncClient, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the API compares it as it reads the request, naming the field; the store, told so, does
    # not compare it again; a library caller's add is still compared by the store
    compared: list[int] = []

    def counted(check: Callable[..., None]) -> Callable[..., None]:
        return lambda *args: compared.append(1) or check(*args)

    monkeypatch.setattr(contract, "check_timers", counted(contract.check_timers))
    monkeypatch.setattr(checks, "check_due", counted(checks.check_due))
    assert (await client.post("/v1/timers", json=timer(id="t1"))).status_code == 201
    assert (await client.put("/v1/timers/t2", json=timer())).status_code == 201
    batch = {"timers": [timer(id="t3"), timer(id="t4", delay=None, due=2_000_000_000)]}
    results = (await client.post("/v1/timers/batch", json=batch)).json()["results"]
    assert [result["status"] for result in results] == [201, 201]
    assert (await client.patch("/v1/timers/t1", json={"delay": 60})).status_code == 200
    far = timer(id="far", delay=None, due=4_000_000_000)
    assert error_of(await client.post("/v1/timers", json=far), 422)["field"] == "due"
    assert compared == []
    horizon_ms = store.settings.max_horizon_ms
    with pytest.raises(InvalidTimer, match="horizon"):
        await store.add(Timer(id="lib", due_ms=store.now_ms() + horizon_ms + 60_000, payload=1))
    with pytest.raises(InvalidTimer, match="horizon"):
        await store.reschedule("t1", store.now_ms() + horizon_ms + 60_000)
    assert compared == [1, 1]


async def test_batch_of_a_thousand_fits_the_body_limit(
    client: httpx.AsyncClient, store: Store
) -> None:
    headers = {"Authorization": "Bearer " + "k" * 40, "Content-Type": "application/json"}
    items = [
        timer(
            id=f"order-{n:06}-reminder",
            callback={
                "url": f"https://api.example.com/v2/orders/{n:06}/reminders?source=tickwheel",
                "headers": headers,
                "body": json.dumps({"order": n, "kind": "reminder", "note": "x" * 2000}),
            },
            retry={"max_attempts": 5, "min_backoff": 2, "max_backoff": 600, "timeout": 10},
        )
        for n in range(1000)
    ]
    raw = json.dumps({"timers": items}).encode()
    assert len(raw) < DEFAULT_MAX_BODY_BYTES
    response = await client.post(
        "/v1/timers/batch", content=raw, headers={"content-type": "application/json"}
    )
    assert response.status_code == 200
    assert {result["status"] for result in response.json()["results"]} == {201}
    assert (await store.stats()).counts[State.SCHEDULED] == 1000


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"timers": []}, "timers"),
        ({"timers": [timer()] * 1001}, "timers"),
        ({"timers": "x"}, "timers"),
        ({}, "timers"),
    ],
)
async def test_batch_shape_errors(
    client: httpx.AsyncClient, body: dict[str, Any], field: str
) -> None:
    error = error_of(await client.post("/v1/timers/batch", json=body), 422)
    assert error["field"] == field


# --- limits, auth, methods -------------------------------------------------------------------


async def test_body_over_the_limit_is_413(make_client: ClientFactory, store: Store) -> None:
    limit = 64 * 1024
    raw = json.dumps(timer(payload="x" * limit)).encode()
    async with make_client(max_body_bytes=limit) as client:
        declared = await client.post(
            "/v1/timers", content=raw, headers={"content-type": "application/json"}
        )
        assert error_of(declared, 413)["code"] == "payload_too_large"

        async def chunks() -> AsyncIterator[bytes]:
            for start in range(0, len(raw), 4096):
                yield raw[start : start + 4096]

        streamed = await client.post(
            "/v1/timers", content=chunks(), headers={"content-type": "application/json"}
        )
        assert "content-length" not in streamed.request.headers
        error_of(streamed, 413)
        # a Content-Length under the limit does not excuse the bytes that follow it
        lying = await client.post(
            "/v1/timers",
            content=raw,
            headers={"content-type": "application/json", "content-length": "10"},
        )
        error_of(lying, 413)
    assert (await store.stats()).counts[State.SCHEDULED] == 0


async def test_headers_over_the_limit_are_431(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/stats", headers={"x-padding": "a" * 40_000})
    assert error_of(response, 431)["code"] == "headers_too_large"
    assert (await client.get("/v1/stats", headers={"x-padding": "a" * 8_000})).status_code == 200


async def test_bad_content_length_is_400(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/timers",
        content=b"{}",
        headers={"content-type": "application/json", "content-length": "x"},
    )
    error_of(response, 400)


async def test_token_guards_everything_but_health(make_client: ClientFactory) -> None:
    async with make_client(token="s3cret-token") as client:
        for method, path in [
            ("GET", "/v1/timers"),
            ("POST", "/v1/timers"),
            ("GET", "/v1/stats"),
            ("GET", "/metrics"),
            ("GET", "/v1/timers/x"),
            ("DELETE", "/v1/timers/x"),
        ]:
            for headers in (
                {},
                {"Authorization": "Bearer wrong"},
                {"Authorization": "Basic s3cret-token"},
                {"Authorization": "Bearer s3cret-token-and-more"},
                {"Authorization": "Bearer"},
            ):
                response = await client.request(method, path, headers=headers)
                assert error_of(response, 401)["code"] == "unauthorized"
                assert response.headers["www-authenticate"] == "Bearer"
        good = {"Authorization": "Bearer s3cret-token"}
        assert (await client.get("/v1/timers", headers=good)).status_code == 200
        assert (await client.post("/v1/timers", json=timer(), headers=good)).status_code == 201
        assert (await client.get("/metrics", headers=good)).status_code == 200
        assert (await client.get("/healthz")).status_code == 200
        assert (await client.get("/openapi.json")).status_code == 200


async def test_token_is_checked_before_the_body(make_client: ClientFactory) -> None:
    async with make_client(token="tok", max_body_bytes=64 * 1024) as client:
        huge = b"{" * (128 * 1024)
        response = await client.post(
            "/v1/timers", content=huge, headers={"content-type": "application/json"}
        )
    error_of(response, 401)


async def test_no_token_means_no_auth(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/timers", headers={"Authorization": "Bearer anything"})
    assert response.status_code == 200


async def test_wrong_method_is_405_and_unknown_path_404(client: httpx.AsyncClient) -> None:
    assert error_of(await client.delete("/v1/timers"), 405)["code"] == "method_not_allowed"
    assert error_of(await client.put("/v1/stats"), 405)["code"] == "method_not_allowed"
    assert error_of(await client.get("/v2/timers"), 404)["code"] == "not_found"


# --- health, metrics, store failures ---------------------------------------------------------


async def test_health(client: httpx.AsyncClient, store: Store) -> None:
    response = await client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "store": type(store).__name__}


async def test_metrics_render_the_given_registry(store: Store) -> None:
    registry = CollectorRegistry()
    Counter("tickwheel_fired", "Timers fired.", registry=registry).inc(3)
    app = create_app(ServiceSettings(), store, registry=registry)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        await client.get("/v1/timers/missing")
        response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert "tickwheel_fired_total 3.0" in response.text
    assert (
        'tickwheel_http_requests_total{method="GET",route="/v1/timers/{timer_id}",status="404"} 1.0'
        in response.text
    )


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.fixture
async def down_store() -> AsyncIterator[Store]:
    """A Redis store on a port nobody listens on: every call raises `StoreUnavailable`."""
    store = RedisStore.from_url(f"redis://127.0.0.1:{_closed_port()}", timeout_s=0.5)
    try:
        yield store
    finally:
        await store.close()


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/healthz", None),
        ("POST", "/v1/timers", timer(id="a")),
        ("POST", "/v1/timers", timer()),
        ("PUT", "/v1/timers/a", timer()),
        ("GET", "/v1/timers/a", None),
        ("PATCH", "/v1/timers/a", {"delay": 1}),
        ("DELETE", "/v1/timers/a", None),
        ("GET", "/v1/timers", None),
        ("POST", "/v1/timers/batch", {"timers": [timer(), timer(id="b")]}),
        ("GET", "/v1/dead", None),
        ("POST", "/v1/dead/a/replay", None),
        ("GET", "/v1/stats", None),
    ],
)
async def test_store_down_is_503_with_retry_after(
    down_store: Store, method: str, path: str, body: dict[str, Any] | None
) -> None:
    async with serve(down_store) as client:
        response = await client.request(method, path, json=body)
    assert error_of(response, 503)["code"] == "store_unavailable"
    assert int(response.headers["retry-after"]) >= 1


async def test_closed_store_is_503(store: Store) -> None:
    await store.close()
    async with serve(store) as client:
        error_of(await client.get("/v1/timers/x"), 503)


async def test_app_opens_and_closes_its_own_store(tmp_path: Any) -> None:
    settings = ServiceSettings(store_url=f"sqlite:///{tmp_path}/own.db")
    app = create_app(settings)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        error_of(await client.get("/v1/stats"), 503)  # not started yet
        async with app.router.lifespan_context(app):
            assert (await client.post("/v1/timers", json=timer(id="own"))).status_code == 201
            assert (await client.get("/healthz")).json()["store"] == "SqliteStore"
        error_of(await client.get("/v1/timers/own"), 503)
    assert (tmp_path / "own.db").exists()


async def test_given_store_stays_open() -> None:
    store = MemoryStore()
    app = create_app(ServiceSettings(), store)
    async with app.router.lifespan_context(app):
        pass
    assert await store.get("x") is None  # not closed


# --- settings --------------------------------------------------------------------------------


def test_settings_from_env_and_overrides() -> None:
    environ = {
        "TICKWHEEL_STORE": "memory://",
        "TICKWHEEL_HOST": "0.0.0.0",
        "TICKWHEEL_PORT": "9000",
        "TICKWHEEL_TOKEN": "tok",
        "TICKWHEEL_SIGNING_SECRET": "sig",
        "TICKWHEEL_ALLOW_PRIVATE_TARGETS": "yes",
        "TICKWHEEL_WORKER": "0",
        "UNRELATED": "x",
    }
    settings = ServiceSettings.from_env(environ, port=None, host="::1")
    assert settings == ServiceSettings(
        store_url="memory://",
        host="::1",
        port=9000,
        token="tok",
        signing_secret="sig",
        allow_private_targets=True,
        worker=False,
    )
    assert ServiceSettings.from_env({}) == ServiceSettings()
    assert ServiceSettings.from_env(
        {"TICKWHEEL_ALLOW_PRIVATE_TARGETS": "TRUE"}
    ).allow_private_targets


@pytest.mark.parametrize(
    ("environ", "overrides", "field"),
    [
        ({"TICKWHEEL_PORT": "http"}, {}, "port"),
        ({"TICKWHEEL_PORT": "70000"}, {}, "port"),
        ({"TICKWHEEL_WORKER": "maybe"}, {}, "worker"),
        ({}, {"port": -1}, "port"),
        ({}, {"store_url": "tickwheel.db"}, "store_url"),
        ({}, {"token": "has space"}, "token"),
        ({}, {"max_body_bytes": 10}, "max_body_bytes"),
        ({}, {"allow_private_targets": "yes"}, "allow_private_targets"),
        ({}, {"colour": "blue"}, "colour"),
    ],
)
def test_settings_errors_name_the_field(
    environ: dict[str, str], overrides: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidArgument) as raised:
        ServiceSettings.from_env(environ, **overrides)
    assert raised.value.argument == field


def test_settings_repr_hides_secrets() -> None:
    settings = ServiceSettings(
        store_url="redis://:redispw@cache:6379/0", token="tok-123", signing_secret="sig-456"
    )
    shown = repr(settings)
    for secret in ("tok-123", "sig-456", "redispw"):
        assert secret not in shown
    assert "token='***'" in shown
    assert "store_url='redis://:***@cache:6379/0'" in shown
    assert "token=None" in repr(ServiceSettings())


# --- the OpenAPI document --------------------------------------------------------------------


async def test_openapi_declares_errors_and_the_token(make_client: ClientFactory) -> None:
    async with make_client(token="tok") as client:
        document = (await client.get("/openapi.json")).json()
        assert (await client.get("/docs")).status_code == 200
    assert document["components"]["securitySchemes"] == {
        "bearer": {"type": "http", "scheme": "bearer"}
    }
    assert "security" not in document["paths"]["/healthz"]["get"]
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            declared = set(operation["responses"])
            assert {"400", "401", "413", "422", "431", "503"} <= declared, (method, path)
            if path != "/healthz":
                assert operation["security"] == [{"bearer": []}]
    batch = document["components"]["schemas"]["BatchIn"]["properties"]["timers"]
    assert batch["items"] == {"$ref": "#/components/schemas/TimerIn"}
    assert "TimerIn" in document["components"]["schemas"]
