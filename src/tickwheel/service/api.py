"""`create_app`: the HTTP API over a timer store, with its OpenAPI document and metrics."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Query, Request, Response
from fastapi.dependencies.models import Dependant
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from pydantic import ValidationError
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tickwheel.engine.guard import check_target_url
from tickwheel.errors import InvalidArgument, StoreUnavailable, TimerExists
from tickwheel.model import State, Timer
from tickwheel.service.dashboard import PAGES, static_routes
from tickwheel.service.errors import ApiError, describe, install_error_handlers
from tickwheel.service.gate import Gate
from tickwheel.service.schemas import (
    ID_PATTERN,
    BatchIn,
    BatchItemOut,
    BatchOut,
    ErrorOut,
    HealthOut,
    RescheduleIn,
    StatsOut,
    TimerIn,
    TimerOut,
    TimerPage,
    format_ms,
)
from tickwheel.service.settings import ServiceSettings
from tickwheel.stores.base import Store
from tickwheel.stores.checks import MAX_LIST
from tickwheel.stores.open import open_store

DELAY_MATCH_MS = 1000
"""How far a repeat sent with `delay` may land from the stored due time and still match it."""
LOOKUPS_AT_ONCE = 32
"""Concurrent `get`s of one batch; each may hold a store connection."""
HEALTH_TIMEOUT_S = 2.0
MAX_PARAM_CHARS = 64
"""How much of an unknown query parameter's name an error echoes."""
MAX_CURSOR_CHARS = 512
DESCRIPTION = """Durable timers over HTTP: tickwheel calls a timer's callback (or hands its payload
to a queue consumer) at the due millisecond, at least once.

Every error is `{"error": {"code", "message", "field"}}`. When the service has a token, every
path but `/healthz`, `/openapi.json` and the static pages (`/docs`, `/dashboard`) needs
`Authorization: Bearer <token>`. A query parameter a route does not declare is refused (400).
Callback header values are stored as sent but shown as `***`: they often hold credentials."""
_HEALTH_PROBE_ID = "tickwheel.healthz"
_VALID_ID = re.compile(ID_PATTERN)


@dataclass(slots=True)
class Context:
    """What the routes of one app share: its settings and, once started, its store."""

    settings: ServiceSettings
    store: Store | None
    registry: CollectorRegistry


def _store(request: Request) -> Store:
    store: Store | None = request.app.state.tickwheel.store
    if store is None:
        raise ApiError(503, "the service is not started", code="store_unavailable")
    return store


def _context(request: Request) -> Context:
    context: Context = request.app.state.tickwheel
    return context


StoreDep = Annotated[Store, Depends(_store)]
ContextDep = Annotated[Context, Depends(_context)]
Limit = Annotated[int, Query(ge=1, le=MAX_LIST, description="timers per page")]
Cursor = Annotated[
    str | None,
    Query(
        pattern=rf"^[\x21-\x7e]{{1,{MAX_CURSOR_CHARS}}}$",
        description="the `cursor` of the previous page, as it was returned",
    ),
]


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """Declare the error responses of a route: the ones every route may give, and `statuses`."""
    common = {400, 401, 413, 415, 422, 431, 503}
    return {status: {"model": ErrorOut} for status in sorted(common | set(statuses))}


async def _found(store: Store, timer_id: str) -> Timer:
    timer = await store.get(timer_id) if _VALID_ID.fullmatch(timer_id) else None
    if timer is None:
        raise ApiError(404, f"no timer {timer_id!r}", field="id")
    return timer


async def _not_scheduled(store: Store, timer_id: str) -> ApiError:
    timer = await store.get(timer_id) if _VALID_ID.fullmatch(timer_id) else None
    if timer is None:
        return ApiError(404, f"no timer {timer_id!r}", field="id")
    return ApiError(
        404, f"timer {timer_id!r} is {timer.state}, not scheduled", code="not_scheduled", field="id"
    )


def _build(context: Context, item: TimerIn, now_ms: int, timer_id: str | None = None) -> Timer:
    timer = item.to_timer(now_ms, timer_id)
    if timer.callback is not None:
        check_target_url(timer.callback.url, allow_private=context.settings.allow_private_targets)
    return timer


