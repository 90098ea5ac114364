"""`create_app`: the HTTP API over a timer store, with its OpenAPI document and metrics.

The routes live by resource in `routes/`; this module puts them together with the static pages,
the error handlers, the `Gate` and the request metrics.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from prometheus_client import CollectorRegistry
from starlette.routing import BaseRoute

from tickwheel.engine.changes import ChangeFeed
from tickwheel.service.api_errors import install_error_handlers
from tickwheel.service.dashboard import static_routes
from tickwheel.service.gate import Gate
from tickwheel.service.queue_cap import QueueCap
from tickwheel.service.quotas import Quotas
from tickwheel.service.request_metrics import RequestMetrics
from tickwheel.service.routes import (
    attempt_routes,
    bulk_routes,
    dead_routes,
    event_routes,
    limit_routes,
    ops_routes,
    queue_routes,
    schedule_routes,
    timer_routes,
)
from tickwheel.service.routes.deps import Context
from tickwheel.service.settings import ServiceSettings
from tickwheel.service.tenants import tenants_of
from tickwheel.stores.base import Store
from tickwheel.stores.open import open_store

DESCRIPTION = """Durable timers over HTTP: tickwheel calls a timer's callback (or hands its payload
to a queue consumer) at the due millisecond, at least once. A schedule (`/v1/schedules`) fires a
timer for each occurrence of a cron rule or an interval; those timers, with ids
`<schedule id>@<epoch ms>`, can be read and replayed but not moved, cancelled or paused (409):
pause, change or delete their schedule instead.

Flow control: a timer or a whole queue can be paused (`/v1/timers/{id}/pause`,
`/v1/queues/{queue}/pause`), and callbacks to a host (`/v1/limits/{host}`) or of a queue
(`PUT /v1/queues/{queue}`) limited in rate and concurrency; all of it is stored, so it holds
across restarts and for every worker of the store. A queue's timers of one state can be
purged (`DELETE /v1/queues/{queue}/timers?state=`), many timers cancelled at once
(`POST /v1/timers/cancel`), and a queue given defaults its timers take when they fire
without their own retry policy or headers (`PUT /v1/queues/{queue}/defaults`).

Every error is `{"error": {"code", "message", "field"}}`. When the service has a token, every
path but `/healthz`, `/openapi.json` and the static pages (`/docs`, `/dashboard`) needs
`Authorization: Bearer <token>`. With a tokens file (`serve --tokens`), each token reaches only
the queues its patterns match: another tenant's timer or schedule is 404, a queue outside them
403, a call its role may not make 403, and a create over its quotas 429 `quota_exceeded` with
nothing written. A query parameter a route does not declare is refused (400).
Callback header values are stored as sent but shown as `***`: they often hold credentials."""


class _App(FastAPI):
    """FastAPI whose OpenAPI document declares the bearer token `Gate` checks, when one is set."""

    def __init__(self, *, bearer: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.bearer = bearer

    def openapi(self) -> dict[str, Any]:
        if self.openapi_schema is not None or not self.bearer:
            return super().openapi()
        schema = super().openapi()
        schema.setdefault("components", {})["securitySchemes"] = {
            "bearer": {"type": "http", "scheme": "bearer"}
        }
        for path, operations in schema["paths"].items():
            if path not in Gate.OPEN_PATHS:
                for operation in operations.values():
                    operation["security"] = [{"bearer": []}]
        return schema


@functools.cache
def _routes() -> tuple[BaseRoute, ...]:
    """Every route of the API, built once a process and shared by its apps: FastAPI builds a
    model per parameter and response of each route (about 0.1 s of CPU in all), and no route
    holds an app's state (each finds it through its request's app)."""
    resources = (
        timer_routes,
        attempt_routes,
        schedule_routes,
        dead_routes,
        queue_routes,
        bulk_routes,
        limit_routes,
        ops_routes,
        event_routes,
    )
    routes = [route for resource in resources for route in resource.router().routes]
    return (*routes, *static_routes())


def create_app(
    settings: ServiceSettings,
    store: Store | None = None,
    *,
    registry: CollectorRegistry | None = None,
    changes: ChangeFeed | None = None,
) -> FastAPI:
    """Build the API app; nothing is opened until it starts.

    Args:
        settings: the service's settings (token, body limit, SSRF policy, store URL).
        store: the store to serve, owned by the caller. When None the app opens
            ``settings.store_url`` on startup and closes it on shutdown.
        registry: what ``/metrics`` renders (the engine's metrics), where the app adds its
            request metrics; a fresh registry of the app's own when None. One app per registry.
        changes: the state changes ``/v1/events`` streams (the process's worker publishes
            there too); when None, the app's own, which only its routes publish to.
    """
    registry = CollectorRegistry() if registry is None else registry
    tenants = tenants_of(settings.tenants, settings.token)
    quotas = None if tenants is None else Quotas(tenants)
    context = Context(settings, store, registry, QueueCap(settings.max_queues), quotas)
    if changes is not None:
        context.changes = changes
    registry.register(event_routes.StreamGauges(context.changes))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if store is not None:
            yield
            return
        opened = context.store = open_store(settings.store_url, settings.store_settings())
        try:
            yield
        finally:
            context.store = None
            await opened.close()

    app = _App(
        title="tickwheel",
        version="1",
        description=DESCRIPTION,
        lifespan=lifespan,
        bearer=settings.token is not None or tenants is not None,
        docs_url=None,  # served with the static pages, Swagger UI pinned by its hashes
        redoc_url=None,
    )
    app.state.tickwheel = context
    app.router.routes.extend(_routes())
    install_error_handlers(app)
    app.add_middleware(Gate, settings=settings)
    app.add_middleware(
        RequestMetrics, **RequestMetrics.series(registry, by_tenant=tenants is not None)
    )
    return app
