"""A `PostgresStore`'s schedule operations: a schedule row and the occurrences it creates,
cancels or skips are written in one transaction (`ops` says how operations run).

A schedule is a row of ``schedules``: its id and the record `schedule_codec` encodes. Its
occurrences are ordinary timers, written by the same statements as any other.
"""

from __future__ import annotations

from collections.abc import Sequence

from tickwheel.errors import CapReached, ScheduleExists
from tickwheel.model import State, Timer, occurrence_id
from tickwheel.schedule import (
    Schedule,
    ScheduleState,
    Step,
    plan_advance,
)
from tickwheel.stores.base import Lease, StoreSettings
from tickwheel.stores.contract import create_step, update_step
from tickwheel.stores.postgres import queries as sql
from tickwheel.stores.postgres.ops import Op
from tickwheel.stores.postgres.queries import RowCodec
from tickwheel.stores.postgres.schema import DEAD, DONE
from tickwheel.stores.schedule_codec import ScheduleCodec, encode_schedule


class ScheduleOps:
    """The schedule operations of one store, with its codecs and settings."""

    def __init__(self, rows: RowCodec, settings: StoreSettings) -> None:
        self.rows = rows
        self.codec = ScheduleCodec()
        self.settings = settings

    def read(self, schedule_id: str, *, lock: bool = False) -> Op[ScheduleState | None]:
        found, _ = yield (
            (sql.GET_SCHEDULE_LOCKED if lock else sql.GET_SCHEDULE),
            {"id": schedule_id},
        )
        return self.codec.decode(schedule_id, found[0][0]) if found else None

    def add(self, schedule: Schedule, now: int) -> Op[tuple[ScheduleState, str | None]]:
        """`Store.add_schedule`: return the state and the queue of the occurrence written."""
        yield sql.CAP_LOCK, {"table": "schedules"}  # one creator at a time: the cap holds
        existing = yield from self.read(schedule.id)
        if existing is not None:
            if self._same_spec(existing.schedule, schedule):
                return existing, None
            raise ScheduleExists(schedule.id)
        cap = self.settings.max_schedules
        (count,), _ = yield sql.COUNT_SCHEDULES, {}
        if count[0] >= cap:
            raise CapReached("schedules", cap, "id")
        step = create_step(schedule, now, self.settings)
        if step.state is None:
            raise AssertionError("a new schedule always has a state to write")
        return step.state, (yield from self.apply(step, now))

    def update(self, schedule: Schedule, now: int) -> Op[tuple[ScheduleState | None, str | None]]:
        """`Store.update_schedule`: return the new state (None: no such schedule) and the
        queue of the occurrence written."""
        state = yield from self.read(schedule.id, lock=True)
        if state is None:
            return None, None
        pending = yield from self._pending(state, now)
        step = update_step(state, schedule, now, pending, self.settings)
        if pending is not None and pending.state is State.SCHEDULED:
            # before the step is applied: its new occurrence may take the same id
            yield sql.CANCEL, {"id": pending.id}
        return step.state, (yield from self.apply(step, now))

    def delete(self, schedule_id: str) -> Op[bool]:
        found, _ = yield sql.DELETE_SCHEDULE, {"id": schedule_id}
        if not found:
            return False
        state = self.codec.decode(schedule_id, found[0][0])
        if state.next_ms is not None:
            # CANCEL leaves a leased occurrence alone: it is in flight and runs to its end
            yield sql.CANCEL, {"id": occurrence_id(schedule_id, state.next_ms)}
        return True

    def advance(
        self, occurrences: Sequence[tuple[Lease, tuple[str, int]]], now: int
    ) -> Op[tuple[list[bool], set[str]]]:
        """`Store.advance` for the leases of occurrences: whether each fires, and the queues
        of the occurrences written."""
        decided: list[bool] = []
        woken: set[str] = set()
        for lease, (schedule_id, nominal_ms) in occurrences:
            held = {"id": lease.timer.id, "token": lease.token}
            found, _ = yield sql.HOLDS, held
            if not found:
                decided.append(False)  # no longer this lease's: its holder decides
                continue
            state = yield from self.read(schedule_id, lock=True)
            step = plan_advance(state, nominal_ms, now, lease.timer.first_claimed_ms)
            queue = yield from self.apply(step, now)
            if queue is not None:
                woken.add(queue)
            if not step.fire:
                yield sql.DROP_HELD, held
            decided.append(step.fire)
        return decided, woken

    def apply(self, step: Step, now: int) -> Op[str | None]:
        """Write a schedule step: its state, and its new occurrence unless a timer with that id
        is scheduled or leased; return the queue of the occurrence written, if one was."""
        if step.state is not None:
            record = encode_schedule(step.state)
            yield sql.PUT_SCHEDULE, {"id": step.state.schedule.id, "record": record}
        timer = step.add
        if timer is None:
            return None
        _, written = yield sql.INSERT_NEW, RowCodec.new_row(timer, now, 0, None)
        if not written:
            found, _ = yield sql.STATE_OF, {"id": timer.id}
            state, attempt, deferrals = found[0]
            if state not in (DONE, DEAD):
                return None  # pending already, or in flight: that timer carries the occurrence
            # a finished timer of the same id gives way; its attempt carries over, as when
            # add replaces, so a stale lease on it can never match a claim of the new one
            yield sql.INSERT_OVER, RowCodec.new_row(timer, now, attempt, None, deferrals)
        return timer.queue

    def _pending(self, state: ScheduleState, now: int) -> Op[Timer | None]:
        """The timer of `state`'s pending occurrence, finished ones included while retained."""
        if state.next_ms is None:
            return None
        params = {"id": occurrence_id(state.schedule.id, state.next_ms), "now": now}
        found, _ = yield sql.GET, params
        return self.rows.timer(found[0]) if found else None

    def _same_spec(self, stored: Schedule, schedule: Schedule) -> bool:
        """Whether `schedule` asks for what `stored` does, compared as stored (through JSON),
        so dict key order and tuple-vs-list in a payload do not count."""
        if stored.spec() == schedule.spec():
            return True
        written = ScheduleState(schedule=schedule, next_ms=None, created_ms=0, updated_ms=0)
        as_stored = self.codec.decode(schedule.id, encode_schedule(written))
        return as_stored.schedule.spec() == stored.spec()
