"""The ``/v1/dead`` routes: list dead-lettered timers, replay one, replay a queue's."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Query

from tickwheel.model import State
from tickwheel.service.api_errors import ApiError
from tickwheel.service.routes import access
from tickwheel.service.routes.access import TenantDep
from tickwheel.service.routes.deps import (
    Cursor,
    Limit,
    StoreDep,
    errors,
    found,
    is_timer_id,
    strict_router,
)
from tickwheel.service.schemas import QUEUE_PATTERN, ReplayedOut, TimerOut, TimerPage
from tickwheel.stores.checks import MAX_LIST

REPLAYS_AT_ONCE = 64
"""Replays of one request in flight together: a store round trip each on Redis."""


def router() -> APIRouter:
    """Build the dead-letter routes."""
    routes = strict_router()

    @routes.get("/v1/dead", responses=errors())
    async def list_dead(
        store: StoreDep, tenant: TenantDep, limit: Limit = 100, cursor: Cursor = None
    ) -> TimerPage:
        """List dead-lettered timers (in id order); with a token that sees some queues only, a
        page may be short, with a cursor to follow."""
        page = await access.timers_page(store, tenant, State.DEAD, limit, cursor)
        return TimerPage(timers=[TimerOut.of(t) for t in page.timers], cursor=page.cursor)

    @routes.post("/v1/dead/replay", responses=errors())
    async def replay_queue(
        store: StoreDep,
        tenant: TenantDep,
        queue: Annotated[str, Query(pattern=QUEUE_PATTERN, description="the queue to replay")],
    ) -> ReplayedOut:
        """Schedule every dead timer of `queue` again, due now; say how many."""
        access.check_queue(tenant, queue)
        replayed = 0
        cursor = None
        while True:
            page = await store.list(State.DEAD, MAX_LIST, cursor, queue=queue)
            ids = [timer.id for timer in page.timers]
            for start in range(0, len(ids), REPLAYS_AT_ONCE):
                chunk = ids[start : start + REPLAYS_AT_ONCE]
                replayed += sum(await asyncio.gather(*(store.replay(i) for i in chunk)))
            if page.cursor is None:
                return ReplayedOut(replayed=replayed)
            cursor = page.cursor

    @routes.post("/v1/dead/{timer_id}/replay", responses=errors(404))
    async def replay_dead(timer_id: str, store: StoreDep, tenant: TenantDep) -> TimerOut:
        """Schedule a dead timer again, due now."""
        await access.guard_timer(store, tenant, timer_id)
        if not (is_timer_id(timer_id) and await store.replay(timer_id)):
            raise ApiError(404, f"no dead timer {timer_id!r}", field="id")
        return TimerOut.of(await found(store, timer_id))

    return routes
