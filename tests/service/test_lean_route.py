"""`JsonBodyRoute` answers every body as FastAPI's own route does, and refuses an endpoint it
cannot serve when the app is built."""

from __future__ import annotations

import httpx
import pytest
from fastapi import APIRouter, FastAPI, Request, Response

from tickwheel.service.errors import install_error_handlers
from tickwheel.service.routes.lean import JsonBodyRoute
from tickwheel.service.schemas import TimerIn

BODIES = [
    b'{"delay": 5, "callback": {"url": "https://example.com/hook"}}',
    b'{"delay": 5, "id": "job-1", "callback": {"url": "https://example.com/hook"}}',
    b"",
    b"{",
    b"null",
    b"[]",
    b'{"delay": "soon"}',
    b'{"delay": 5, "unknown": 1}',
    b'{"delay": 5, "callback": {"url": 7}}',
    b"\xff\xfe{}",
    b"[" * 100_000 + b"]" * 100_000,
    b'{"delay": NaN}',
]


async def echo(item: TimerIn, response: Response, request: Request) -> TimerIn:
    """Answer the body as read; 200 for a body with an id, to show a status set by the route."""
    if item.id is not None:
        response.status_code = 200
        response.headers["x-id"] = item.id
    return item


def _app(route_class: type | None) -> FastAPI:
    router = APIRouter()
    router.add_api_route(
        "/t", echo, methods=["POST"], status_code=201, route_class_override=route_class
    )
    app = FastAPI()
    app.include_router(router)
    install_error_handlers(app)
    return app


@pytest.mark.parametrize("raw", BODIES, ids=range(len(BODIES)))
async def test_every_body_is_answered_as_fastapi_answers_it(raw: bytes) -> None:
    answers = []
    for route_class in (None, JsonBodyRoute):
        transport = httpx.ASGITransport(app=_app(route_class))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            answer = await client.post(
                "/t", content=raw, headers={"content-type": "application/json"}
            )
        answers.append((answer.status_code, answer.headers.get("x-id"), answer.json()))
    assert answers[0] == answers[1]


def test_an_endpoint_with_other_parameters_is_refused_when_built() -> None:
    async def paged(item: TimerIn, response: Response, request: Request, page: int = 1) -> TimerIn:
        return item

    router = APIRouter()
    with pytest.raises(TypeError, match="JsonBodyRoute"):
        router.add_api_route("/t", paged, methods=["POST"], route_class_override=JsonBodyRoute)
