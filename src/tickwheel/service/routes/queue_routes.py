"""The ``/v1/queues`` routes: each queue's counts and settings; pause, resume, set its limit.

Pause, resume and the ``/limit`` routes each change one part of the settings in one atomic
store call, so two operators changing the pause and the limit at once both keep their change;
``PUT /v1/queues/{queue}`` replaces both parts.

A queue's settings live in the store, so a pause holds across restarts and for every worker of
the store; the API still accepts timers into a paused queue, and leases already held finish.
"""

from __future__ import annotations

from fastapi import APIRouter, Response

from tickwheel.service.api_errors import ApiError
from tickwheel.service.flow_schemas import LimitIn, QueueIn, QueueOut, QueuesOut
from tickwheel.service.routes.access import TenantDep, check_queue, queues_page
from tickwheel.service.routes.deps import (
    DEFAULT_PAGE,
    Context,
    ContextDep,
    Cursor,
    PageSize,
    StoreDep,
    errors,
    strict_router,
)
from tickwheel.service.tenants import Tenant
from tickwheel.stores import checks
from tickwheel.stores.base import QueueSettings, Store


async def queue_out(store: Store, queue: str) -> QueueOut:
    """The queue as `GET /v1/queues/{queue}` shows it (zero counts when it holds nothing),
    read alone from the store."""
    return QueueOut.of(await store.queue_info(queue), store.now_ms())


async def writable(context: Context, store: Store, tenant: Tenant | None, queue: str) -> None:
    """Refuse settings for a queue the tenant may not use (403) or may not add (429)."""
    checks.check_queue(queue)
    check_queue(tenant, queue)
    if tenant is not None and context.quotas is not None:
        await context.quotas.admit_queue(store, tenant, queue)


async def _set_paused(
    context: Context, store: Store, tenant: Tenant | None, queue: str, paused: bool
) -> QueueOut:
    """Change the queue's pause alone, in one atomic store call: a concurrent change of its
    limit is kept."""
    await writable(context, store, tenant, queue)
    if paused:  # a pause is a setting: a new queue's counts against the cap
        await context.admit_queue(store, queue)
    await store.pause_queue(queue, paused)
    return await queue_out(store, queue)


def router() -> APIRouter:
    """Build the queue routes."""
    routes = strict_router()

    @routes.get("/v1/queues", responses=errors())
    async def list_queues(
        store: StoreDep, tenant: TenantDep, limit: PageSize = DEFAULT_PAGE, cursor: Cursor = None
    ) -> QueuesOut:
        """The queues that hold timers or have settings (those the token sees), by name, a page
        at a time; follow `cursor` to the end (each queue once)."""
        page = await queues_page(store, tenant, limit, cursor)
        now = store.now_ms()
        return QueuesOut(
            queues=[QueueOut.of(info, now) for info in page.queues], cursor=page.cursor
        )

    @routes.get("/v1/queues/{queue}", responses=errors(403))
    async def get_queue(queue: str, store: StoreDep, tenant: TenantDep) -> QueueOut:
        """One queue; a queue with no timers and no settings has zero counts."""
        checks.check_queue(queue)
        check_queue(tenant, queue)
        return await queue_out(store, queue)

    @routes.put("/v1/queues/{queue}", responses=errors(403, 429))
    async def put_queue(
        queue: str, body: QueueIn, context: ContextDep, store: StoreDep, tenant: TenantDep
    ) -> QueueOut:
        """Replace the queue's settings (paused, limit); the defaults remove them."""
        await writable(context, store, tenant, queue)
        settings = body.settings()
        if settings != QueueSettings():  # the defaults remove settings: never refused
            await context.admit_queue(store, queue)
        await store.set_queue(queue, settings)
        return await queue_out(store, queue)

    @routes.put("/v1/queues/{queue}/limit", responses=errors(403, 429))
    async def put_queue_limit(
        queue: str, body: LimitIn, context: ContextDep, store: StoreDep, tenant: TenantDep
    ) -> QueueOut:
        """Set the queue's limit, replacing any it had; its pause stays as it is."""
        await writable(context, store, tenant, queue)
        await context.admit_queue(store, queue)
        await store.set_queue_limit(queue, body.limit())
        return await queue_out(store, queue)

    @routes.delete("/v1/queues/{queue}/limit", status_code=204, responses=errors(403, 404))
    async def delete_queue_limit(queue: str, store: StoreDep, tenant: TenantDep) -> Response:
        """Remove the queue's limit, its pause staying as it is; 404 when it had none."""
        checks.check_queue(queue)
        check_queue(tenant, queue)
        if not await store.set_queue_limit(queue, None):
            raise ApiError(404, f"no limit on queue {queue!r}", field="queue")
        return Response(status_code=204)

    @routes.post("/v1/queues/{queue}/pause", responses=errors(403, 429))
    async def pause_queue(
        queue: str, context: ContextDep, store: StoreDep, tenant: TenantDep
    ) -> QueueOut:
        """Stop every worker claiming from the queue (its limit stays); held leases finish."""
        paused = await _set_paused(context, store, tenant, queue, True)
        context.changes.publish("paused", None, queue)  # the whole queue: no timer id
        return paused

    @routes.post("/v1/queues/{queue}/resume", responses=errors(403, 429))
    async def resume_queue(
        queue: str, context: ContextDep, store: StoreDep, tenant: TenantDep
    ) -> QueueOut:
        """Let workers claim from the queue again."""
        return await _set_paused(context, store, tenant, queue, False)

    return routes
