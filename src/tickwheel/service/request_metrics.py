"""`RequestMetrics`: the ASGI middleware that counts and times the API's requests."""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tickwheel.service.dashboard import PAGES

KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
UNMATCHED = "unmatched"
_PLAIN_PATHS = frozenset({*PAGES, "/openapi.json"})


class RequestMetrics:
    """Count requests and time them, by method, route template and status.

    Every label comes from a fixed set, so no request can grow the series: a method we do not
    know counts as ``OTHER``, a path no route matches as ``unmatched``. Requests refused for a
    missing or wrong token are not counted at all: before the token, a caller earns nothing.
    """

    def __init__(self, app: ASGIApp, *, requests: Counter, seconds: Histogram) -> None:
        self.app = app
        self.requests = requests
        self.seconds = seconds

    @staticmethod
    def series(registry: CollectorRegistry) -> dict[str, Any]:
        """Register the request counter and timer in `registry`; pass them to the middleware.

        Made with the app rather than with the middleware stack, which Starlette builds only
        on the first request: ``/metrics`` lists them from the start.
        """
        return {
            "requests": Counter(
                "tickwheel_http_requests",
                "HTTP requests answered, by method, route and status.",
                ["method", "route", "status"],
                registry=registry,
            ),
            "seconds": Histogram(
                "tickwheel_http_request_duration_seconds",
                "Time to answer an HTTP request, by method and route.",
                ["method", "route"],
                registry=registry,
            ),
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500
        start = time.perf_counter()

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            if status != 401:
                self._count(scope, status, time.perf_counter() - start)

    def _count(self, scope: Scope, status: int, seconds: float) -> None:
        method = scope["method"] if scope["method"] in KNOWN_METHODS else "OTHER"
        route = scope.get("route")
        if isinstance(route, Route):
            template = route.path
        elif scope["path"] in _PLAIN_PATHS:  # plain routes do not name themselves in the scope
            template = scope["path"]
        else:
            template = UNMATCHED
        self.requests.labels(method, template, str(status)).inc()
        self.seconds.labels(method, template).observe(seconds)
