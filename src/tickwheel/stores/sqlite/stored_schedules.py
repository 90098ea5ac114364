"""Durable schedules in a `SqliteStore`: a schedule is a row of ``schedules`` and its occurrences
are ordinary timers; each schedule call is one ``BEGIN IMMEDIATE`` transaction that writes the
row together with the occurrences it cancels, creates or skips, so no crash or other process
sees one without the other."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from tickwheel.errors import CapReached, ScheduleExists
from tickwheel.model import State, Timer, occurrence_id, occurrence_of
from tickwheel.schedule import Schedule, ScheduleState, Step, plan_advance
from tickwheel.stores.base import Lease, SchedulePage
from tickwheel.stores.contract import create_step, update_step
from tickwheel.stores.schedule_codec import encode_schedule
from tickwheel.stores.sqlite import queries as sql
from tickwheel.stores.sqlite.adding import insert_timer
from tickwheel.stores.sqlite.schema import DEAD, DONE
from tickwheel.stores.sqlite.thread import SqliteThread


class SqliteSchedules(SqliteThread):
    """The schedule calls of `SqliteStore`, and `advance`, which moves a series on."""

    async def add_schedule(self, schedule: Schedule) -> ScheduleState:
        def work(conn: sqlite3.Connection, now: int) -> tuple[ScheduleState, str | None]:
            existing = self._read_schedule(conn, schedule.id)
            if existing is not None:
                if self._same_spec(existing.schedule, schedule):
                    return existing, None
                raise ScheduleExists(schedule.id)
            cap = self.settings.max_schedules
            if conn.execute(sql.COUNT_SCHEDULES).fetchone()[0] >= cap:
                raise CapReached("schedules", cap, "id")
            step = create_step(schedule, now, self.settings)
            assert step.state is not None  # a new schedule always has a state to write
            return step.state, self._apply(conn, now, step)

        state, woken = await self._run("BEGIN IMMEDIATE", work)
        self._wake(woken)
        return state

    async def get_schedule(self, schedule_id: str) -> ScheduleState | None:
        return await self._run(None, lambda conn, now: self._read_schedule(conn, schedule_id))

    async def _list_schedules(self, limit: int, cursor: str | None) -> SchedulePage:
        self._check_open()
        page = sql.schedule_page(after_cursor=cursor is not None)

        def work(conn: sqlite3.Connection, now: int) -> list[ScheduleState]:
            rows = conn.execute(page, {"cursor": cursor, "limit": limit + 1})
            return [self._schedules.decode(schedule_id, record) for schedule_id, record in rows]

        states = await self._run(None, work)
        if len(states) > limit:
            return SchedulePage(states[:limit], states[limit - 1].schedule.id)
        return SchedulePage(states, None)

    async def update_schedule(self, schedule: Schedule) -> ScheduleState | None:
        def work(conn: sqlite3.Connection, now: int) -> tuple[ScheduleState | None, str | None]:
            state = self._read_schedule(conn, schedule.id)
            if state is None:
                return None, None
            pending = self._pending(conn, state, now)
            step = update_step(state, schedule, now, pending, self.settings)
            if pending is not None and pending.state is State.SCHEDULED:
                # before the step is applied: its new occurrence may take the same id
                conn.execute(sql.CANCEL, (pending.id,))
            return step.state, self._apply(conn, now, step)

        state, woken = await self._run("BEGIN IMMEDIATE", work)
        self._wake(woken)
        return state

    async def delete_schedule(self, schedule_id: str) -> bool:
        def work(conn: sqlite3.Connection, now: int) -> bool:
            row = conn.execute(sql.DELETE_SCHEDULE, (schedule_id,)).fetchone()
            if row is None:
                return False
            state = self._schedules.decode(schedule_id, row[0])
            if state.next_ms is not None:
                # CANCEL leaves a leased occurrence alone: it is in flight and runs to its end
                conn.execute(sql.CANCEL, (occurrence_id(schedule_id, state.next_ms),))
            return True

        return await self._run("BEGIN IMMEDIATE", work)

    async def advance(self, leases: Sequence[Lease]) -> list[bool]:
        """Move on the series of the occurrences among `leases`, all in one transaction.

        Plain timers' leases are answered here without touching the file, and a batch of only
        those opens no transaction: a worker calls this on every claimed batch.
        """
        self._check_open()
        occurrences = [
            (index, lease, occurrence)
            for index, lease in enumerate(leases)
            if (occurrence := occurrence_of(lease.timer.id)) is not None
        ]
        fire = [True] * len(leases)
        if not occurrences:
            return fire

        def work(conn: sqlite3.Connection, now: int) -> tuple[list[bool], set[str]]:
            decided = []
            woken = set()
            for _, lease, (schedule_id, nominal_ms) in occurrences:
                held = {"id": lease.timer.id, "token": lease.token}
                if conn.execute(sql.HOLDS, held).fetchone() is None:
                    decided.append(False)  # no longer this lease's: its holder decides
                    continue
                step = plan_advance(
                    self._read_schedule(conn, schedule_id),
                    nominal_ms,
                    now,
                    lease.timer.first_claimed_ms,
                )
                queue = self._apply(conn, now, step)
                if queue is not None:
                    woken.add(queue)
                if not step.fire:
                    conn.execute(sql.DROP_HELD, held)
                decided.append(step.fire)
            return decided, woken

        decided, woken = await self._run("BEGIN IMMEDIATE", work)
        for (index, _, _), fires in zip(occurrences, decided, strict=True):
            fire[index] = fires
        for queue in woken:
            self._wakeups.notify(queue)
        return fire

    def _read_schedule(self, conn: sqlite3.Connection, schedule_id: str) -> ScheduleState | None:
        row = conn.execute(sql.GET_SCHEDULE, (schedule_id,)).fetchone()
        return None if row is None else self._schedules.decode(schedule_id, row[0])

    def _pending(self, conn: sqlite3.Connection, state: ScheduleState, now: int) -> Timer | None:
        """The timer of `state`'s pending occurrence, finished ones included while retained."""
        if state.next_ms is None:
            return None
        params = {"id": occurrence_id(state.schedule.id, state.next_ms), "now": now}
        row = conn.execute(sql.GET, params).fetchone()
        return None if row is None else self._rows.timer(row)

    def _same_spec(self, stored: Schedule, schedule: Schedule) -> bool:
        """Whether `schedule` asks for what `stored` does, compared as stored (through JSON),
        so dict key order and tuple-vs-list in a payload do not count."""
        if stored.spec() == schedule.spec():
            return True
        written = ScheduleState(schedule=schedule, next_ms=None, created_ms=0, updated_ms=0)
        as_stored = self._schedules.decode(schedule.id, encode_schedule(written))
        return as_stored.schedule.spec() == stored.spec()

    def _apply(self, conn: sqlite3.Connection, now: int, step: Step) -> str | None:
        """Write a schedule step: its state, and its new occurrence unless a timer with that id
        is scheduled or leased; return the queue of the occurrence written, if one was."""
        if step.state is not None:
            conn.execute(sql.PUT_SCHEDULE, (step.state.schedule.id, encode_schedule(step.state)))
        timer = step.add
        if timer is None:
            return None
        if not insert_timer(conn, now, timer, sql.INSERT_NEW)[1]:
            state, attempt, deferrals = conn.execute(sql.STATE_OF, (timer.id,)).fetchone()
            if state not in (DONE, DEAD):
                return None  # pending already, or in flight: that timer carries the occurrence
            # a finished timer of the same id gives way; its attempt carries over, as when
            # add replaces, so a stale lease on it can never match a claim of the new one
            insert_timer(conn, now, timer, sql.INSERT_OVER, attempt, deferrals=deferrals)
        return timer.queue
