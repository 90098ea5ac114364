"""The ``/v1/queues`` routes: each queue's counts and settings; pause, resume, set its limit.

A queue's settings live in the store, so a pause holds across restarts and for every worker of
the store; the API still accepts timers into a paused queue, and leases already held finish.
"""

from __future__ import annotations

from dataclasses import replace

from fastapi import APIRouter, Depends

from tickwheel.model import State
from tickwheel.service.routes.deps import StoreDep, declared_query_only, errors
from tickwheel.service.schemas import QueueIn, QueueOut, QueuesOut
from tickwheel.stores.base import QueueInfo, QueueSettings, Store
from tickwheel.stores.checks import check_queue


async def queue_out(store: Store, queue: str) -> QueueOut:
    """The queue as `GET /v1/queues/{queue}` shows it: zero counts when it holds nothing."""
    for info in await store.queue_infos():
        if info.name == queue:
            return QueueOut.of(info, store.now_ms())
    settings = (await store.queue_settings()).get(queue, QueueSettings())
    return QueueOut.of(QueueInfo(queue, dict.fromkeys(State, 0), None, settings), store.now_ms())


async def _set_paused(store: Store, queue: str, paused: bool) -> QueueOut:
    check_queue(queue)
    settings = (await store.queue_settings()).get(queue, QueueSettings())
    await store.set_queue(queue, replace(settings, paused=paused))
    return await queue_out(store, queue)


def router() -> APIRouter:
    """Build the queue routes."""
    routes = APIRouter(dependencies=[Depends(declared_query_only)])

    @routes.get("/v1/queues", responses=errors())
    async def list_queues(store: StoreDep) -> QueuesOut:
        """Every queue that holds timers or has settings, by name."""
        now = store.now_ms()
        return QueuesOut(queues=[QueueOut.of(info, now) for info in await store.queue_infos()])

    @routes.get("/v1/queues/{queue}", responses=errors())
    async def get_queue(queue: str, store: StoreDep) -> QueueOut:
        """One queue; a queue with no timers and no settings has zero counts."""
        check_queue(queue)
        return await queue_out(store, queue)

    @routes.put("/v1/queues/{queue}", responses=errors())
    async def put_queue(queue: str, body: QueueIn, store: StoreDep) -> QueueOut:
        """Replace the queue's settings (paused, limit); the defaults remove them."""
        check_queue(queue)
        await store.set_queue(queue, body.settings())
        return await queue_out(store, queue)

    @routes.post("/v1/queues/{queue}/pause", responses=errors())
    async def pause_queue(queue: str, store: StoreDep) -> QueueOut:
        """Stop every worker claiming from the queue (its limit stays); held leases finish."""
        return await _set_paused(store, queue, True)

    @routes.post("/v1/queues/{queue}/resume", responses=errors())
    async def resume_queue(queue: str, store: StoreDep) -> QueueOut:
        """Let workers claim from the queue again."""
        return await _set_paused(store, queue, False)

    return routes
