"""`Gate`: the ASGI middleware that refuses a request before any route parses it.

It checks, in this order, the size of the request headers (431), the Host and, for a
state-changing request, the Origin (421, 403: `origin.Origins`), the bearer token (401), the
body's size by ``Content-Length`` and as it streams in (413), and that a body, or the declared
type of a state-changing request's body, is JSON (415).
"""

from __future__ import annotations

import hmac

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tickwheel.service.api_errors import ApiError, error_response
from tickwheel.service.origin import SAFE_METHODS, Origins
from tickwheel.service.schemas import ErrorDetail
from tickwheel.service.settings import ServiceSettings
from tickwheel.service.tenants import SCOPE_KEY, tenants_of

MAX_REQUEST_HEADER_BYTES = 32 * 1024
"""Request headers in all, counted as ``name: value\\r\\n``; `tickwheel serve`'s HTTP protocol
(`protocol.BoundedHttpTools`) refuses larger ones as they arrive, this gate under any server."""


_CLOSING = frozenset({413, 431})
"""Refusals after which the connection closes: the rest of such a request is not read."""


class Gate:
    """Refuse a request before it is parsed: headers too large (431), a Host not served (421),
    another site's page changing state (403), bad token (401), body too large (413), not JSON
    (415).

    The body is read here, counted against `max_body_bytes` as it streams in, and handed on
    whole, so no route ever parses more than the limit. ``/healthz``, ``/docs`` (and its files)
    and ``/openapi.json`` need no token; everything else does when one is set, ``/metrics``
    included.
    """

    OPEN_PATHS = frozenset(
        {
            "/healthz",
            "/docs",
            "/docs.js",
            "/docs/swagger-ui-bundle.js",
            "/docs/swagger-ui.css",
            "/openapi.json",
            "/dashboard",
            "/dashboard.js",
        }
    )

    def __init__(self, app: ASGIApp, *, settings: ServiceSettings) -> None:
        self.app = app
        self.max_body_bytes = settings.max_body_bytes
        self.origins = Origins(settings.host, settings.allowed_hosts)
        self.token = None if settings.token is None else settings.token.encode()
        self.tenants = tenants_of(settings.tenants, settings.token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal = (
            _headers_too_large(scope)
            or self.origins.refuse(scope["method"], scope["path"], headers)
            or self._authorize(scope, headers)
            or self._declared_size(headers)
        )
        body = b""
        if refusal is None:
            body, refusal = await self._read(receive)
        if refusal is None and _not_json(scope["method"], body, headers):
            refusal = ApiError(415, "send the body as JSON with Content-Type: application/json")
        if refusal is not None:
            extra = {"WWW-Authenticate": "Bearer"} if refusal.status == 401 else {}
            if refusal.status in _CLOSING:
                extra["Connection"] = "close"
            detail = ErrorDetail(code=refusal.code, message=refusal.message, field=refusal.field)
            await error_response(refusal.status, detail, extra)(scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)

    def _authorize(self, scope: Scope, headers: Headers) -> ApiError | None:
        """Check the token; with tenants, put the token's `Tenant` in the scope for the routes
        and refuse (403) what its role may not call."""
        path = scope["path"]
        if (self.token is None and self.tenants is None) or path in self.OPEN_PATHS:
            return None
        scheme, _, credentials = headers.get("authorization", "").partition(" ")
        given = credentials.strip().encode()
        bearer = scheme.lower() == "bearer"
        if self.tenants is not None:
            tenant = self.tenants.resolve(given) if bearer else None
            if tenant is not None:
                scope[SCOPE_KEY] = tenant
                refusal = tenant.refusal(scope["method"], path)
                return None if refusal is None else ApiError(403, refusal)
        elif bearer and self.token is not None and hmac.compare_digest(given, self.token):
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
    if size > MAX_REQUEST_HEADER_BYTES:
        limit = MAX_REQUEST_HEADER_BYTES
        return ApiError(431, f"the request headers are over the limit of {limit} bytes")
    return None


def _not_json(method: str, body: bytes, headers: Headers) -> bool:
    """Whether the body is not JSON; a state-changing request declaring another type counts
    even when empty, as a cross-site form POST does."""
    content_type = headers.get("content-type")
    if body:
        return not _is_json(content_type or "")
    return method not in SAFE_METHODS and content_type is not None and not _is_json(content_type)


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
