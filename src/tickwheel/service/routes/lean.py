"""`JsonBodyRoute`: a route that reads one JSON body model and answers its response model,
without FastAPI's per-request dependency solving.

FastAPI's request handler parses the content type with `email.message`, solves the
dependencies of every parameter, validates the returned model again and builds closures per
request: about a third of the CPU of ``POST /v1/timers``, the route every client waits on. This
route does what that route needs, in the same way and with the same errors: the body read
with `json.loads`, validated by the route's own body field (422s as FastAPI words them), the
endpoint called with the model, the `Request` and a `Response` for the status, and the model
it returns encoded once by pydantic.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import TypeAdapter
from starlette.exceptions import HTTPException

from tickwheel.service.routes.deps import check_query


class JsonBodyRoute(APIRoute):
    """A route whose handler takes one body model, the `Request` and the `Response`, and
    returns its response model; it refuses any query parameter (400).

    Raises:
        TypeError: at startup, for an endpoint with other parameters or no response model.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        dependant = self.dependant
        body = self.body_field
        others = dependant.path_params + dependant.query_params + dependant.header_params
        if (
            body is None
            or len(dependant.body_params) != 1
            or others
            or dependant.cookie_params
            or dependant.dependencies
            or dependant.request_param_name is None
            or dependant.response_param_name is None
            or self.response_model is None
        ):
            raise TypeError(f"{self.path}: a JsonBodyRoute takes a body model, Request, Response")
        call = self.endpoint
        names = (body.name, dependant.request_param_name, dependant.response_param_name)
        encode = TypeAdapter(self.response_model).dump_json
        default_status = self.status_code or 200

        async def handle(request: Request) -> Response:
            if request.scope["query_string"]:
                check_query(request, set())
            item = _validated(body.validate, await request.body())
            answer = Response()  # what the endpoint sets: status, headers (as FastAPI's)
            del answer.headers["content-length"]
            answer.status_code = 0  # none set: the route's own
            result = await call(**dict(zip(names, (item, request, answer), strict=True)))
            response = Response(
                encode(result),
                status_code=answer.status_code or default_status,
                media_type="application/json",
            )
            response.headers.raw.extend(answer.headers.raw)
            return response

        return handle


def _validated(validate: Callable[..., tuple[Any, list[Any]]], raw: bytes) -> Any:
    """The body read as FastAPI reads it, with FastAPI's errors: missing, JSON that does not
    parse (422 ``json_invalid``), bytes that are no text (400), fields (422)."""
    if not raw:
        missing = {"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}
        raise RequestValidationError([missing])
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as error:
        detail = {
            "type": "json_invalid",
            "loc": ("body", error.pos),
            "msg": "JSON decode error",
            "input": {},
            "ctx": {"error": error.msg},
        }
        raise RequestValidationError([detail], body=error.doc) from error
    except Exception as error:  # not UTF-8, or nested too deeply: FastAPI's one 400
        raise HTTPException(400, "There was an error parsing the body") from error
    item, errors = validate(value, {}, loc=("body",))
    if errors:
        raise RequestValidationError(errors, body=value)
    return item
