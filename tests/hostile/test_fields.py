"""Every field of every request, with hostile values: each is a 422 naming the field, never a 500.

The values are what a fuzzer or a careless client sends: integers past any float, NaN and
Infinity (Python's JSON parser reads them), booleans where numbers go, floats where integers go,
strings far past any limit, lone surrogates and control characters. The bounds they test:
``retry.timeout`` in (0, 1800] s, backoffs at most 7 days, ``retry.max_retry`` at most 365 days.
"""

from __future__ import annotations

import json
import reprlib
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tickwheel.callbacks.http import HttpTarget
from tickwheel.callbacks.settings import HttpSettings
from tickwheel.engine.outcome import ACKED
from tickwheel.model import MAX_BODY_BYTES, State
from tickwheel.stores.memory import MemoryStore
from tickwheel.testing.receiver import Receiver

from .conftest import ClientFactory

HOOK = "https://example.com/hook"
HUGE = 10**400
NAN = float("nan")
INF = float("inf")
LONG = "x" * 100_000
SURROGATE = "\ud800"
TOO_DEEP = json.loads("[" * 129 + "]" * 129)  # one level past the bound; pydantic's is 255
FAR_TOO_DEEP = json.loads("[" * 900 + "]" * 900)
DAY_S = 86_400
JSON = {"content-type": "application/json"}


def timer(**fields: Any) -> dict[str, Any]:
    """A valid timer body due in an hour; `fields` replace or add top-level fields."""
    return {"delay": 3600, "callback": {"url": HOOK}, **fields}


def callback(**fields: Any) -> dict[str, Any]:
    """A valid timer body whose callback has `fields`."""
    return timer(callback={"url": HOOK, **fields})


def retry(**fields: Any) -> dict[str, Any]:
    """A valid timer body with a retry policy of `fields`."""
    return timer(retry=fields)


def raw(body: object) -> bytes:
    """Encode `body` as Python's JSON does by default: NaN, Infinity and escaped surrogates."""
    return json.dumps(body).encode()


def cases(field: str, build: Callable[[Any], Any], values: list[Any]) -> list[Any]:
    """One case per value: the body `build(value)` gives, and the field its error must name."""
    return [
        pytest.param(build(value), field, id=f"{field}={reprlib.repr(value)}") for value in values
    ]


NOT_SECONDS = [HUGE, -HUGE, -1, NAN, INF, -INF, True, "1", [], {}, LONG]
NOT_NAMES = [HUGE, 1.5, True, "", "x" * 129, LONG, SURROGATE, "a\x00", "a b", "é", "a/b"]

CREATE_CASES = [
    *cases("due", lambda v: timer(delay=None, due=v), [*NOT_SECONDS, "\x01", 253_402_300_800]),
    *cases("delay", lambda v: timer(delay=v), [*NOT_SECONDS, 1e308, 300 * 365 * DAY_S]),
    *cases("id", lambda v: timer(id=v), NOT_NAMES),
    *cases("queue", lambda v: timer(queue=v), [*NOT_NAMES[:4], "x" * 65, *NOT_NAMES[5:], None]),
    *cases("callback", lambda v: timer(callback=v), [1, "x", [], True, NAN]),
    *cases(
        "callback.url",
        lambda v: timer(callback={"url": v}),
        [
            "",
            None,
            1,
            LONG,
            f"https://example.com/{SURROGATE}",
            "https://exa\x01mple.com/",
            "https://a..b/",
            "https://.x/",
            "https://" + "a" * 64 + ".com/",
            "https://example.com../",
            "https://" + "a." * 127 + "com/",  # 257 characters of host
            "https://" + "ü" * 60 + ".com/",  # 60 characters, but 68 as punycode
            "https://example.com:0/",
            "https://example.com:65536/",
            "https://[::1/",
            "javascript:alert(1)",
            "https:///x",
        ],
    ),
    *cases("callback.method", lambda v: callback(method=v), ["post", "TRACE", 1, LONG, None]),
    *cases("callback.headers", lambda v: callback(headers=v), ["x", [], 1, None]),
    *cases("callback.headers.X", lambda v: callback(headers={"X": v}), [1, None, HUGE, NAN, []]),
    *cases(
        "callback.headers",
        lambda v: callback(headers={"X": v}),
        [
            "a\x01b",
            "a\x1bb",
            "a\x7fb",
            "a\x85b",
            "a\u2028b",
            "a\rb",
            "a\nb",
            "a\x00b",
            SURROGATE,
            "v" * 9000,
        ],
    ),
    *cases(
        "callback.headers",
        lambda v: callback(headers=v),
        [
            {"": "x"},
            {"Bad Name": "x"},
            {SURROGATE: "x"},
            {"X\x01": "x"},
            {"é": "x"},
            {"x" * 9000: "x"},
            {"X-A": "1", "x-a": "2"},
            {"Authorization": "1", "AUTHORIZATION": "2"},
            {f"X-{n}": "v" for n in range(33)},
            {"Content-Length": "1"},
            {"tickwheel-attempt": "1"},
        ],
    ),
    *cases(
        "callback.body",
        lambda v: callback(body=v),
        [
            SURROGATE,
            "x" * 70_000,
            {"a": NAN},
            [INF],
            {SURROGATE: 1},
            {"x": "x" * 70_000},
            TOO_DEEP,
            FAR_TOO_DEEP,
        ],
    ),
    *cases("callback.extra", lambda v: callback(extra=v), [1]),
    *cases("retry", lambda v: timer(retry=v), ["x", 1, [], True]),
    *cases(
        "retry.max_attempts",
        lambda v: retry(max_attempts=v),
        [HUGE, -HUGE, -1, 0, 1001, 1.5, 3.0, True, NAN, INF, "3", None, LONG],
    ),
    *cases(
        "retry.min_backoff", lambda v: retry(min_backoff=v), [*NOT_SECONDS, None, 7 * DAY_S + 1]
    ),
    *cases("retry.min_backoff", lambda v: retry(min_backoff=v, max_backoff=v), [2.5e11]),
    *cases("retry.min_backoff", lambda v: retry(min_backoff=v, max_backoff=1), [10]),
    *cases(
        "retry.max_backoff", lambda v: retry(max_backoff=v), [*NOT_SECONDS, None, 7 * DAY_S + 1]
    ),
    *cases(
        "retry.timeout",
        lambda v: retry(timeout=v),
        [*NOT_SECONDS, None, 0, -0.0, 1e-400, 1800.001, 1801, 253_402_300_799],
    ),
    *cases(
        "retry.max_retry",
        lambda v: retry(max_retry=v),
        [*NOT_SECONDS, 365 * DAY_S + 1, 2.5e11],
    ),
    *cases("retry.extra", lambda v: retry(extra=v), [1]),
    *cases(
        "payload",
        lambda v: {"delay": 1, "payload": v},
        [NAN, [INF], {"a": -INF}, SURROGATE, {SURROGATE: 1}, "x" * 70_000, TOO_DEEP, FAR_TOO_DEEP],
    ),
    *cases("unknown", lambda v: timer(unknown=v), [1]),
]


