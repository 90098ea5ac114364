"""The ``/v1/schedules`` routes: create, list, get, change, delete, pause, resume, and runs.

A schedule's occurrences are timers with ids ``<schedule id>@<nominal ms>``; the store creates
each with its successor, so these routes only ever change the schedule and let the store move
the pending occurrence.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from itertools import pairwise
from typing import Annotated

from fastapi import APIRouter, Query, Response

from tickwheel.callbacks.guard import check_target_url
from tickwheel.errors import InvalidArgument, ScheduleExists
from tickwheel.model import new_id
from tickwheel.recurrence import upcoming
from tickwheel.schedule import Schedule, ScheduleState
from tickwheel.service.api_errors import ApiError
from tickwheel.service.routes import access
from tickwheel.service.routes.access import TenantDep
from tickwheel.service.routes.create import DELAY_MATCH_MS
from tickwheel.service.routes.deps import (
    Context,
    ContextDep,
    Cursor,
    StoreDep,
    errors,
    strict_router,
)
from tickwheel.service.schedule_schemas import (
    SCHEDULE_ID_PATTERN,
    RunOut,
    RunsOut,
    ScheduleChange,
    ScheduleDetailOut,
    ScheduleIn,
    ScheduleOut,
    SchedulePageOut,
)
from tickwheel.service.tenants import Tenant
from tickwheel.stores.base import Store
from tickwheel.stores.checks import MAX_LIST

VALID_SCHEDULE_ID = re.compile(SCHEDULE_ID_PATTERN)
ScheduleLimit = Annotated[int, Query(ge=1, le=MAX_LIST, description="schedules per page")]


GAP_SAMPLES = 200
"""Occurrences of a cron rule looked at for its shortest gap: over three minutes of one with
seconds, so the gaps within a minute and across two minutes are both among them."""


def _checked(context: Context, schedule: Schedule) -> Schedule:
    """Refuse a callback URL the service may not call, as a timer's is refused, and a rule
    that fires more often than the operator allows (`min_schedule_interval_s`)."""
    if schedule.callback is not None:
        check_target_url(
            schedule.callback.parsed_url, allow_private=context.settings.allow_private_targets
        )
    least_ms = context.settings.min_schedule_interval_s * 1000
    if schedule.every_s is not None and schedule.every_s * 1000 < least_ms:
        raise InvalidArgument(
            "every", f"must be at least {least_ms // 1000} s on this service (its minimum)"
        )
    if schedule.cron is not None and least_ms > 1000:
        times = upcoming(schedule.rule, schedule.start_ms - 1, GAP_SAMPLES)
        if any(later - earlier < least_ms for earlier, later in pairwise(times)):
            raise InvalidArgument(
                "cron",
                f"fires more often than once every {least_ms // 1000} s, this service's "
                "minimum interval between occurrences",
            )
    return schedule


def _same(existing: ScheduleState, schedule: Schedule, item: ScheduleIn) -> bool:
    """Whether `schedule` repeats the stored one. Without `start`, a schedule starts from when
    it is created, so a repeat matches one that started within a second of that."""
    stored = existing.schedule
    if item.start is None:
        expected_ms = item.default_start_ms(existing.created_ms)
        if abs(stored.start_ms - expected_ms) > DELAY_MATCH_MS:
            return False
        try:
            schedule = replace(schedule, start_ms=stored.start_ms)
        except InvalidArgument:  # its end falls before that start: another spec
            return False
    return stored.spec() == schedule.spec()


async def _found(store: Store, schedule_id: str, tenant: Tenant | None) -> ScheduleState:
    """Return the schedule, or raise a 404 (an id no schedule can have is not looked up, and
    one in a queue the tenant does not see reads as unknown)."""
    valid = VALID_SCHEDULE_ID.fullmatch(schedule_id) is not None
    state = await store.get_schedule(schedule_id) if valid else None
    if state is None or access.hides(tenant, state.schedule.queue):
        raise ApiError(404, f"no schedule {schedule_id!r}", field="id")
    return state


async def _updated(store: Store, schedule: Schedule) -> ScheduleState:
    """Store the changed `schedule`; a 404 when it was deleted meanwhile."""
    state = await store.update_schedule(schedule)
    if state is None:
        raise ApiError(404, f"no schedule {schedule.id!r}", field="id")
    return state


async def _paused(
    store: Store, schedule_id: str, tenant: Tenant | None, paused: bool
) -> ScheduleDetailOut:
    state = await _found(store, schedule_id, tenant)
    if state.schedule.paused != paused:
        state = await _updated(store, replace(state.schedule, paused=paused))
    return ScheduleDetailOut.of(state)


async def _runs(store: Store, state: ScheduleState) -> list[RunOut]:
    schedule = state.schedule
    pending = [] if state.next_ms is None else [state.next_ms]
    nominals = [*pending, *state.recent]
    ids = [schedule.occurrence_id(ms) for ms in nominals]
    timers = await asyncio.gather(*(store.get(timer_id) for timer_id in ids))
    runs = [
        RunOut.of(ms, timer_id, ms in pending, timer)
        for ms, timer_id, timer in zip(nominals, ids, timers, strict=True)
    ]
    # the pending occurrence has no timer while paused: then it is only upcoming
    return [run for run in runs if not run.pending or run.state is not None]


def router() -> APIRouter:
    """Build the schedule routes; each finds the store and settings through the request's app."""
    routes = strict_router()

    @routes.post(
        "/v1/schedules",
        status_code=201,
        responses={
            200: {"model": ScheduleDetailOut, "description": "a repeat"},
            **errors(403, 409, 429),
        },
    )
    async def create_schedule(
        item: ScheduleIn,
        response: Response,
        context: ContextDep,
        store: StoreDep,
        tenant: TenantDep,
    ) -> ScheduleDetailOut:
        """Create a schedule; the same id and spec again returns it (200), another spec is 409.

        Its first occurrence is the first from `start`: with `every`, `start` itself, which is
        one interval from now unless given."""
        now_ms = store.now_ms()
        schedule = _checked(context, item.to_schedule(now_ms, new_id(now_ms)))
        access.check_queue(tenant, schedule.queue)
        existing = await store.get_schedule(schedule.id) if item.id is not None else None
        if existing is None and tenant is not None and context.quotas is not None:
            await context.quotas.admit_schedule(store, tenant, schedule.queue)
        if existing is not None:
            if not _same(existing, schedule, item):
                raise ScheduleExists(schedule.id)
            response.status_code = 200
            return ScheduleDetailOut.of(existing)
        await context.admit_queue(store, schedule.queue)
        return ScheduleDetailOut.of(await store.add_schedule(schedule))

    @routes.get("/v1/schedules", responses=errors())
    async def list_schedules(
        store: StoreDep, tenant: TenantDep, limit: ScheduleLimit = 100, cursor: Cursor = None
    ) -> SchedulePageOut:
        """List schedules; follow `cursor` to the end (each schedule once).

        SQLite and memory stores list in id order, Redis shard by shard. With a token that
        sees some queues only, a page may be short, with a cursor to follow."""
        page = await access.schedules_page(store, tenant, limit, cursor)
        return SchedulePageOut(
            schedules=[ScheduleOut.of(state) for state in page.schedules], cursor=page.cursor
        )

    @routes.get("/v1/schedules/{schedule_id}", responses=errors(404))
    async def get_schedule(
        schedule_id: str, store: StoreDep, tenant: TenantDep
    ) -> ScheduleDetailOut:
        """Return the schedule with its next five occurrences."""
        return ScheduleDetailOut.of(await _found(store, schedule_id, tenant))

    @routes.patch("/v1/schedules/{schedule_id}", responses=errors(404))
    async def change_schedule(
        schedule_id: str,
        change: ScheduleChange,
        context: ContextDep,
        store: StoreDep,
        tenant: TenantDep,
    ) -> ScheduleDetailOut:
        """Change a schedule's rule, target, misfire policy or end; the pending occurrence
        moves to the first one after now under the new definition (one already firing runs
        to its end). A paused schedule stays paused."""
        state = await _found(store, schedule_id, tenant)
        schedule = _checked(context, change.apply(state.schedule))
        access.check_queue(tenant, schedule.queue)
        return ScheduleDetailOut.of(await _updated(store, schedule))

    @routes.delete("/v1/schedules/{schedule_id}", status_code=204, responses=errors(404))
    async def delete_schedule(schedule_id: str, store: StoreDep, tenant: TenantDep) -> Response:
        """Delete a schedule and cancel its pending occurrence (one already firing runs to its
        end; the timers of past runs stay until their retention ends)."""
        if tenant is not None and not tenant.all_queues:
            await _found(store, schedule_id, tenant)
        valid = VALID_SCHEDULE_ID.fullmatch(schedule_id) is not None
        if not (valid and await store.delete_schedule(schedule_id)):
            raise ApiError(404, f"no schedule {schedule_id!r}", field="id")
        return Response(status_code=204)

    @routes.post("/v1/schedules/{schedule_id}/pause", responses=errors(404))
    async def pause_schedule(
        schedule_id: str, store: StoreDep, tenant: TenantDep
    ) -> ScheduleDetailOut:
        """Pause a schedule: its pending occurrence's timer is cancelled (unless already
        firing), and nothing fires until it is resumed."""
        return await _paused(store, schedule_id, tenant, True)

    @routes.post("/v1/schedules/{schedule_id}/resume", responses=errors(404))
    async def resume_schedule(
        schedule_id: str, store: StoreDep, tenant: TenantDep
    ) -> ScheduleDetailOut:
        """Resume a schedule: its pending occurrence's timer comes back at its own time; if
        that passed while paused, it comes up late and `misfire` decides."""
        return await _paused(store, schedule_id, tenant, False)

    @routes.get("/v1/schedules/{schedule_id}/runs", responses=errors(404))
    async def schedule_runs(schedule_id: str, store: StoreDep, tenant: TenantDep) -> RunsOut:
        """List the schedule's latest occurrences, newest first: the pending one while its
        timer exists, then the last ten fired, each with its timer's state (null once the
        store no longer keeps that timer)."""
        return RunsOut(runs=await _runs(store, await _found(store, schedule_id, tenant)))

    return routes
