"""Every failure of the HTTP API as ``{"error": {"code", "message", "field"}}`` with its status.

`Gate` refuses what must not reach a route (no token, too large, not JSON); the handlers
answer what the routes and FastAPI raise.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tickwheel.errors import Closed, InvalidArgument, StoreUnavailable, TimerExists
from tickwheel.service.schemas import ErrorDetail
from tickwheel.service.settings import ServiceSettings

logger = logging.getLogger("tickwheel.service")

RETRY_AFTER_S = 1
"""What a 503 asks clients to wait: the store is usually back within a second or two."""
MAX_FIELD_CHARS = 200

_CODES = {
    400: "bad_request",
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "invalid",
    431: "headers_too_large",
    503: "store_unavailable",
}
# pydantic error types that mean the body is not JSON at all, rather than JSON of the wrong shape
_NOT_JSON = frozenset({"json_invalid"})


class ApiError(Exception):
    """An error the routes raise on purpose, answered as it says."""

    def __init__(
        self, status: int, message: str, *, code: str | None = None, field: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code or _CODES.get(status, "error")
        self.message = message
        self.field = field


def error_detail(status: int, message: str, field: str | None = None) -> ErrorDetail:
    """Describe an error with the code its status stands for."""
    return ErrorDetail(code=_CODES.get(status, "error"), message=message, field=field)


def error_response(
    status: int,
    detail: ErrorDetail,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """Answer with `detail` as the error body."""
    body = {"error": {key: _printable(value) for key, value in detail.model_dump().items()}}
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
        return (
            error.status,
            ErrorDetail(code=error.code, message=error.message, field=error.field),
            {},
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
    if isinstance(error, TimerExists):
        return 409, error_detail(409, str(error), "id"), {}
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
        return error_response(status, detail, headers)

    for kind in (
        ApiError,
        RequestValidationError,
        HTTPException,
        InvalidArgument,
        TimerExists,
        StoreUnavailable,
        Closed,
        Exception,
    ):
        app.add_exception_handler(kind, handle)


MAX_HEADER_BYTES = 32 * 1024
"""Request headers in all; `tickwheel serve` makes its HTTP parser (h11) refuse larger ones too."""


class Gate:
    """Refuse a request before it is parsed: headers too large (431), bad token (401), body too
    large (413), not JSON (415).

    The body is read here, counted against `max_body_bytes` as it streams in, and handed on
    whole, so no route ever parses more than the limit. ``/healthz``, ``/docs`` and
    ``/openapi.json`` need no token; everything else does when one is set, ``/metrics`` included.
    """

    OPEN_PATHS = frozenset(
        {
            "/healthz",
            "/docs",
            "/docs.js",
            "/openapi.json",
            "/dashboard",
            "/dashboard.js",
        }
    )

    def __init__(self, app: ASGIApp, *, settings: ServiceSettings) -> None:
        self.app = app
        self.max_body_bytes = settings.max_body_bytes
        self.token = None if settings.token is None else settings.token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal = (
            _headers_too_large(scope)
            or self._authorize(scope["path"], headers)
            or self._declared_size(headers)
        )
        body = b""
        if refusal is None:
            body, refusal = await self._read(receive)
        if refusal is None and body and not _is_json(headers.get("content-type", "")):
            refusal = ApiError(415, "send the body as JSON with Content-Type: application/json")
        if refusal is not None:
            extra = {"WWW-Authenticate": "Bearer"} if refusal.status == 401 else {}
            detail = ErrorDetail(code=refusal.code, message=refusal.message, field=refusal.field)
            await error_response(refusal.status, detail, extra)(scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)

    def _authorize(self, path: str, headers: Headers) -> ApiError | None:
        if self.token is None or path in self.OPEN_PATHS:
            return None
        scheme, _, credentials = headers.get("authorization", "").partition(" ")
        given = credentials.strip().encode()
        if scheme.lower() == "bearer" and hmac.compare_digest(given, self.token):
            return None
        return ApiError(401, "a valid bearer token is required (Authorization: Bearer <token>)")

    def _declared_size(self, headers: Headers) -> ApiError | None:
        declared = headers.get("content-length")
        if declared is None:
            return None
        if not declared.isdigit():
            return ApiError(400, f"Content-Length is not a number: {declared[:20]!r}")
        if int(declared) > self.max_body_bytes:
            return self._too_large()
        return None

    async def _read(self, receive: Receive) -> tuple[bytes, ApiError | None]:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return b"", None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                return b"", self._too_large()
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks), None

    def _too_large(self) -> ApiError:
        return ApiError(413, f"the body is over the limit of {self.max_body_bytes} bytes")


def _headers_too_large(scope: Scope) -> ApiError | None:
    size = sum(len(name) + len(value) + 4 for name, value in scope["headers"])
    if size > MAX_HEADER_BYTES:
        return ApiError(431, f"the request headers are over the limit of {MAX_HEADER_BYTES} bytes")
    return None


def _is_json(content_type: str) -> bool:
    media = content_type.partition(";")[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def _replay(body: bytes, receive: Receive) -> Receive:
    """Return a `receive` that yields `body` once, then whatever the client sends next."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay
