"""Every failure of the HTTP API as ``{"error": {"code", "message", "field"}}`` with its status.

`ApiError` is what routes raise on purpose; `describe` turns any error into a status, a detail
and headers; the handlers answer what the routes and FastAPI raise. The `Gate` (gate.py) uses
the same shape for what it refuses before a route runs.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException

from tickwheel.errors import (
    CapReached,
    Closed,
    InvalidArgument,
    NotReplicated,
    ScheduleExists,
    StoreUnavailable,
    TimerExists,
)
from tickwheel.service.schemas import ErrorDetail

logger = logging.getLogger("tickwheel.service")

RETRY_AFTER_S = 1
"""What a 503 asks clients to wait: the store is usually back within a second or two."""
MAX_FIELD_CHARS = 200

_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "invalid",
    431: "headers_too_large",
    503: "store_unavailable",
    507: "not_replicated",
}
NOT_REPLICATED = 507
"""A write stored on the Redis master that no replica confirmed (`NotReplicated`). Not 503: the
timer exists, and a client that retried a create without an id would make a second one; 507
("could not store what the request needs") is retried by no common client or proxy policy."""
# pydantic error types that mean the body is not JSON at all, rather than JSON of the wrong shape
_NOT_JSON = frozenset({"json_invalid"})


class ApiError(Exception):
    """An error the routes raise on purpose, answered as it says."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        field: str | None = None,
        retry_after_s: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code or _CODES.get(status, "error")
        self.message = message
        self.field = field
        self.retry_after_s = retry_after_s


def error_detail(status: int, message: str, field: str | None = None) -> ErrorDetail:
    """Describe an error with the code its status stands for."""
    return ErrorDetail(code=_CODES.get(status, "error"), message=message, field=field)


def error_response(
    status: int,
    detail: ErrorDetail,
    headers: Mapping[str, str] | None = None,
    ids: Sequence[str] = (),
) -> JSONResponse:
    """Answer with `detail` as the error body, and `ids` beside it when the error names the
    timers or schedules that were written all the same."""
    body: dict[str, Any] = {
        "error": {key: _printable(value) for key, value in detail.model_dump().items()}
    }
    if ids:
        body["ids"] = list(ids)
    return JSONResponse(body, status_code=status, headers=dict(headers or {}))


def _printable(text: str | None) -> str | None:
    # a field name echoed from a JSON key may hold a lone surrogate, which UTF-8 cannot encode
    return None if text is None else text.encode("utf-8", "backslashreplace").decode()


def field_path(loc: Sequence[int | str]) -> str | None:
    """Join a pydantic error location into a dotted field, without its ``body``/``query`` root."""
    parts = [str(part) for part in loc]
    if parts and parts[0] in {"body", "query", "path", "header"}:
        parts = parts[1:]
    return ".".join(parts)[:MAX_FIELD_CHARS] or None


def validation_detail(errors: Sequence[Any]) -> tuple[int, ErrorDetail]:
    """Turn pydantic's errors into one status and detail: the first error, and how many more."""
    first = errors[0] if errors else {"type": "invalid", "loc": (), "msg": "invalid request"}
    if first["type"] in _NOT_JSON:
        return 400, ErrorDetail(code="invalid_json", message="the body is not valid JSON")
    message = str(first["msg"]).removeprefix("Value error, ")
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more errors)"
    return 422, error_detail(422, message, field_path(first["loc"]))


def describe(error: Exception) -> tuple[int, ErrorDetail, dict[str, str]]:
    """Return the status, detail and headers that answer `error`."""
    if isinstance(error, ApiError):
        wait_s = error.retry_after_s
        return (
            error.status,
            ErrorDetail(code=error.code, message=error.message, field=error.field),
            {} if wait_s is None else {"Retry-After": str(wait_s)},
        )
    if isinstance(error, RequestValidationError | ValidationError):
        return (*validation_detail(error.errors()), {})
    if isinstance(error, HTTPException):
        message = error.detail if isinstance(error.detail, str) else "request failed"
        if error.status_code == 400:
            # FastAPI's only 400: a body that is not UTF-8, or JSON nested too deeply to parse
            message = "the body could not be parsed as JSON"
        return error.status_code, error_detail(error.status_code, message), {}
    if isinstance(error, InvalidArgument):
        message = str(error).removeprefix(f"{error.argument}: ")
        return 422, error_detail(422, message, error.argument), {}
    if isinstance(error, TimerExists | ScheduleExists):
        return 409, error_detail(409, str(error), "id"), {}
    if isinstance(error, NotReplicated):
        named = f" {', '.join(error.ids)}" if error.ids else ""
        message = (
            f"stored{named}, but no replica confirmed it in time: it stands unless the "
            "store's master fails first; check it by id rather than send it again"
        )
        return NOT_REPLICATED, error_detail(NOT_REPLICATED, message), {}
    if isinstance(error, CapReached):
        # no Retry-After: the cap holds until something is deleted or the operator raises it
        return 429, ErrorDetail(code="cap_reached", message=str(error), field=error.field), {}
    if isinstance(error, StoreUnavailable | Closed):
        # the cause (a host, a path) is the operator's business: it goes to the log
        detail = error_detail(503, "the timer store is unavailable; try again shortly")
        return 503, detail, {"Retry-After": str(RETRY_AFTER_S)}
    return 500, ErrorDetail(code="internal", message="internal error"), {}


def install_error_handlers(app: FastAPI) -> None:
    """Answer every error the routes and FastAPI raise in the error shape."""

    async def handle(request: Request, error: Exception) -> JSONResponse:
        status, detail, headers = describe(error)
        if status == 503:
            logger.warning("%s %s: store unavailable: %s", request.method, request.url.path, error)
        elif status == NOT_REPLICATED:
            logger.warning("%s %s: %s", request.method, request.url.path, error)
        ids = error.ids if isinstance(error, NotReplicated) else ()
        return error_response(status, detail, headers, ids)

    for kind in (
        ApiError,
        RequestValidationError,
        HTTPException,
        InvalidArgument,
        TimerExists,
        ScheduleExists,
        CapReached,
        StoreUnavailable,
        Closed,
        Exception,
    ):
        app.add_exception_handler(kind, handle)
