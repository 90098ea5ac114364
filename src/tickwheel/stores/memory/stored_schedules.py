"""Durable schedules in a `MemoryStore`: each a `ScheduleState`, its occurrences ordinary timers."""

from __future__ import annotations

from collections.abc import Sequence

from tickwheel.errors import CapReached, ScheduleExists
from tickwheel.model import State, Timer, occurrence_id, occurrence_of
from tickwheel.schedule import Schedule, ScheduleState, Step, plan_advance
from tickwheel.stores.base import Lease, SchedulePage
from tickwheel.stores.contract import create_step, update_step
from tickwheel.stores.memory.heaps import MemoryHeaps
from tickwheel.stores.rebuild import as_scheduled


class MemorySchedules(MemoryHeaps):
    """The schedule calls of `MemoryStore`, and `advance`, which moves a series on."""

    async def add_schedule(self, schedule: Schedule) -> ScheduleState:
        self._open()
        existing = self._schedules.get(schedule.id)
        if existing is not None:
            if existing.schedule.spec() == schedule.spec():
                return existing
            raise ScheduleExists(schedule.id)
        if len(self._schedules) >= self.settings.max_schedules:
            raise CapReached("schedules", self.settings.max_schedules, "id")
        now = self._clock()
        step = create_step(schedule, now, self.settings)
        self._apply(step, now)
        return self._schedules[schedule.id]

    async def get_schedule(self, schedule_id: str) -> ScheduleState | None:
        self._open()
        return self._schedules.get(schedule_id)

    async def _list_schedules(self, limit: int, cursor: str | None) -> SchedulePage:
        self._open()
        ids = sorted(i for i in self._schedules if cursor is None or i > cursor)
        page = [self._schedules[i] for i in ids[:limit]]
        return SchedulePage(page, ids[limit - 1] if len(ids) > limit else None)

    async def update_schedule(self, schedule: Schedule) -> ScheduleState | None:
        self._open()
        state = self._schedules.get(schedule.id)
        if state is None:
            return None
        now = self._clock()
        pending = self._pending(state, now)
        step = update_step(state, schedule, now, pending, self.settings)
        if pending is not None and pending.state is State.SCHEDULED:
            self._forget(pending)
        return self._apply(step, now)

    async def delete_schedule(self, schedule_id: str) -> bool:
        self._open()
        state = self._schedules.pop(schedule_id, None)
        if state is None:
            return False
        pending = self._pending(state, self._clock())
        if pending is not None and pending.state is State.SCHEDULED:
            self._forget(pending)
        return True

    async def advance(self, leases: Sequence[Lease]) -> list[bool]:
        self._open()
        now = self._clock()
        fire = []
        for lease in leases:
            occurrence = occurrence_of(lease.timer.id)
            if occurrence is None:
                fire.append(True)
                continue
            timer = self._timers.get(lease.timer.id)
            if timer is None or timer.state is not State.LEASED or timer.attempt != lease.token:
                fire.append(False)  # no longer this lease's: its holder decides
                continue
            schedule_id, nominal_ms = occurrence
            step = plan_advance(
                self._schedules.get(schedule_id), nominal_ms, now, timer.first_claimed_ms
            )
            self._apply(step, now)
            if not step.fire:
                self._forget(timer)
            fire.append(step.fire)
        return fire

    def _pending(self, state: ScheduleState, now: int) -> Timer | None:
        if state.next_ms is None:
            return None
        return self._live(occurrence_id(state.schedule.id, state.next_ms), now)

    def _apply(self, step: Step, now: int) -> ScheduleState | None:
        """Write a schedule step: its state, and its new occurrence unless one is pending."""
        if step.add is not None:
            existing = self._live(step.add.id, now)
            if existing is None:
                self._schedule(as_scheduled(step.add, now))
            elif existing.state in (State.DONE, State.DEAD):
                # its attempt carries over, as a replaced timer's does: a lease on the finished
                # timer must never match a claim of the new one
                self._forget(existing)
                self._schedule(as_scheduled(step.add, now, existing.attempt, existing.deferrals))
        if step.state is not None:
            self._schedules[step.state.schedule.id] = step.state
        return step.state
