"""`BesideTimers`: the parts of a `PostgresStore` beside its timers' life: schedules, pause and
resume, queue settings, host limits, pages and counts."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from tickwheel.model import State, Timer, occurrence_of
from tickwheel.schedule import Schedule, ScheduleState
from tickwheel.stores.base import (
    Lease,
    Limit,
    LimitPage,
    Page,
    QueueInfo,
    QueueSettings,
    SchedulePage,
    Stats,
)
from tickwheel.stores.postgres import flow_ops as flow
from tickwheel.stores.postgres import queries as sql
from tickwheel.stores.postgres.ops import Op, queue_of
from tickwheel.stores.postgres.runner import Runner


class BesideTimers(Runner):
    """Schedules, pauses, settings, limits, listing and stats."""

    async def add_schedule(self, schedule: Schedule) -> ScheduleState:
        state, woken = await self._run(
            lambda now: self._schedules.add(schedule, now), transaction=True
        )
        self._woke(woken)
        return state

    async def get_schedule(self, schedule_id: str) -> ScheduleState | None:
        return await self._run(lambda now: self._schedules.read(schedule_id))

    async def _list_schedules(self, limit: int, cursor: str | None) -> SchedulePage:
        query = sql.schedule_page(after_cursor=cursor is not None)
        decode = self._schedules.codec.decode

        def work(now: int) -> Op[list[ScheduleState]]:
            found, _ = yield query, {"cursor": cursor, "limit": limit + 1}
            return [decode(schedule_id, record) for schedule_id, record in found]

        states = await self._run(work)
        if len(states) > limit:
            return SchedulePage(states[:limit], states[limit - 1].schedule.id)
        return SchedulePage(states, None)

    async def update_schedule(self, schedule: Schedule) -> ScheduleState | None:
        state, woken = await self._run(
            lambda now: self._schedules.update(schedule, now), transaction=True
        )
        self._woke(woken)
        return state

    async def delete_schedule(self, schedule_id: str) -> bool:
        return await self._run(lambda now: self._schedules.delete(schedule_id), transaction=True)

    async def advance(self, leases: Sequence[Lease]) -> list[bool]:
        """Move on the series of the occurrences among `leases`, all in one transaction; a
        batch of plain timers' leases touches no table."""
        self._check_open()  # plain timers take no connection: a closed store refuses them still
        occurrences = [
            (index, lease, occurrence)
            for index, lease in enumerate(leases)
            if (occurrence := occurrence_of(lease.timer.id)) is not None
        ]
        fire = [True] * len(leases)
        if not occurrences:
            return fire
        pairs = [(lease, occurrence) for _, lease, occurrence in occurrences]
        decided, woken = await self._run(
            lambda now: self._schedules.advance(pairs, now), transaction=True
        )
        for (index, _, _), fires in zip(occurrences, decided, strict=True):
            fire[index] = fires
        for queue in woken:
            self._wakeups.notify(queue)
        return fire

    async def pause(self, timer_id: str) -> bool:
        if occurrence_of(timer_id) is not None:
            return False  # its schedule owns it

        def work(now: int) -> Op[bool]:
            _, changed = yield sql.PAUSE, {"id": timer_id, "now": now}
            return changed > 0

        return await self._run(work)

    async def resume(self, timer_id: str) -> bool:
        return self._woke(await self._run(lambda now: queue_of(sql.RESUME, timer_id, now)))

    async def queue_settings(self) -> dict[str, QueueSettings]:
        return await self._run(lambda now: flow.queue_settings())

    async def _set_queue(self, queue: str, settings: QueueSettings) -> None:
        await self._run(lambda now: flow.write_queue(queue, settings))
        self._wakeups.notify(queue)

    async def _pause_queue(self, queue: str, paused: bool) -> bool:
        before = await self._change_queue(
            queue, lambda settings: dataclasses.replace(settings, paused=paused)
        )
        return before.paused != paused

    async def _set_queue_limit(self, queue: str, limit: Limit | None) -> bool:
        before = await self._change_queue(
            queue, lambda settings: dataclasses.replace(settings, limit=limit)
        )
        return before.limit is not None

    async def _change_queue(
        self, queue: str, change: Callable[[QueueSettings], QueueSettings]
    ) -> QueueSettings:
        before = await self._run(lambda now: flow.change_queue(queue, change), transaction=True)
        self._wakeups.notify(queue)
        return before

    async def queue_infos(self) -> list[QueueInfo]:
        return await self._run(flow.queue_infos, transaction=True)

    async def limits(self) -> dict[str, Limit]:
        return await self._run(lambda now: flow.limits())

    async def _list_limits(self, limit: int, cursor: str | None) -> LimitPage:
        found = await self._run(lambda now: flow.limit_page(cursor, limit))
        if len(found) > limit:
            return LimitPage(found[:limit], found[limit - 1][0])
        return LimitPage(found, None)

    async def _set_limit(self, host: str, limit: Limit) -> None:
        cap = self.settings.max_limits
        await self._run(lambda now: flow.set_limit(host, limit, cap), transaction=True)

    async def delete_limit(self, host: str) -> bool:
        return await self._run(lambda now: flow.delete_limit(host))

    async def settings_versions(self) -> tuple[int, int]:
        return await self._run(lambda now: flow.settings_versions())

    async def _list(
        self,
        state: State | None,
        limit: int,
        cursor: str | None,
        queue: str | None,
        due_from_ms: int | None,
        due_to_ms: int | None,
    ) -> Page:
        query = sql.list_page(
            state,
            after_cursor=cursor is not None,
            queue=queue is not None,
            due_from=due_from_ms is not None,
            due_to=due_to_ms is not None,
        )

        def work(now: int) -> Op[list[Timer]]:
            params = {"now": now, "cursor": cursor, "limit": limit + 1, "queue": queue}
            params |= {"due_from": due_from_ms, "due_to": due_to_ms}
            return flow.page(self._rows, query, params)

        timers = await self._run(work)
        if len(timers) > limit:
            return Page(timers[:limit], timers[limit - 1].id)
        return Page(timers, None)

    async def stats(self) -> Stats:
        return await self._run(flow.stats)
