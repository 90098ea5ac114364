"""The ``/v1/limits`` routes: the limit on callbacks to each host, shared by every worker.

A host is written as the host of a callback URL is compared: lower case, IDNA for other
scripts, an IPv6 address in brackets, ``:port`` when not the scheme's default.
"""

from __future__ import annotations

from fastapi import APIRouter, Response

from tickwheel.service.api_errors import ApiError
from tickwheel.service.flow_schemas import HostLimitOut, LimitIn, LimitsOut
from tickwheel.service.routes.deps import (
    DEFAULT_PAGE,
    Cursor,
    PageSize,
    StoreDep,
    errors,
    strict_router,
)
from tickwheel.stores.checks import check_host


def router() -> APIRouter:
    """Build the limit routes; ``{host:path}`` takes a host with a slash too, to refuse it."""
    routes = strict_router()

    @routes.get("/v1/limits", responses=errors())
    async def list_limits(
        store: StoreDep, limit: PageSize = DEFAULT_PAGE, cursor: Cursor = None
    ) -> LimitsOut:
        """Host limits by host, a page at a time; follow `cursor` to the end (each host once)."""
        page = await store.list_limits(limit, cursor)
        limits = [HostLimitOut.of_host(host, found) for host, found in page.limits]
        return LimitsOut(limits=limits, cursor=page.cursor)

    @routes.put("/v1/limits/{host:path}", responses=errors())
    async def put_limit(host: str, body: LimitIn, store: StoreDep) -> HostLimitOut:
        """Set the host's limit, replacing any it had."""
        check_host(host)
        limit = body.limit()
        await store.set_limit(host, limit)
        return HostLimitOut.of_host(host, limit)

    @routes.delete("/v1/limits/{host:path}", status_code=204, responses=errors(404))
    async def delete_limit(host: str, store: StoreDep) -> Response:
        """Remove the host's limit; 404 when it had none."""
        check_host(host)
        if not await store.delete_limit(host):
            raise ApiError(404, f"no limit on host {host!r}", field="host")
        return Response(status_code=204)

    return routes
