"""The ``/v1/timers`` routes: create (one or a batch), list, put, get, reschedule, cancel,
pause and resume.

A schedule's occurrences are timers too, readable here, but their schedule owns them: moving
or cancelling the pending one would stall the series, and writing a timer under an occurrence's
id would put words in the schedule's mouth. Those writes are refused (409).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from tickwheel.model import State, Timer, occurrence_of
from tickwheel.service.api_errors import ApiError
from tickwheel.service.routes import access, create
from tickwheel.service.routes.access import TenantDep, tenant_of
from tickwheel.service.routes.deps import (
    VALID_ID,
    ContextDep,
    Cursor,
    Limit,
    StoreDep,
    errors,
    found,
    is_timer_id,
    served,
    strict_router,
)
from tickwheel.service.routes.lean import JsonBodyRoute
from tickwheel.service.schemas import (
    QUEUE_PATTERN,
    BatchIn,
    BatchOut,
    RescheduleIn,
    TimerIn,
    TimerOut,
    TimerPage,
    epoch_ms,
)
from tickwheel.service.trace_headers import creating
from tickwheel.stores.base import Store

MAX_TIME_CHARS = 64
"""An RFC 3339 timestamp is 20-35 characters; a longer query value is refused unread."""
QueueFilter = Annotated[
    str | None, Query(pattern=QUEUE_PATTERN, description="only timers of this queue")
]
TimeFilter = Annotated[str | None, Query(max_length=MAX_TIME_CHARS)]


async def _not_scheduled(store: Store, timer_id: str) -> ApiError:
    timer = await store.get(timer_id) if is_timer_id(timer_id) else None
    if timer is None:
        return ApiError(404, f"no timer {timer_id!r}", field="id")
    return ApiError(
        404,
        f"timer {timer_id!r} is {timer.state}, not scheduled or paused",
        code="not_scheduled",
        field="id",
    )


def _owned(timer_id: str) -> ApiError | None:
    """The 409 for a write to a schedule's occurrence, None for any other timer."""
    occurrence = occurrence_of(timer_id)
    if occurrence is None:
        return None
    schedule_id = occurrence[0]
    return ApiError(
        409,
        f"timer {timer_id!r} is an occurrence of schedule {schedule_id!r}: pause, change or "
        f"delete the schedule instead (/v1/schedules/{schedule_id})",
        code="schedule_occurrence",
        field="id",
    )


def _due_filter(name: str, value: str | None) -> int | None:
    """A due bound of the list, RFC 3339 with an offset, as epoch ms (422 naming it)."""
    if value is None:
        return None
    try:
        return epoch_ms(value)
    except ValueError as error:
        raise ApiError(422, f"{name} {error}", field=name) from None


async def _paused_or_not(
    store: Store, timer_id: str, changed: bool, wanted: State, code: str
) -> Timer:
    """The timer after a pause or resume: `changed`, or already in `wanted` (200 again);
    else 404 when unknown, 409 with `code` when it is in another state."""
    timer = await found(store, timer_id)
    if changed or timer.state is wanted:
        return timer
    verb = "paused" if wanted is State.PAUSED else "resumed"
    raise ApiError(
        409, f"timer {timer_id!r} is {timer.state}: it cannot be {verb}", code=code, field="id"
    )


async def _refuse_occurrence(store: Store, timer_id: str) -> None:
    """Refuse to move or cancel a schedule's occurrence; one the store lacks is a 404."""
    refusal = _owned(timer_id)
    if refusal is not None:
        await found(store, timer_id)
        raise refusal


