"""`RequestMetrics`: the ASGI middleware that counts and times the API's requests."""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tickwheel.service.dashboard import PAGES
from tickwheel.service.tenants import SCOPE_KEY

KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
UNMATCHED = "unmatched"
NO_TENANT = "none"
"""The tenant label of a request that carried no token (an open path such as ``/healthz``)."""
_PLAIN_PATHS = frozenset({*PAGES, "/openapi.json"})


class RequestMetrics:
    """Count requests and time them, by method, route template and status.

    Every label comes from a fixed set, so no request can grow the series: a method we do not
    know counts as ``OTHER``, a path no route matches as ``unmatched``. Requests refused for a
    missing or wrong token are not counted at all: before the token, a caller earns nothing.
    With a tokens file, a ``tenant`` label names the token's tenant: a set the file bounds.
    """

    def __init__(
        self, app: ASGIApp, *, requests: Counter, seconds: Histogram, by_tenant: bool
    ) -> None:
        self.app = app
        self.requests = requests
        self.seconds = seconds
        self.by_tenant = by_tenant
        # each label set's two series, found once: `labels()` costs a lock and tuples a call
        self._series: dict[tuple[object, ...], tuple[Counter, Histogram]] = {}

    @staticmethod
    def series(registry: CollectorRegistry, *, by_tenant: bool = False) -> dict[str, Any]:
        """Register the request counter and timer in `registry`; pass them to the middleware.

        Made with the app rather than with the middleware stack, which Starlette builds only
        on the first request: ``/metrics`` lists them from the start. `by_tenant` adds the
        ``tenant`` label, for a service with a tokens file only.
        """
        tenant = ["tenant"] if by_tenant else []
        return {
            "requests": Counter(
                "tickwheel_http_requests",
                "HTTP requests answered, by method, route and status (and tenant).",
                ["method", "route", "status", *tenant],
                registry=registry,
            ),
            "seconds": Histogram(
                "tickwheel_http_request_duration_seconds",
                "Time to answer an HTTP request, by method and route (and tenant).",
                ["method", "route", *tenant],
                registry=registry,
            ),
            "by_tenant": by_tenant,
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
        tenant: tuple[str, ...] = ()
        if self.by_tenant:
            named = scope.get(SCOPE_KEY)
            tenant = (NO_TENANT if named is None else named.name,)
        key = (method, template, status, *tenant)
        series = self._series.get(key)
        if series is None:  # the labels are from fixed sets: this dict stays as small
            series = self._series[key] = (
                self.requests.labels(method, template, str(status), *tenant),
                self.seconds.labels(method, template, *tenant),
            )
        series[0].inc()
        series[1].observe(seconds)