def _same(existing: Timer, timer: Timer, item: TimerIn) -> bool:
    """Whether `timer` repeats `existing`; with `delay` the due time is matched to the creation."""
    if item.delay is None:
        return existing.spec() == timer.spec()
    drift = existing.due_ms - existing.created_ms - item.delay
    if abs(drift) > DELAY_MATCH_MS:
        return False
    return existing.evolve(due_ms=timer.due_ms).spec() == timer.spec()


async def _put(store: Store, timer: Timer, item: TimerIn, *, replace: bool) -> tuple[int, Timer]:
    """Store `timer`: 201 when new, 200 when repeated or (with `replace`) replaced; else 409."""
    existing = await store.get(timer.id) if item.id is not None or replace else None
    if existing is not None and _same(existing, timer, item):
        return 200, existing
    if existing is not None and not replace:
        raise TimerExists(timer.id)
    try:
        stored = await store.add(timer, replace=replace)
    except InvalidArgument as error:  # beyond the store's horizon
        raise item.rename(error) from None
    return (201 if existing is None else 200), stored


def _item_error(error: Exception) -> BatchItemOut:
    status, detail, _ = describe(error)
    return BatchItemOut(status=status, error=detail)


async def _batch(context: Context, store: Store, raw: list[Any]) -> list[BatchItemOut]:
    """Answer each item as ``POST /v1/timers`` would, storing the new ones with one `add_many`."""
    results: dict[int, BatchItemOut] = {}
    first: dict[str, tuple[int, Timer, TimerIn]] = {}  # id -> its first valid item
    repeats: list[tuple[int, Timer]] = []
    now_ms = store.now_ms()  # one `now` for all: a repeated `delay` gives the same due time
    for index, fields in enumerate(raw):
        try:
            item = TimerIn.model_validate(fields)
            timer = _build(context, item, now_ms)
        except (ValidationError, InvalidArgument) as error:
            results[index] = _item_error(error)
        else:
            if timer.id in first:
                repeats.append((index, timer))
            else:
                first[timer.id] = (index, timer, item)
    given = [(i, timer, item) for i, timer, item in first.values() if item.id is not None]
    found = await _get_many(store, [timer.id for _, timer, _ in given])
    new = [(i, timer, item) for i, timer, item in first.values() if item.id is None]
    for (index, timer, item), existing in zip(given, found, strict=True):
        if existing is None:
            new.append((index, timer, item))
        elif _same(existing, timer, item):
            results[index] = BatchItemOut(status=200, timer=TimerOut.of(existing))
        else:
            results[index] = _item_error(TimerExists(timer.id))
    # stored in request order, so equal due times fire in the order the client listed them
    results.update(await _add_new(store, sorted(new, key=lambda entry: entry[0])))
    for index, timer in repeats:
        earlier_index, earlier, _ = first[timer.id]
        earlier_result = results[earlier_index]
        if earlier_result.timer is not None and earlier.spec() == timer.spec():
            results[index] = BatchItemOut(status=200, timer=earlier_result.timer)
        else:
            results[index] = _item_error(TimerExists(timer.id))
    return [results[index] for index in range(len(raw))]


async def _get_many(store: Store, timer_ids: list[str]) -> list[Timer | None]:
    """Look the ids up a few at a time: concurrently, without a connection per id."""
    found: list[Timer | None] = []
    for start in range(0, len(timer_ids), LOOKUPS_AT_ONCE):
        chunk = timer_ids[start : start + LOOKUPS_AT_ONCE]
        found += await asyncio.gather(*(store.get(timer_id) for timer_id in chunk))
    return found


async def _add_new(store: Store, new: list[tuple[int, Timer, TimerIn]]) -> dict[int, BatchItemOut]:
    if not new:
        return {}
    try:
        stored = await store.add_many([timer for _, timer, _ in new])
    except (TimerExists, InvalidArgument):
        # an id taken meanwhile, or a due time past the store's horizon: one by one, each
        # item gets its own answer (those add_many stored already are repeats of themselves)
        return {index: await _add_one(store, timer, item) for index, timer, item in new}
    return {
        index: BatchItemOut(status=201, timer=TimerOut.of(timer))
        for (index, _, _), timer in zip(new, stored, strict=True)
    }


async def _add_one(store: Store, timer: Timer, item: TimerIn) -> BatchItemOut:
    try:
        return BatchItemOut(status=201, timer=TimerOut.of(await store.add(timer)))
    except TimerExists as error:
        return _item_error(error)
    except InvalidArgument as error:
        return _item_error(item.rename(error))


