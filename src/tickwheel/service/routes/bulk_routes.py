"""The bulk routes: purge a queue's timers of one state, cancel many timers by id, and set a
queue's defaults.

``DELETE /v1/queues/{queue}/timers?state=`` deletes the queue's scheduled, paused or dead
timers, a bounded batch per store transaction, and answers how many went; leased timers are
their workers' and are never purged. ``POST /v1/timers/cancel`` cancels up to 1,000 timers and
answers per id. ``PUT|DELETE /v1/queues/{queue}/defaults`` set or remove what the queue's
timers take when they fire without their own retry policy or headers.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Query, Response

from tickwheel.model import State, occurrence_of
from tickwheel.service.api_errors import ApiError
from tickwheel.service.bulk_schemas import (
    CancelIn,
    CancelledOut,
    CancelOut,
    CancelResult,
    DefaultsIn,
    PurgeOut,
    PurgeState,
)
from tickwheel.service.flow_schemas import QueueOut
from tickwheel.service.routes.access import TenantDep, check_queue, hides
from tickwheel.service.routes.deps import (
    ContextDep,
    StoreDep,
    errors,
    is_timer_id,
    strict_router,
)
from tickwheel.service.routes.queue_routes import queue_out, writable
from tickwheel.service.tenants import Tenant
from tickwheel.stores import checks
from tickwheel.stores.base import Store

CANCELS_AT_ONCE = 32
"""Cancels of one bulk request in flight at once: enough to fill a store's round trips, few
enough to leave its connections to the workers."""


async def _cancel_one(store: Store, tenant: Tenant | None, timer_id: str) -> CancelResult:
    """Cancel `timer_id` as ``DELETE /v1/timers/{id}`` would, answering instead of raising."""
    if not is_timer_id(timer_id):
        return "not_found"
    if tenant is not None and not tenant.all_queues:
        timer = await store.get(timer_id)
        if timer is None or hides(tenant, timer.queue):
            return "not_found"
    if occurrence_of(timer_id) is not None:
        return "schedule_occurrence"
    if await store.cancel(timer_id):
        return "cancelled"
    return "not_found" if await store.get(timer_id) is None else "not_scheduled"


def router() -> APIRouter:
    """Build the purge, bulk cancel and queue defaults routes."""
    routes = strict_router()

    @routes.delete("/v1/queues/{queue}/timers", responses=errors(403))
    async def purge_queue(
        queue: str,
        store: StoreDep,
        tenant: TenantDep,
        state: Annotated[PurgeState, Query(description="which timers: scheduled, paused or dead")],
    ) -> PurgeOut:
        """Delete every timer of the queue in `state` (scheduled, paused or dead) and answer
        how many went. Leased timers are their workers' and are never purged; a schedule's
        pending occurrence stays with its schedule. The store deletes 1,000 a transaction."""
        checks.check_queue(queue)
        check_queue(tenant, queue)
        purged = await store.purge(queue, State(state))
        return PurgeOut(queue=queue, state=state, purged=purged)

    @routes.post("/v1/timers/cancel", responses=errors())
    async def cancel_timers(body: CancelIn, store: StoreDep, tenant: TenantDep) -> CancelOut:
        """Cancel up to 1,000 scheduled or paused timers; each id gets the result its own
        `DELETE /v1/timers/{id}` would (an id given twice is refused, 422)."""
        if len(set(body.ids)) < len(body.ids):
            raise ApiError(422, "an id is given twice", field="ids")
        turns = asyncio.Semaphore(CANCELS_AT_ONCE)

        async def one(timer_id: str) -> CancelResult:
            async with turns:
                return await _cancel_one(store, tenant, timer_id)

        results = await asyncio.gather(*(one(timer_id) for timer_id in body.ids))
        return CancelOut(
            cancelled=results.count("cancelled"),
            results=[
                CancelledOut(id=timer_id, result=result)
                for timer_id, result in zip(body.ids, results, strict=True)
            ],
        )

    @routes.put("/v1/queues/{queue}/defaults", responses=errors(403, 429))
    async def put_queue_defaults(
        queue: str, body: DefaultsIn, context: ContextDep, store: StoreDep, tenant: TenantDep
    ) -> QueueOut:
        """Set the queue's defaults, replacing any it had (its pause and limit stay): a retry
        policy for its timers whose policy is the built-in one, and headers under every
        timer's own. Workers apply them when a timer fires, within about a second."""
        await writable(context, store, tenant, queue)
        defaults = body.defaults()
        if not defaults.empty:  # setting none is a removal: never refused
            await context.admit_queue(store, queue)
        await store.set_queue_defaults(queue, defaults)
        return await queue_out(store, queue)

    @routes.delete("/v1/queues/{queue}/defaults", status_code=204, responses=errors(403, 404))
    async def delete_queue_defaults(queue: str, store: StoreDep, tenant: TenantDep) -> Response:
        """Remove the queue's defaults; 404 when it had none."""
        checks.check_queue(queue)
        check_queue(tenant, queue)
        if not await store.set_queue_defaults(queue, None):
            raise ApiError(404, f"no defaults on queue {queue!r}", field="queue")
        return Response(status_code=204)

    return routes
