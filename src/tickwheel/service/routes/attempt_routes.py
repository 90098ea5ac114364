"""``GET /v1/timers/{id}/attempts``: a timer's attempt history, newest first."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from tickwheel.service.attempt_schemas import AttemptOut, AttemptsOut
from tickwheel.service.routes import access
from tickwheel.service.routes.access import TenantDep
from tickwheel.service.routes.deps import StoreDep, errors, strict_router
from tickwheel.stores.attempt_record import MAX_ATTEMPT_HISTORY

AttemptLimit = Annotated[
    int | None,
    Query(ge=1, le=MAX_ATTEMPT_HISTORY, description="the newest this many (default: all kept)"),
]


def router() -> APIRouter:
    """Build the attempt-history route."""
    routes = strict_router()

    @routes.get("/v1/timers/{timer_id}/attempts", responses=errors(404))
    async def get_attempts(
        timer_id: str, store: StoreDep, tenant: TenantDep, limit: AttemptLimit = None
    ) -> AttemptsOut:
        """A timer's recorded attempts, newest first: when each was sent and by which worker,
        the status or the kind of failure, the latency, the first KiB of the response body and
        when the retry it led to is due. A timer in a queue the token does not see is 404."""
        await access.found_for(store, tenant, timer_id)
        attempts = await store.attempts(timer_id)
        if limit is not None:
            attempts = attempts[:limit]
        return AttemptsOut(timer_id=timer_id, attempts=[AttemptOut.of(a) for a in attempts])

    return routes