def _declared(dependant: Dependant) -> set[str]:
    """The query parameters a route's handler reads, its dependencies' included."""
    names = {param.alias for param in dependant.query_params}
    return names.union(*(_declared(sub) for sub in dependant.dependencies))


async def _declared_query_only(request: Request) -> None:
    """Refuse a query parameter the route does not read, or one given twice (400).

    Ignoring one would let a client believe a filter applied that never did; reading one no
    handler declared is how a parameter meant to stay internal becomes an input.
    """
    if not request.url.query:
        return
    known = _declared(request.scope["route"].dependant)  # a few attributes: not worth a cache
    seen: set[str] = set()
    for name, _ in request.query_params.multi_items():
        if name not in known:
            shown = name[:MAX_PARAM_CHARS]
            raise ApiError(400, f"unknown query parameter {shown!r}", field=shown)
        if name in seen:
            raise ApiError(400, f"query parameter {name!r} is given more than once", field=name)
        seen.add(name)


def _routes() -> APIRouter:
    """Build the routes; each finds the store and settings through the request's app."""
    router = APIRouter(dependencies=[Depends(_declared_query_only)])

    @router.post(
        "/v1/timers",
        status_code=201,
        responses={200: {"model": TimerOut, "description": "a repeat"}, **_errors(409)},
    )
    async def create_timer(
        item: TimerIn, response: Response, context: ContextDep, store: StoreDep
    ) -> TimerOut:
        """Create a timer; the same id and spec again returns it (200), another spec is 409."""
        timer = _build(context, item, store.now_ms())
        response.status_code, stored = await _put(store, timer, item, replace=False)
        return TimerOut.of(stored)

    @router.post("/v1/timers/batch", responses=_errors())
    async def create_timers(batch: BatchIn, context: ContextDep, store: StoreDep) -> BatchOut:
        """Create up to 1,000 timers; each gets the status and timer or error it would alone."""
        return BatchOut(results=await _batch(context, store, batch.timers))

    @router.get("/v1/timers", responses=_errors())
    async def list_timers(
        store: StoreDep, state: State | None = None, limit: Limit = 100, cursor: Cursor = None
    ) -> TimerPage:
        """List timers, optionally in one state; follow `cursor` to the end (each timer once).

        SQLite and memory stores list in id order, Redis shard by shard."""
        page = await store.list(state, limit, cursor)
        return TimerPage(timers=[TimerOut.of(t) for t in page.timers], cursor=page.cursor)

    @router.put(
        "/v1/timers/{timer_id}",
        status_code=200,
        responses={201: {"model": TimerOut, "description": "created"}, **_errors()},
    )
    async def put_timer(
        timer_id: str, item: TimerIn, response: Response, context: ContextDep, store: StoreDep
    ) -> TimerOut:
        """Create the timer (201) or replace it (200); the same spec again changes nothing."""
        if item.id is not None and item.id != timer_id:
            raise ApiError(422, "the body's id differs from the path's", field="id")
        timer = _build(context, item, store.now_ms(), timer_id)
        response.status_code, stored = await _put(store, timer, item, replace=True)
        return TimerOut.of(stored)

    @router.get("/v1/timers/{timer_id}", responses=_errors(404))
    async def get_timer(timer_id: str, store: StoreDep) -> TimerOut:
        """Return the timer, finished ones included while they are retained."""
        return TimerOut.of(await _found(store, timer_id))

    @router.patch("/v1/timers/{timer_id}", responses=_errors(404))
    async def reschedule_timer(timer_id: str, when: RescheduleIn, store: StoreDep) -> TimerOut:
        """Move a scheduled timer to a new due time."""
        due_ms = when.due_ms_at(store.now_ms())
        try:
            moved = _VALID_ID.fullmatch(timer_id) is not None and await store.reschedule(
                timer_id, due_ms
            )
        except InvalidArgument as error:  # beyond the store's horizon
            raise when.rename(error) from None
        if not moved:
            raise await _not_scheduled(store, timer_id)
        return TimerOut.of(await _found(store, timer_id))

    @router.delete("/v1/timers/{timer_id}", status_code=204, responses=_errors(404))
    async def cancel_timer(timer_id: str, store: StoreDep) -> Response:
        """Cancel a scheduled timer; 404 when unknown, or when it is firing or has fired."""
        if not (_VALID_ID.fullmatch(timer_id) and await store.cancel(timer_id)):
            raise await _not_scheduled(store, timer_id)
        return Response(status_code=204)

    @router.get("/v1/dead", responses=_errors())
    async def list_dead(store: StoreDep, limit: Limit = 100, cursor: Cursor = None) -> TimerPage:
        """List dead-lettered timers (in id order)."""
        page = await store.list(State.DEAD, limit, cursor)
        return TimerPage(timers=[TimerOut.of(t) for t in page.timers], cursor=page.cursor)

    @router.post("/v1/dead/{timer_id}/replay", responses=_errors(404))
    async def replay_dead(timer_id: str, store: StoreDep) -> TimerOut:
        """Schedule a dead timer again, due now."""
        if not (_VALID_ID.fullmatch(timer_id) and await store.replay(timer_id)):
            raise ApiError(404, f"no dead timer {timer_id!r}", field="id")
        return TimerOut.of(await _found(store, timer_id))

    @router.get("/v1/stats", responses=_errors())
    async def stats(store: StoreDep) -> StatsOut:
        """Count timers per state and give the earliest due time among scheduled ones."""
        found = await store.stats()
        earliest = found.earliest_due_ms
        return StatsOut(
            counts={state: found.counts.get(state, 0) for state in State},
            earliest_due=None if earliest is None else format_ms(earliest),
            earliest_due_ms=earliest,
        )

    @router.get("/healthz", responses=_errors())
    async def health(store: StoreDep) -> HealthOut:
        """Answer 200 when the store answers a lookup within two seconds, else 503."""
        try:
            async with asyncio.timeout(HEALTH_TIMEOUT_S):
                await store.get(_HEALTH_PROBE_ID)
        except TimeoutError:
            raise StoreUnavailable(f"no answer within {HEALTH_TIMEOUT_S} s") from None
        return HealthOut(status="ok", store=type(store).__name__)

    @router.get(
        "/metrics",
        response_class=Response,
        responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}, **_errors()},
    )
    async def metrics(context: ContextDep) -> Response:
        """Render the metrics in the Prometheus text format."""
        return Response(generate_latest(context.registry), media_type=CONTENT_TYPE_LATEST)

    return router


KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
UNMATCHED = "unmatched"
_PLAIN_PATHS = frozenset({*PAGES, "/openapi.json"})


class _RequestMetrics:
    """Count requests and time them, by method, route template and status.

    Every label comes from a fixed set, so no request can grow the series: a method we do not
    know counts as ``OTHER``, a path no route matches as ``unmatched``. Requests refused for a
    missing or wrong token are not counted at all: before the token, a caller earns nothing.
    """

    def __init__(self, app: ASGIApp, *, requests: Counter, seconds: Histogram) -> None:
        self.app = app
        self.requests = requests
        self.seconds = seconds

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


def create_app(
    settings: ServiceSettings,
    store: Store | None = None,
    *,
    registry: CollectorRegistry | None = None,
) -> FastAPI:
    """Build the API app; nothing is opened until it starts.

    Args:
        settings: the service's settings (token, body limit, SSRF policy, store URL).
        store: the store to serve, owned by the caller. When None the app opens
            ``settings.store_url`` on startup and closes it on shutdown.
        registry: what ``/metrics`` renders (the engine's metrics), where the app adds its
            request metrics; a fresh registry of the app's own when None. One app per registry.
    """
    registry = CollectorRegistry() if registry is None else registry
    context = Context(settings, store, registry)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if store is not None:
            yield
            return
        opened = context.store = open_store(settings.store_url)
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
        bearer=settings.token is not None,
        docs_url=None,  # served with the static pages, Swagger UI pinned by its hashes
        redoc_url=None,
    )
    app.state.tickwheel = context
    app.include_router(_routes())
    app.router.routes.extend(static_routes())
    install_error_handlers(app)
    app.add_middleware(Gate, settings=settings)
    app.add_middleware(
        _RequestMetrics,
        requests=Counter(
            "tickwheel_http_requests",
            "HTTP requests answered, by method, route and status.",
            ["method", "route", "status"],
            registry=registry,
        ),
        seconds=Histogram(
            "tickwheel_http_request_duration_seconds",
            "Time to answer an HTTP request, by method and route.",
            ["method", "route"],
            registry=registry,
        ),
    )
    return app