@pytest.mark.parametrize(("body", "field"), CREATE_CASES)
async def test_create_refuses_naming_the_field(
    client: httpx.AsyncClient, store: MemoryStore, body: dict[str, Any], field: str
) -> None:
    response = await client.post("/v1/timers", content=raw(body), headers=JSON)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == field
    assert (await store.stats()).counts[State.SCHEDULED] == 0


async def test_batch_refuses_each_item_naming_its_field(client: httpx.AsyncClient) -> None:
    bodies = [param.values[0] for param in CREATE_CASES]
    response = await client.post("/v1/timers/batch", content=raw({"timers": bodies}), headers=JSON)
    assert response.status_code == 200, response.text
    got = [
        (item["status"], (item["error"] or {}).get("field")) for item in response.json()["results"]
    ]
    assert got == [(422, param.values[1]) for param in CREATE_CASES]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        *cases("timers", lambda v: {"timers": v}, [HUGE, NAN, "x", None, {}, [], [{}] * 1001]),
        *cases("extra", lambda v: {"timers": [timer()], "extra": v}, [1]),
    ],
)
async def test_batch_refuses_a_bad_list(
    client: httpx.AsyncClient, body: dict[str, Any], field: str
) -> None:
    response = await client.post("/v1/timers/batch", content=raw(body), headers=JSON)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == field


@pytest.mark.parametrize(
    ("body", "field"),
    [
        *cases("due", lambda v: {"due": v}, [*NOT_SECONDS, SURROGATE, "2030-01-01T00:00:00"]),
        *cases("delay", lambda v: {"delay": v}, [*NOT_SECONDS, 1e308]),
        *cases("due", lambda v: v, [{}, {"due": 1, "delay": 1}]),
        *cases("extra", lambda v: {"delay": 1, "extra": v}, [1]),
    ],
)
async def test_reschedule_refuses_naming_the_field(
    client: httpx.AsyncClient, body: dict[str, Any], field: str
) -> None:
    assert (await client.post("/v1/timers", json=timer(id="t"))).status_code == 201
    response = await client.patch("/v1/timers/t", content=raw(body), headers=JSON)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == field


