"""Every route the app serves, probed as an attacker would: no token, invented query parameters,
invented methods. A handler parameter that FastAPI reads from the query string once let
``/dashboard?name=/etc/passwd`` hand out any file."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry
from starlette.routing import Route

from tickwheel.model import Callback, Timer
from tickwheel.service.api import create_app
from tickwheel.service.settings import ServiceSettings
from tickwheel.stores.base import Store
from tickwheel.stores.memory import MemoryStore
from tickwheel.stores.redis import RedisStore

TOKEN = "route-walk-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
# what the old dashboard handler read from the query string, and what any handler might
PROBES = {"name": "/etc/passwd", "media_type": "text/plain", "path": "/proc/self/cmdline"}
OPEN = {
    "/healthz", "/openapi.json", "/dashboard", "/dashboard.js", "/docs", "/docs.js",
    "/docs/swagger-ui-bundle.js", "/docs/swagger-ui.css",
}  # fmt: skip


@asynccontextmanager
async def served(
    store: Store, registry: CollectorRegistry | None = None, **settings: Any
) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(ServiceSettings(store_url="memory://", **settings), store, registry=registry)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        yield client


def flatten(routes: Iterable[Any]) -> Iterator[Route]:
    """The routes of an app, those of included routers among them."""
    for route in routes:
        if isinstance(route, Route):
            yield route
        else:  # an included router, however this FastAPI wraps it
            yield from flatten(getattr(route, "original_router", route).routes)


def plausible(path: str) -> str:
    """`path` with its parameters filled with plausible ids."""
    for parameter, value in (
        ("{timer_id}", "some-timer"),
        ("{schedule_id}", "some-schedule"),
        ("{queue}", "some-queue"),
        ("{host:path}", "api.example.com"),
        ("{host}", "api.example.com"),
    ):
        path = path.replace(parameter, value)
    return path


def routes() -> Iterator[tuple[str, str]]:
    """Every (method, path) the app answers, path parameters filled with a plausible id."""
    app = create_app(ServiceSettings(store_url="memory://"), MemoryStore())
    for route in flatten(app.routes):
        for method in sorted(route.methods or ()):
            if method != "HEAD":
                yield method, plausible(route.path)


ROUTES = sorted(routes())
STREAMS = {"/v1/events"}


def test_the_walk_covers_every_documented_operation_and_the_pages() -> None:
    document = create_app(ServiceSettings(store_url="memory://"), MemoryStore()).openapi()
    documented = {
        (method.upper(), plausible(path))
        for path, operations in document["paths"].items()
        for method in operations
    }
    assert documented <= set(ROUTES)
    assert {("GET", path) for path in OPEN} <= set(ROUTES)


@pytest.mark.parametrize(("method", "path"), ROUTES)
async def test_without_a_token_only_the_open_paths_answer(method: str, path: str) -> None:
    async with served(MemoryStore(), token=TOKEN) as client:
        response = await client.request(method, path, json={})
    if path in OPEN:
        assert response.status_code == 200, response.text
    else:
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "unauthorized"
    assert b"root:x:0:0:" not in response.content  # /etc/passwd
    assert TOKEN not in response.text


@pytest.mark.parametrize(("method", "path"), ROUTES)
async def test_no_route_accepts_a_query_parameter_it_does_not_declare(
    method: str, path: str
) -> None:
    async with served(MemoryStore(), token=TOKEN) as client:
        # the event stream answers for as long as it is read: only its refusal is asked for
        plain = None if path in STREAMS else await client.request(method, path, headers=AUTH)
        probed = await client.request(method, path, params=PROBES, headers=AUTH)
    if path in OPEN - {"/healthz"}:
        assert plain is not None
        # static: the query string is never read, so it changes nothing
        assert (probed.status_code, probed.content) == (plain.status_code, plain.content)
        assert probed.headers["content-type"] == plain.headers["content-type"]
    else:
        assert probed.status_code == 400, probed.text
        error = probed.json()["error"]
        assert error["code"] == "bad_request"
        assert error["field"] in PROBES
        assert "unknown query parameter" in error["message"]


@pytest.mark.parametrize("path", ["/dashboard", "/dashboard.js", "/docs", "/docs.js"])
async def test_the_static_pages_hand_out_their_own_file_whatever_is_asked(path: str) -> None:
    async with served(MemoryStore()) as client:
        plain = await client.get(path)
        for probe in ("/etc/passwd", "../../../../etc/passwd", "tickwheel.db", "api.py"):
            for name in ("name", "media_type", "file", "path"):
                response = await client.get(path, params={name: probe})
                assert response.content == plain.content
                assert response.headers["content-type"] == plain.headers["content-type"]
    assert "default-src 'none'" in plain.headers["content-security-policy"]


async def test_a_declared_parameter_given_twice_is_refused() -> None:
    async with served(MemoryStore()) as client:
        response = await client.get("/v1/timers?limit=1&limit=1000")
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "limit"


async def test_a_filter_the_route_does_not_have_is_refused_not_ignored() -> None:
    store = MemoryStore()
    now_ms = store.now_ms()
    await store.add(Timer(id="q1-timer", due_ms=now_ms + 60_000, queue="q1", payload=1))
    await store.add(Timer(id="q2-timer", due_ms=now_ms + 60_000, queue="q2", payload=2))
    async with served(store) as client:
        filtered = await client.get("/v1/timers", params={"queue": "q1"})
        response = await client.get("/v1/timers", params={"host": "example.com"})
    assert [timer["id"] for timer in filtered.json()["timers"]] == ["q1-timer"]
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "host"


def series(registry: CollectorRegistry, name: str) -> list[dict[str, str]]:
    return [
        sample.labels
        for metric in registry.collect()
        for sample in metric.samples
        if sample.name == name
    ]


async def test_metric_labels_come_from_a_fixed_set() -> None:
    registry = CollectorRegistry()
    async with served(MemoryStore(), registry, token=TOKEN) as client:
        for n in range(300):
            await client.request(f"X{n}METHOD", "/v1/timers", headers=AUTH)
            await client.request(f"Y{n}", f"/no/such/{n}", headers=AUTH)
            await client.get(f"/v1/timers/{uuid.uuid4().hex}", headers=AUTH)
        await client.get("/v1/stats", headers=AUTH)
        await client.get("/dashboard")
        await client.get("/openapi.json")
    labels = series(registry, "tickwheel_http_requests_total")
    assert {label["method"] for label in labels} == {"GET", "OTHER"}
    assert {label["route"] for label in labels} == {
        "/v1/timers",
        "/v1/timers/{timer_id}",
        "/v1/stats",
        "/dashboard",
        "/openapi.json",
        "unmatched",
    }
    assert len(labels) <= 8


async def test_requests_without_the_token_create_no_series() -> None:
    registry = CollectorRegistry()
    async with served(MemoryStore(), registry, token=TOKEN) as client:
        for n in range(100):
            await client.request(f"M{n}", f"/v1/timers/{n}")
            await client.get("/v1/stats", headers={"Authorization": "Bearer wrong"})
        before = len(series(registry, "tickwheel_http_requests_total"))
        await client.get("/v1/stats", headers=AUTH)
    assert before == 0
    assert len(series(registry, "tickwheel_http_requests_total")) == 1


async def test_leased_timers_page_through_the_api_on_redis(redis_server: Any) -> None:
    store = RedisStore.from_url(redis_server.url, prefix=f"t{uuid.uuid4().hex[:12]}", shards=4)
    try:
        now_ms = store.now_ms()
        callback = Callback(url="https://example.com/hook")
        await store.add_many(
            [Timer(id=f"leased-{n:02}", due_ms=now_ms - 1, callback=callback) for n in range(25)]
        )
        assert len(await store.claim("default", store.now_ms(), 100, 60_000)) == 25
        async with served(store) as client:
            seen: list[str] = []
            cursor = None
            for _ in range(30):
                params: dict[str, Any] = {"state": "leased", "limit": 4}
                if cursor is not None:
                    params["cursor"] = cursor
                response = await client.get("/v1/timers", params=params)
                assert response.status_code == 200, response.text
                page = response.json()
                seen += [timer["id"] for timer in page["timers"]]
                cursor = page["cursor"]
                if cursor is None:
                    break
        assert sorted(seen) == [f"leased-{n:02}" for n in range(25)]
    finally:
        await store.close()
