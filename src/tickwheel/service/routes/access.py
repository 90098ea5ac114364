"""What a tenant's token lets a route show and change: only the queues its patterns match.

The `Gate` puts the request's `Tenant` in the scope (none without ``--tokens``: then everything
is everybody's). A timer or schedule in a queue the tenant does not see is a 404, as if it did
not exist; naming such a queue to create or change something in it is a 403. Listings skip what
the tenant does not see, so a page may come back short, with a cursor to go on from.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from tickwheel.model import State, Timer
from tickwheel.schedule import ScheduleState
from tickwheel.service.api_errors import ApiError
from tickwheel.service.routes.deps import Context, found, is_timer_id
from tickwheel.service.tenants import SCOPE_KEY, Tenant
from tickwheel.stores.base import Page, QueueInfo, QueueSettings, SchedulePage, Store
from tickwheel.stores.queue_pages import QueuePage

PAGES_SCANNED = 20
"""Store pages one listing reads at most for a tenant before it answers with what it found."""


def tenant_of(request: Request) -> Tenant | None:
    """The tenant whose token the request carries; None when the service has no tokens file."""
    tenant: Tenant | None = request.scope.get(SCOPE_KEY)
    return tenant


async def _tenant(request: Request) -> Tenant | None:
    return tenant_of(request)


TenantDep = Annotated[Tenant | None, Depends(_tenant)]


def hides(tenant: Tenant | None, queue: str) -> bool:
    """Whether `queue` is outside what `tenant` sees."""
    return tenant is not None and not tenant.sees(queue)


def check_queue(tenant: Tenant | None, queue: str, field: str = "queue") -> None:
    """Refuse (403) a queue outside the tenant's patterns."""
    if tenant is not None and not tenant.sees(queue):
        raise ApiError(
            403, f"token {tenant.name!r} may not use queue {queue!r}", code="forbidden", field=field
        )


def not_found(timer_id: str) -> ApiError:
    """The 404 of a timer the store lacks, or the tenant may not see: the two read alike."""
    return ApiError(404, f"no timer {timer_id!r}", field="id")


async def found_for(store: Store, tenant: Tenant | None, timer_id: str) -> Timer:
    """The timer `timer_id` if the tenant sees its queue, else 404."""
    timer = await found(store, timer_id)
    if hides(tenant, timer.queue):
        raise not_found(timer_id)
    return timer


async def guard_timer(store: Store, tenant: Tenant | None, timer_id: str) -> Timer | None:
    """Before changing timer `timer_id`: 404 when it is in a queue the tenant does not see.

    Returns the timer as it is (None when unknown, or when no lookup was needed)."""
    if tenant is None or tenant.all_queues:
        return None
    timer = await store.get(timer_id) if is_timer_id(timer_id) else None
    if timer is not None and not tenant.sees(timer.queue):
        raise not_found(timer_id)
    return timer


async def admit(context: Context, store: Store, tenant: Tenant | None, timers: list[Timer]) -> None:
    """Count new `timers` against the tenant's quotas, or refuse them all (429)."""
    if tenant is None or context.quotas is None or not timers:
        return
    await context.quotas.admit(store, tenant, {timer.queue for timer in timers}, len(timers))


def seen_infos(tenant: Tenant | None, infos: list[QueueInfo]) -> list[QueueInfo]:
    """The queues of `infos` the tenant sees."""
    if tenant is None or tenant.all_queues:
        return infos
    return [info for info in infos if tenant.sees(info.name)]


async def timers_page(
    store: Store,
    tenant: Tenant | None,
    state: State | None,
    limit: int,
    cursor: str | None,
    *,
    queue: str | None = None,
    due_from_ms: int | None = None,
    due_to_ms: int | None = None,
) -> Page:
    """A page of `Store.list` holding only the tenant's timers; possibly short, even empty,
    with a cursor, after `PAGES_SCANNED` store pages of other tenants' timers."""
    if queue is not None:
        check_queue(tenant, queue)
    elif tenant is not None and tenant.only_queue is not None:
        queue = tenant.only_queue
    if tenant is None or tenant.all_queues or queue is not None:
        return await store.list(
            state, limit, cursor, queue=queue, due_from_ms=due_from_ms, due_to_ms=due_to_ms
        )
    timers: list[Timer] = []
    for _ in range(PAGES_SCANNED):
        page = await store.list(
            state,
            limit - len(timers),
            cursor,
            due_from_ms=due_from_ms,
            due_to_ms=due_to_ms,
        )
        timers += [timer for timer in page.timers if tenant.sees(timer.queue)]
        cursor = page.cursor
        if cursor is None or len(timers) >= limit:
            break
    return Page(timers, cursor)


async def schedules_page(
    store: Store, tenant: Tenant | None, limit: int, cursor: str | None
) -> SchedulePage:
    """A page of `Store.list_schedules` holding only the tenant's schedules, as `timers_page`."""
    if tenant is None or tenant.all_queues:
        return await store.list_schedules(limit, cursor)
    schedules: list[ScheduleState] = []
    for _ in range(PAGES_SCANNED):
        page = await store.list_schedules(limit - len(schedules), cursor)
        schedules += [s for s in page.schedules if tenant.sees(s.schedule.queue)]
        cursor = page.cursor
        if cursor is None or len(schedules) >= limit:
            break
    return SchedulePage(schedules, cursor)


async def queues_page(
    store: Store, tenant: Tenant | None, limit: int, cursor: str | None
) -> QueuePage:
    """A page of `Store.list_queues` holding only the tenant's queues, as `timers_page`; a
    tenant of one queue reads that queue alone (`Store.queue_info`)."""
    if tenant is not None and tenant.only_queue is not None:
        info = await store.queue_info(tenant.only_queue)
        listed = any(info.counts.values()) or info.settings != QueueSettings()
        return QueuePage([info] if listed and (cursor is None or info.name > cursor) else [], None)
    if tenant is None or tenant.all_queues:
        return await store.list_queues(limit, cursor)
    infos: list[QueueInfo] = []
    for _ in range(PAGES_SCANNED):
        page = await store.list_queues(limit - len(infos), cursor)
        infos += seen_infos(tenant, page.queues)
        cursor = page.cursor
        if cursor is None or len(infos) >= limit:
            break
    return QueuePage(infos, cursor)
