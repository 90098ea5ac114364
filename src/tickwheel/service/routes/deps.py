"""What every route shares: the app's `Context`, the store as a dependency, paging parameters,
the check that refuses undeclared query parameters, and the error responses routes declare."""

from __future__ import annotations

import re
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from prometheus_client import CollectorRegistry

from tickwheel.engine.changes import ChangeFeed
from tickwheel.errors import CapReached
from tickwheel.model import MAX_ID_CHARS, Timer, occurrence_of
from tickwheel.service.api_errors import ApiError
from tickwheel.service.queue_cap import QueueCap
from tickwheel.service.quotas import Quotas
from tickwheel.service.schemas import ID_PATTERN, ErrorOut
from tickwheel.service.settings import ServiceSettings
from tickwheel.stores.base import Store
from tickwheel.stores.checks import MAX_LIST

MAX_PARAM_CHARS = 64
"""How much of an unknown query parameter's name an error echoes."""
MAX_CURSOR_CHARS = 512
VALID_ID = re.compile(ID_PATTERN)


@dataclass(slots=True)
class Context:
    """What the routes of one app share: its settings, once started its store, with a
    tokens file its tenants' quotas, and the state changes its event stream reads."""

    settings: ServiceSettings
    store: Store | None
    registry: CollectorRegistry
    queue_cap: QueueCap
    quotas: Quotas | None = None
    changes: ChangeFeed = field(default_factory=ChangeFeed)

    async def admit_queue(self, store: Store, queue: str) -> None:
        """Refuse a new `queue` past the store's cap on queues (`CapReached`, 429)."""
        if await self.queue_cap.refused(store, (queue,)):
            raise CapReached("queues", self.queue_cap.max_queues, "queue")


def served(request: Request) -> tuple[Context, Store]:
    """The app's context and its store, read straight from the request: what `ContextDep`
    and `StoreDep` give, for the hottest route, where a dependency costs ~10 µs a request."""
    context: Context = request.app.state.tickwheel
    if context.store is None:
        raise ApiError(503, "the service is not started", code="store_unavailable")
    return context, context.store


# async, though nothing here awaits: FastAPI runs a plain `def` dependency on a worker
# thread, two thread hops for every request
async def _store(request: Request) -> Store:
    return served(request)[1]


async def _context(request: Request) -> Context:
    context: Context = request.app.state.tickwheel
    return context


StoreDep = Annotated[Store, Depends(_store)]
ContextDep = Annotated[Context, Depends(_context)]
Limit = Annotated[int, Query(ge=1, le=MAX_LIST, description="timers per page")]
PageSize = Annotated[int, Query(ge=1, le=MAX_LIST, description="items per page")]
DEFAULT_PAGE = 100
"""Items a page holds when the request does not say: what the dashboard shows at once."""
Cursor = Annotated[
    str | None,
    Query(
        pattern=rf"^[\x21-\x7e]{{1,{MAX_CURSOR_CHARS}}}$",
        description="the `cursor` of the previous page, as it was returned",
    ),
]


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """Declare the error responses of a route: the ones every route may give (403 too: a
    tenant's role may not call it), and `statuses`."""
    common = {400, 401, 403, 413, 415, 421, 422, 431, 503}
    return {status: {"model": ErrorOut} for status in sorted(common | set(statuses))}


def is_timer_id(timer_id: str) -> bool:
    """Whether a timer may have the id `timer_id`: one a client gives, or a schedule's
    occurrence (``<schedule id>@<nominal ms>``)."""
    if VALID_ID.fullmatch(timer_id) is not None:
        return True
    return len(timer_id) <= MAX_ID_CHARS and occurrence_of(timer_id) is not None


async def found(store: Store, timer_id: str) -> Timer:
    """Return the timer `timer_id`, or raise a 404 (an id no timer can have is not looked up)."""
    timer = await store.get(timer_id) if is_timer_id(timer_id) else None
    if timer is None:
        raise ApiError(404, f"no timer {timer_id!r}", field="id")
    return timer


def _declared(dependant: Dependant) -> set[str]:
    """The query parameters a route's handler reads, its dependencies' included."""
    names = {param.alias for param in dependant.query_params}
    return names.union(*(_declared(sub) for sub in dependant.dependencies))


class StrictQueryRoute(APIRoute):
    """A route that refuses a query parameter its handler does not read, or one given twice
    (400), before the handler runs.

    Ignoring one would let a client believe a filter applied that never did; reading one no
    handler declared is how a parameter meant to stay internal becomes an input. Checked here
    rather than as a dependency, which would cost every request ~10 µs of dependency solving.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()
        known = _declared(self.dependant)

        async def strict(request: Request) -> Response:
            if request.scope["query_string"]:
                check_query(request, known)
            return await handle(request)

        return strict


def check_query(request: Request, known: set[str]) -> None:
    """Refuse (400) a query parameter not in `known`, or one given twice."""
    seen: set[str] = set()
    for name, _ in request.query_params.multi_items():
        if name not in known:
            shown = name[:MAX_PARAM_CHARS]
            raise ApiError(400, f"unknown query parameter {shown!r}", field=shown)
        if name in seen:
            raise ApiError(400, f"query parameter {name!r} is given more than once", field=name)
        seen.add(name)


def strict_router() -> APIRouter:
    """A router whose routes accept only the query parameters they read."""
    return APIRouter(route_class=StrictQueryRoute)
