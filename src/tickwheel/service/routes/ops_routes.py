"""The operator's routes: ``/v1/stats``, ``/healthz`` and ``/metrics``."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from tickwheel.errors import StoreUnavailable
from tickwheel.model import State
from tickwheel.service.routes.access import TenantDep, seen_infos
from tickwheel.service.routes.deps import ContextDep, StoreDep, errors, strict_router
from tickwheel.service.schemas import HealthOut, StatsOut, format_ms

HEALTH_TIMEOUT_S = 2.0
_HEALTH_PROBE_ID = "tickwheel.healthz"


def router() -> APIRouter:
    """Build the stats, health and metrics routes."""
    routes = strict_router()

    @routes.get("/v1/stats", responses=errors())
    async def stats(store: StoreDep, tenant: TenantDep) -> StatsOut:
        """Count timers per state and give the earliest due time among scheduled ones (of the
        queues the token sees)."""
        if tenant is None or tenant.all_queues:
            found = await store.stats()
            counts, earliest = found.counts, found.earliest_due_ms
        else:  # summed from the queues' counts: one read of them (one queue's when one)
            only = tenant.only_queue
            infos = (
                [await store.queue_info(only)]
                if only is not None
                else seen_infos(tenant, await store.queue_infos())
            )
            counts = {state: sum(i.counts.get(state, 0) for i in infos) for state in State}
            dues = [i.earliest_due_ms for i in infos if i.earliest_due_ms is not None]
            earliest = min(dues, default=None)
        return StatsOut(
            counts={state: counts.get(state, 0) for state in State},
            earliest_due=None if earliest is None else format_ms(earliest),
            earliest_due_ms=earliest,
        )

    @routes.get("/healthz", responses=errors())
    async def health(store: StoreDep) -> HealthOut:
        """Answer 200 when the store answers a lookup within two seconds, else 503."""
        try:
            async with asyncio.timeout(HEALTH_TIMEOUT_S):
                await store.get(_HEALTH_PROBE_ID)
        except TimeoutError:
            raise StoreUnavailable(f"no answer within {HEALTH_TIMEOUT_S} s") from None
        return HealthOut(status="ok", store=type(store).__name__)

    @routes.get(
        "/metrics",
        response_class=Response,
        responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}, **errors()},
    )
    async def metrics(context: ContextDep) -> Response:
        """Render the metrics in the Prometheus text format."""
        return Response(generate_latest(context.registry), media_type=CONTENT_TYPE_LATEST)

    return routes