@pytest.mark.parametrize(
    "body",
    [
        retry(timeout=1800),
        retry(timeout=0.001),
        retry(min_backoff=7 * DAY_S, max_backoff=7 * DAY_S),
        retry(max_retry=365 * DAY_S),
        retry(max_retry=0),
        callback(headers={"X": "tab\tand space, visible ~!"}),
        callback(headers={"X": "non-ASCII: é ü 日本 \U0001f4a5"}),
        callback(headers={"X-A": "1", "X-B": "2"}),
        callback(body=TOO_DEEP[0]),
        {"delay": 1, "payload": TOO_DEEP[0]},
        timer(callback={"url": "https://" + "a" * 63 + ".example.com/"}),
        timer(callback={"url": "https://" + "a." * 124 + "com/"}),  # 251 characters of host
        timer(callback={"url": "https://example.com./"}),
        timer(callback={"url": "https://a_b.example.com/"}),
        timer(callback={"url": "https://bücher.example/"}),
        timer(callback={"url": "https://xn--bcher-kva.example/"}),
        timer(callback={"url": "http://1.1.1.1/"}),
        timer(callback={"url": "http://[2606:4700:4700::1111]:8080/"}),
    ],
    ids=lambda body: json.dumps(body)[:60],
)
async def test_values_at_the_bounds_are_accepted(
    client: httpx.AsyncClient, body: dict[str, Any]
) -> None:
    response = await client.post("/v1/timers", json=body)
    assert response.status_code == 201, response.text


# --- callback bodies as JSON -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "sent"),
    [
        ({"order": 42, "tags": ["a", "b"]}, '{"order":42,"tags":["a","b"]}'),
        ({"name": "José 日本"}, '{"name":"José 日本"}'),
        ([1, 2.5, None, True], "[1,2.5,null,true]"),
        (42, "42"),
        (1.5, "1.5"),
        (False, "false"),
        ({}, "{}"),
    ],
)
async def test_json_body_is_stored_compact_with_a_json_content_type(
    client: httpx.AsyncClient, store: MemoryStore, body: object, sent: str
) -> None:
    response = await client.post("/v1/timers", json=callback(body=body) | {"id": "j"})
    assert response.status_code == 201, response.text
    assert response.json()["callback"]["body"] == sent
    stored = await store.get("j")
    assert stored is not None
    assert stored.callback is not None
    assert stored.callback.body == sent
    assert stored.callback.headers == {"Content-Type": "application/json"}


async def test_json_body_keeps_the_timers_own_content_type(
    client: httpx.AsyncClient, store: MemoryStore
) -> None:
    headers = {"content-TYPE": "application/vnd.acme+json", "X-A": "1"}
    body = callback(body={"order": 42}, headers=headers) | {"id": "j"}
    assert (await client.post("/v1/timers", json=body)).status_code == 201
    stored = await store.get("j")
    assert stored is not None
    assert stored.callback is not None
    assert (stored.callback.body, stored.callback.headers) == ('{"order":42}', headers)


async def test_string_and_null_bodies_are_as_before(
    client: httpx.AsyncClient, store: MemoryStore
) -> None:
    for timer_id, body in (("s", '{"order": 42}'), ("n", None)):
        response = await client.post("/v1/timers", json=callback(body=body) | {"id": timer_id})
        assert response.status_code == 201, response.text
        stored = await store.get(timer_id)
        assert stored is not None
        assert stored.callback is not None
        assert (stored.callback.body, stored.callback.headers) == (body, {})


async def test_json_body_repeats_are_the_same_timer(client: httpx.AsyncClient) -> None:
    body = callback(body={"order": 42, "note": "é"}) | {"id": "r"}
    first = await client.post("/v1/timers", json=body)
    again = await client.post("/v1/timers", json=body)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json() == first.json()
    other = await client.post("/v1/timers", json=callback(body={"order": 43}) | {"id": "r"})
    assert other.status_code == 409


async def test_json_body_limit_counts_the_encoded_bytes(client: httpx.AsyncClient) -> None:
    # 2 bytes a character as sent (UTF-8), though 6 as an escaped \u00e9
    fits = callback(body={"n": "é" * ((MAX_BODY_BYTES - 10) // 2)})
    assert (await client.post("/v1/timers", json=fits)).status_code == 201
    over = callback(body={"n": "x" * (MAX_BODY_BYTES - 7)})  # {"n":"…"} is 8 bytes more
    response = await client.post("/v1/timers", json=over)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == "callback.body"


async def test_openapi_says_a_body_may_be_json(client: httpx.AsyncClient) -> None:
    schema = (await client.get("/openapi.json")).json()["components"]["schemas"]["CallbackIn"]
    description = schema["properties"]["body"]["description"]
    assert "JSON" in description
    assert "Content-Type" in description


async def test_json_body_reaches_the_receiver_as_json(
    make_client: ClientFactory, store: MemoryStore
) -> None:
    async with Receiver() as receiver, make_client(allow_private_targets=True) as client:
        body = {"id": "e", "delay": 0, "callback": {"url": receiver.url, "body": {"order": 42}}}
        assert (await client.post("/v1/timers", json=body)).status_code == 201
        stored = await store.get("e")
        assert stored is not None
        target = HttpTarget(HttpSettings(allow_private_targets=True))
        try:
            assert await target.fire(stored, 1) == ACKED
        finally:
            await target.close()
        [got] = receiver.received
    assert got.body == b'{"order":42}'
    assert got.headers["content-type"] == "application/json"
