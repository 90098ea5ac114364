"""The ``/v1/dead`` routes: list dead-lettered timers, replay one."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from tickwheel.model import State
from tickwheel.service.errors import ApiError
from tickwheel.service.routes.deps import (
    Cursor,
    Limit,
    StoreDep,
    declared_query_only,
    errors,
    found,
    is_timer_id,
)
from tickwheel.service.schemas import TimerOut, TimerPage


def router() -> APIRouter:
    """Build the dead-letter routes."""
    routes = APIRouter(dependencies=[Depends(declared_query_only)])

    @routes.get("/v1/dead", responses=errors())
    async def list_dead(store: StoreDep, limit: Limit = 100, cursor: Cursor = None) -> TimerPage:
        """List dead-lettered timers (in id order)."""
        page = await store.list(State.DEAD, limit, cursor)
        return TimerPage(timers=[TimerOut.of(t) for t in page.timers], cursor=page.cursor)

    @routes.post("/v1/dead/{timer_id}/replay", responses=errors(404))
    async def replay_dead(timer_id: str, store: StoreDep) -> TimerOut:
        """Schedule a dead timer again, due now."""
        if not (is_timer_id(timer_id) and await store.replay(timer_id)):
            raise ApiError(404, f"no dead timer {timer_id!r}", field="id")
        return TimerOut.of(await found(store, timer_id))

    return routes