def router() -> APIRouter:
    """Build the timer routes; each finds the store and settings through the request's app."""
    routes = strict_router()

    async def create_timer(item: TimerIn, response: Response, request: Request) -> TimerOut:
        """Create a timer; the same id and spec again returns it (200), another spec is 409."""
        context, store = served(request)
        tenant = tenant_of(request)
        with creating(request.scope["headers"], **{"tickwheel.queue": item.queue}) as trace:
            timer = create.build(context, store, item, store.now_ms(), tenant=tenant, trace=trace)
            await context.admit_queue(store, timer.queue)
            admit = None
            if tenant is not None and context.quotas is not None:

                async def admit(timer: Timer) -> None:
                    await access.admit(context, store, tenant, [timer])

            response.status_code, stored = await create.put(
                store, timer, item, replace=False, admit=admit
            )
        if response.status_code == 201:
            context.changes.publish("created", stored.id, stored.queue)
        return TimerOut.of(stored)

    # the route every client waits on: read and answered without FastAPI's dependency solving
    routes.add_api_route(
        "/v1/timers",
        create_timer,
        methods=["POST"],
        status_code=201,
        responses={200: {"model": TimerOut, "description": "a repeat"}, **errors(403, 409, 429)},
        route_class_override=JsonBodyRoute,
    )

    @routes.post("/v1/timers/batch", responses=errors(429))
    async def create_timers(
        batch: BatchIn, request: Request, context: ContextDep, store: StoreDep, tenant: TenantDep
    ) -> BatchOut:
        """Create up to 1,000 timers; each gets the status and timer or error it would alone.
        With a tenant's quotas, the new ones are stored all or none (429)."""
        with creating(request.scope["headers"], **{"tickwheel.timers": len(batch.timers)}) as trace:
            results = await create.batch(context, store, batch.timers, tenant, trace)
        for result in results:
            if result.status == 201 and result.timer is not None:
                context.changes.publish("created", result.timer.id, result.timer.queue)
        return BatchOut(results=results)

    @routes.get("/v1/timers", responses=errors())
    async def list_timers(
        store: StoreDep,
        tenant: TenantDep,
        state: State | None = None,
        queue: QueueFilter = None,
        due_from: Annotated[
            TimeFilter, Query(description="due at or after (RFC 3339 with an offset)")
        ] = None,
        due_to: Annotated[
            TimeFilter, Query(description="due before (RFC 3339 with an offset)")
        ] = None,
        limit: Limit = 100,
        cursor: Cursor = None,
    ) -> TimerPage:
        """List timers, optionally of one state and queue and due in a range; follow `cursor`
        to the end (each matching timer once; give the same filters with it).

        SQLite and memory stores list in id order, Redis shard by shard. With a token that
        sees some queues only, a page may be short, even empty, with a cursor to follow."""
        page = await access.timers_page(
            store,
            tenant,
            state,
            limit,
            cursor,
            queue=queue,
            due_from_ms=_due_filter("due_from", due_from),
            due_to_ms=_due_filter("due_to", due_to),
        )
        return TimerPage(timers=[TimerOut.of(t) for t in page.timers], cursor=page.cursor)

    @routes.put(
        "/v1/timers/{timer_id}",
        status_code=200,
        responses={
            201: {"model": TimerOut, "description": "created"},
            **errors(403, 404, 409, 429),
        },
    )
    async def put_timer(
        timer_id: str,
        item: TimerIn,
        request: Request,
        response: Response,
        context: ContextDep,
        store: StoreDep,
        tenant: TenantDep,
    ) -> TimerOut:
        """Create the timer (201) or replace it (200); the same spec again changes nothing.

        An id of a schedule's occurrence (``<schedule id>@<ms>``) is refused (409)."""
        if item.id is not None and item.id != timer_id:
            raise ApiError(422, "the body's id differs from the path's", field="id")
        refusal = _owned(timer_id)
        if refusal is not None:
            raise refusal
        with creating(request.scope["headers"], **{"tickwheel.queue": item.queue}) as trace:
            timer = create.build(context, store, item, store.now_ms(), timer_id, tenant, trace)
            await access.guard_timer(store, tenant, timer_id)
            await context.admit_queue(store, timer.queue)

            async def admit(timer: Timer) -> None:
                await access.admit(context, store, tenant, [timer])

            response.status_code, stored = await create.put(
                store, timer, item, replace=True, admit=admit
            )
        if response.status_code == 201:
            context.changes.publish("created", stored.id, stored.queue)
        return TimerOut.of(stored)

    @routes.get("/v1/timers/{timer_id}", responses=errors(404))
    async def get_timer(timer_id: str, store: StoreDep, tenant: TenantDep) -> TimerOut:
        """Return the timer, finished ones included while they are retained."""
        return TimerOut.of(await access.found_for(store, tenant, timer_id))

    @routes.patch("/v1/timers/{timer_id}", responses=errors(404, 409))
    async def reschedule_timer(
        timer_id: str, when: RescheduleIn, store: StoreDep, tenant: TenantDep
    ) -> TimerOut:
        """Move a scheduled or paused timer to a new due time (a paused one stays paused, to
        fire then once resumed); a schedule's occurrence is refused (409)."""
        due_ms = when.due_ms_at(store.now_ms(), store.settings)
        await access.guard_timer(store, tenant, timer_id)
        await _refuse_occurrence(store, timer_id)
        moved = VALID_ID.fullmatch(timer_id) is not None and await store.reschedule(
            timer_id, due_ms, due_checked=True
        )
        if not moved:
            raise await _not_scheduled(store, timer_id)
        return TimerOut.of(await found(store, timer_id))

    @routes.post("/v1/timers/{timer_id}/pause", responses=errors(404, 409))
    async def pause_timer(
        timer_id: str, context: ContextDep, store: StoreDep, tenant: TenantDep
    ) -> TimerOut:
        """Stop a scheduled timer from firing, keeping its id, attempts and history (an
        already paused one: 200 again); 409 ``not_scheduled`` when it is firing or finished,
        409 ``schedule_occurrence`` for a schedule's occurrence (pause the schedule)."""
        await access.guard_timer(store, tenant, timer_id)
        await _refuse_occurrence(store, timer_id)
        paused = VALID_ID.fullmatch(timer_id) is not None and await store.pause(timer_id)
        timer = await _paused_or_not(store, timer_id, paused, State.PAUSED, "not_scheduled")
        if paused:
            context.changes.publish("paused", timer.id, timer.queue)
        return TimerOut.of(timer)

    @routes.post("/v1/timers/{timer_id}/resume", responses=errors(404, 409))
    async def resume_timer(timer_id: str, store: StoreDep, tenant: TenantDep) -> TimerOut:
        """Schedule a paused timer again at its due time, at once if that has passed (an
        already scheduled one: 200 again); 409 ``not_paused`` when it is firing or finished."""
        await access.guard_timer(store, tenant, timer_id)
        await _refuse_occurrence(store, timer_id)
        resumed = VALID_ID.fullmatch(timer_id) is not None and await store.resume(timer_id)
        timer = await _paused_or_not(store, timer_id, resumed, State.SCHEDULED, "not_paused")
        return TimerOut.of(timer)

    @routes.delete("/v1/timers/{timer_id}", status_code=204, responses=errors(404, 409))
    async def cancel_timer(
        timer_id: str, context: ContextDep, store: StoreDep, tenant: TenantDep
    ) -> Response:
        """Cancel a scheduled or paused timer; 404 when unknown, or when it is firing or has
        fired; 409 for a schedule's occurrence (pause, change or delete the schedule
        instead)."""
        known = await access.guard_timer(store, tenant, timer_id)
        await _refuse_occurrence(store, timer_id)
        # the event names the queue: looked up only while a stream reads and none was
        if known is None and context.changes.readers and VALID_ID.fullmatch(timer_id):
            known = await store.get(timer_id)
        if not (VALID_ID.fullmatch(timer_id) and await store.cancel(timer_id)):
            raise await _not_scheduled(store, timer_id)
        if known is not None:
            context.changes.publish("cancelled", timer_id, known.queue)
        return Response(status_code=204)

    return routes
