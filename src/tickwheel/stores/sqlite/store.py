"""`SqliteStore`: timers in one SQLite file, the embedded default store.

Durability: a WAL journal with ``synchronous=NORMAL``. A change is in the WAL file when its call
returns, so killing the process (even ``kill -9``) loses nothing; a power loss or OS crash may drop
the last transactions, which were written but not yet fsynced. Several processes may share one
file: a write is one statement or one ``BEGIN IMMEDIATE`` transaction, so they take turns on
SQLite's write lock, waiting up to `schema.BUSY_TIMEOUT_MS` for it.

Schedules: a schedule is a row of ``schedules`` and its occurrences are ordinary timers; each
schedule call is one ``BEGIN IMMEDIATE`` transaction that writes the row together with the
occurrences it cancels, creates or skips, so no crash or other process sees one without the other.

The file, its schema and migrations are `schema.py`'s; the SQL and the rows are `queries.py`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

from tickwheel.errors import (
    CapReached,
    Closed,
    InvalidArgument,
    LeaseLost,
    ScheduleExists,
    StoreUnavailable,
    TimerExists,
)
from tickwheel.model import State, Timer, occurrence_id, occurrence_of, truncate_error
from tickwheel.schedule import (
    Schedule,
    ScheduleState,
    Step,
    plan_advance,
    plan_create,
    plan_update,
)
from tickwheel.stores.base import (
    ANY_QUEUE,
    Deferral,
    DueQueues,
    Lease,
    Limit,
    LimitPage,
    Page,
    QueueInfo,
    QueueSettings,
    SchedulePage,
    Stats,
    StoreSettings,
    new_lease,
    wall_ms,
)
from tickwheel.stores.checks import (
    check_claim,
    check_due,
    check_due_queues,
    check_host,
    check_lease,
    check_list,
    check_list_filters,
    check_queue_limit,
    check_queue_pause,
    check_queue_settings,
    check_timeout,
)
from tickwheel.stores.coalesce import Coalescer
from tickwheel.stores.codec import (
    SpecCache,
    decode_limit,
    decode_queue_settings,
    encode_limit,
    encode_queue_settings,
)
from tickwheel.stores.rebuild import as_scheduled
from tickwheel.stores.schedule_codec import ScheduleCodec, encode_schedule
from tickwheel.stores.sqlite import queries as sql
from tickwheel.stores.sqlite.queries import Row, RowCodec
from tickwheel.stores.sqlite.schema import DEAD, DONE, R, Work, connect, transaction
from tickwheel.stores.wake import Wakeups

PURGE_BATCH = 1000
"""Most finished timers past their retention that one claim deletes."""
WATCH_INTERVAL_S = 0.005
"""How often `wait` checks whether another connection committed (``PRAGMA data_version``)."""
_BATCH = 1000  # timers per transaction in add_many


def _data_version(conn: sqlite3.Connection, now: int) -> int:
    version: int = conn.execute("PRAGMA data_version").fetchone()[0]
    return version


def _settle(conn: sqlite3.Connection, lease: Lease, update: str, **values: object) -> None:
    """Run `update` (a settling statement of `queries`) if `lease` still holds its timer, else
    raise `LeaseLost`."""
    params = {"id": lease.timer.id, "token": lease.token, **values}
    if conn.execute(update, params).rowcount == 0:
        raise LeaseLost(lease.timer.id, lease.token)


def _write_queue(conn: sqlite3.Connection, queue: str, settings: QueueSettings) -> None:
    """Store `queue`'s settings; the defaults delete its row."""
    if settings == QueueSettings():
        conn.execute(sql.DELETE_QUEUE_SETTINGS, (queue,))
    else:
        conn.execute(sql.PUT_QUEUE_SETTINGS, (queue, encode_queue_settings(settings)))


class SqliteStore:
    """Timers in one SQLite file, shared safely by tasks, threads and processes.

    Every call runs on one thread per store, which owns the connection and opens it on first
    use, so construction does no I/O. `clock` is called on that thread.
    """

    def __init__(
        self,
        path: str | Path,
        settings: StoreSettings | None = None,
        *,
        clock: Callable[[], int] = wall_ms,
    ) -> None:
        self.path = Path(path)
        self.settings = settings or StoreSettings()
        self._clock = clock
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tickwheel-sqlite")
        self._conn: sqlite3.Connection | None = None  # used only on the executor's thread
        self._closed = False
        self._rows = RowCodec()  # used only on the executor's thread
        self._schedules = ScheduleCodec()  # used only on the executor's thread
        self._wakeups = Wakeups()
        self._adding = Coalescer(self._add_new, _BATCH)
        self._replacing = Coalescer(self._add_replacing, _BATCH)
        self._watcher: asyncio.Task[None] | None = None
        self._seen_version: int | None = None

    def now_ms(self) -> int:
        return self._clock()

    async def add(self, timer: Timer, *, replace: bool = False) -> Timer:
        """Add one timer; adds made while one is being written share the next transaction
        (group commit), each with its own result or error."""
        self._check_open()
        return await (self._replacing if replace else self._adding).submit(timer)

    async def _add_new(self, timers: list[Timer]) -> list[Timer | Exception]:
        return await self._add_each(timers, replace=False)

    async def _add_replacing(self, timers: list[Timer]) -> list[Timer | Exception]:
        return await self._add_each(timers, replace=True)

    async def _add_each(self, timers: list[Timer], *, replace: bool) -> list[Timer | Exception]:
        """Add `timers` in one transaction (a lone one in one statement when its id is new);
        a timer's own refusal (a taken id, a due time past the horizon) is its result."""
        if len(timers) == 1:
            (timer,) = timers
            try:
                stored = await self._run(None, lambda c, now: self._add(c, now, timer, replace))
            except (TimerExists, InvalidArgument) as refused:
                return [refused]
            self._wakeups.notify(stored.queue)
            return [stored]

        def work(conn: sqlite3.Connection, now: int) -> list[Timer | Exception]:
            results: list[Timer | Exception] = []
            for timer in timers:
                try:
                    results.append(self._add(conn, now, timer, replace, in_transaction=True))
                except (TimerExists, InvalidArgument) as refused:
                    results.append(refused)
            return results

        results = await self._run("BEGIN IMMEDIATE", work)
        for queue in {r.queue for r in results if isinstance(r, Timer)}:
            self._wakeups.notify(queue)
        return results

    async def add_many(self, timers: Sequence[Timer], *, replace: bool = False) -> list[Timer]:
        """Add many timers, up to 1,000 per transaction; return them as stored, in order.

        Each transaction is atomic; an id held by a timer with another spec raises
        `TimerExists` once the rest are stored.
        """
        stored: list[Timer] = []
        conflicts: list[TimerExists] = []
        specs = SpecCache()

        def work(conn: sqlite3.Connection, now: int, *, chunk: Sequence[Timer]) -> list[Timer]:
            for timer in chunk:
                check_due(timer.due_ms, now, self.settings)
            added = []
            for timer in chunk:
                if not replace:
                    timer_added, written = self._insert(
                        conn, now, timer, sql.INSERT_NEW, spec=specs.encode(timer)
                    )
                    if written:
                        added.append(timer_added)
                        continue
                try:
                    added.append(self._add_over(conn, now, timer, replace))
                except TimerExists as conflict:
                    conflicts.append(conflict)
            return added

        for start in range(0, len(timers), _BATCH):
            stored.extend(
                await self._run(
                    "BEGIN IMMEDIATE", partial(work, chunk=timers[start : start + _BATCH])
                )
            )
        for queue in {timer.queue for timer in stored}:
            self._wakeups.notify(queue)
        if conflicts:
            raise conflicts[0]
        return stored

    async def get(self, timer_id: str) -> Timer | None:
        def work(conn: sqlite3.Connection, now: int) -> Timer | None:
            row = conn.execute(sql.GET, {"id": timer_id, "now": now}).fetchone()
            return None if row is None else self._rows.timer(row)

        return await self._run(None, work)

    async def cancel(self, timer_id: str) -> bool:
        return await self._run(
            None, lambda conn, now: conn.execute(sql.CANCEL, (timer_id,)).rowcount > 0
        )

    async def reschedule(self, timer_id: str, due_ms: int) -> bool:
        def work(conn: sqlite3.Connection, now: int) -> Row | None:
            check_due(due_ms, now, self.settings)
            params = {"due": due_ms, "now": now, "id": timer_id}
            row: Row | None = conn.execute(sql.RESCHEDULE, params).fetchone()
            return row

        return self._woke(await self._run(None, work))

    async def claim(self, queue: str, horizon_ms: int, limit: int, lease_ms: int) -> list[Lease]:
        self._check_open()
        check_claim(limit, lease_ms, self.settings)
        self._wakeups.mark(queue)

        def work(conn: sqlite3.Connection, now: int) -> list[Lease]:
            expired = [{"rowid": r, "now": now} for (r,) in conn.execute(sql.EXPIRED, {"now": now})]
            conn.executemany(sql.UNLEASE, expired)
            deadline = now + lease_ms
            seq = conn.execute(sql.LAST_LEASE, {"deadline": deadline}).fetchone()[0]
            params = {"queue": queue, "horizon": horizon_ms, "limit": limit}
            params |= {"deadline": deadline, "now": now, "seq": seq}
            rows = conn.execute(sql.CLAIM, params).fetchall()
            at = conn.execute(sql.NEXT_DUE, {"queue": queue}).fetchone()[0]
            if at is None:
                conn.execute(sql.DROP_HEAD, {"queue": queue})
            else:
                conn.execute(sql.SET_HEAD, {"queue": queue, "at": at})
            conn.execute(sql.PURGE_DONE, {"now": now, "batch": PURGE_BATCH})
            rows.sort(key=lambda row: row[0])  # RETURNING order is unspecified
            timers = [self._rows.timer(row[1:]) for row in rows]
            return [new_lease(timer, timer.attempt, deadline) for timer in timers]

        return await self._run("BEGIN IMMEDIATE", work)

    async def extend(self, lease: Lease, lease_ms: int) -> Lease:
        check_lease(lease_ms)

        def work(conn: sqlite3.Connection, now: int) -> Lease:
            _settle(conn, lease, sql.EXTEND, deadline=now + lease_ms)
            return Lease(lease.timer, lease.token, now + lease_ms)

        return await self._run(None, work)

    async def next_due_ms(self, queue: str) -> int | None:
        self._wakeups.mark(queue)

        def work(conn: sqlite3.Connection, now: int) -> int | None:
            due: int | None = conn.execute(sql.NEXT_DUE, {"queue": queue}).fetchone()[0]
            return due

        return await self._run(None, work)

    async def due_queues(self, horizon_ms: int, limit: int) -> DueQueues:
        check_due_queues(horizon_ms, limit)
        self._wakeups.mark(ANY_QUEUE)

        def work(conn: sqlite3.Connection, now: int) -> DueQueues:
            params = {"horizon": horizon_ms, "limit": limit}
            due = [queue for (queue,) in conn.execute(sql.DUE_HEADS, params)]
            return DueQueues(due, conn.execute(sql.NEXT_HEAD, params).fetchone()[0])

        return await self._run(None, work)

    async def queues(self) -> list[str]:
        self._wakeups.mark(ANY_QUEUE)

        def work(conn: sqlite3.Connection, now: int) -> list[str]:
            return [name for (name,) in conn.execute(sql.QUEUES)]

        return await self._run(None, work)

    async def wait(self, queue: str, timeout_s: float) -> bool:
        """Wait for a change to `queue` by this store, or a commit by any other connection.

        Other connections (processes) are seen by polling ``PRAGMA data_version`` every
        `WATCH_INTERVAL_S` while a task waits; the file does not say what changed, so such a
        commit wakes every waiter of this store, whatever its queue.
        """
        self._check_open()
        check_timeout(timeout_s)
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.create_task(self._watch(), name=f"tickwheel-watch {self.path}")
        return await self._wakeups.wait(queue, timeout_s)

    async def ack(self, lease: Lease) -> None:
        def work(conn: sqlite3.Connection, now: int) -> None:
            end = now + self.settings.retention_of(lease.timer.id)
            _settle(conn, lease, sql.ACK, end=end, now=now)

        await self._run(None, work)

    async def ack_many(self, leases: Sequence[Lease]) -> list[bool]:
        """Ack many leases, up to 1,000 per transaction."""

        def work(conn: sqlite3.Connection, now: int, *, chunk: Sequence[Lease]) -> list[bool]:
            retention_of = self.settings.retention_of
            held = [
                {
                    "id": lease.timer.id,
                    "token": lease.token,
                    "end": now + retention_of(lease.timer.id),
                    "now": now,
                }
                for lease in chunk
            ]
            return [conn.execute(sql.ACK, params).rowcount > 0 for params in held]

        acked: list[bool] = []
        for start in range(0, len(leases), _BATCH):
            chunk = leases[start : start + _BATCH]
            acked += await self._run("BEGIN IMMEDIATE", partial(work, chunk=chunk))
        return acked

    async def retry(self, lease: Lease, due_ms: int, error: str) -> None:
        def work(conn: sqlite3.Connection, now: int) -> None:
            check_due(due_ms, now, self.settings)
            _settle(conn, lease, sql.RETRY, due=due_ms, now=now, error=truncate_error(error))

        await self._run(None, work)
        self._wakeups.notify(lease.timer.queue)

    async def defer(self, lease: Lease, due_ms: int, reason: str) -> None:
        def work(conn: sqlite3.Connection, now: int) -> None:
            check_due(due_ms, now, self.settings)
            _settle(conn, lease, sql.DEFER, due=due_ms, now=now, error=truncate_error(reason))

        await self._run(None, work)
        self._wakeups.notify(lease.timer.queue)

    async def defer_many(self, deferrals: Sequence[Deferral]) -> list[bool]:
        """Defer many leases, up to 1,000 per transaction."""

        def work(conn: sqlite3.Connection, now: int, *, chunk: Sequence[Deferral]) -> list[bool]:
            for _, due_ms, _ in chunk:
                check_due(due_ms, now, self.settings)
            return [
                conn.execute(
                    sql.DEFER,
                    {"id": lease.timer.id, "token": lease.token, "due": due_ms, "now": now,
                     "error": truncate_error(reason)},
                ).rowcount > 0
                for lease, due_ms, reason in chunk
            ]  # fmt: skip

        deferred: list[bool] = []
        for start in range(0, len(deferrals), _BATCH):
            chunk = deferrals[start : start + _BATCH]
            deferred += await self._run("BEGIN IMMEDIATE", partial(work, chunk=chunk))
        for queue in {lease.timer.queue for lease, _, _ in deferrals}:
            self._wakeups.notify(queue)
        return deferred

    async def kill(self, lease: Lease, error: str) -> None:
        def work(conn: sqlite3.Connection, now: int) -> None:
            _settle(conn, lease, sql.KILL, now=now, error=truncate_error(error))

        await self._run(None, work)

    async def replay(self, timer_id: str) -> bool:
        def work(conn: sqlite3.Connection, now: int) -> Row | None:
            row: Row | None = conn.execute(sql.REPLAY, {"now": now, "id": timer_id}).fetchone()
            return row

        return self._woke(await self._run(None, work))

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
            step = plan_create(schedule, now)
            assert step.state is not None  # a new schedule always has a state to write
            if step.add is not None:
                check_due(step.add.due_ms, now, self.settings)
            return step.state, self._apply(conn, now, step)

        state, woken = await self._run("BEGIN IMMEDIATE", work)
        self._wake(woken)
        return state

    async def get_schedule(self, schedule_id: str) -> ScheduleState | None:
        return await self._run(None, lambda conn, now: self._read_schedule(conn, schedule_id))

    async def list_schedules(self, limit: int = 100, cursor: str | None = None) -> SchedulePage:
        self._check_open()
        check_list(limit)
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
            step = plan_update(state, schedule, now, pending)
            if step.add is not None:
                check_due(step.add.due_ms, now, self.settings)
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

    async def pause(self, timer_id: str) -> bool:
        if occurrence_of(timer_id) is not None:
            return False  # its schedule owns it
        return await self._run(
            None,
            lambda conn, now: conn.execute(sql.PAUSE, {"id": timer_id, "now": now}).rowcount > 0,
        )

    async def resume(self, timer_id: str) -> bool:
        def work(conn: sqlite3.Connection, now: int) -> Row | None:
            row: Row | None = conn.execute(sql.RESUME, {"id": timer_id, "now": now}).fetchone()
            return row

        return self._woke(await self._run(None, work))

    async def queue_settings(self) -> dict[str, QueueSettings]:
        def work(conn: sqlite3.Connection, now: int) -> dict[str, QueueSettings]:
            rows = conn.execute(sql.QUEUE_SETTINGS)
            return {queue: decode_queue_settings(record) for queue, record in rows}

        return await self._run(None, work)

    async def set_queue(self, queue: str, settings: QueueSettings) -> None:
        check_queue_settings(queue, settings)
        await self._run(None, lambda conn, now: _write_queue(conn, queue, settings))
        self._wakeups.notify(queue)

    async def pause_queue(self, queue: str, paused: bool) -> bool:
        check_queue_pause(queue, paused)
        before = await self._change_queue(
            queue, lambda settings: dataclasses.replace(settings, paused=paused)
        )
        return before.paused != paused

    async def set_queue_limit(self, queue: str, limit: Limit | None) -> bool:
        check_queue_limit(queue, limit)
        before = await self._change_queue(
            queue, lambda settings: dataclasses.replace(settings, limit=limit)
        )
        return before.limit is not None

    async def queue_infos(self) -> list[QueueInfo]:
        def work(conn: sqlite3.Connection, now: int) -> list[QueueInfo]:
            counts: dict[str, dict[State, int]] = {}
            earliest: dict[str, int] = {}

            def tally(queue: str, state: State, n: int) -> None:
                counts.setdefault(queue, dict.fromkeys(State, 0))[state] = n

            for queue, n, due in conn.execute(sql.QUEUE_SCHEDULED):
                tally(queue, State.SCHEDULED, n)
                earliest[queue] = due
            for state, query in sql.QUEUE_COUNTS.items():
                for queue, n in conn.execute(query, {"now": now}):
                    tally(queue, state, n)
            settings = {
                queue: decode_queue_settings(record)
                for queue, record in conn.execute(sql.QUEUE_SETTINGS)
            }
            return [
                QueueInfo(
                    queue,
                    counts.get(queue) or dict.fromkeys(State, 0),
                    earliest.get(queue),
                    settings.get(queue, QueueSettings()),
                )
                for queue in sorted(counts.keys() | settings.keys())
            ]

        # one read transaction: every count comes from one snapshot
        return await self._run("BEGIN DEFERRED", work)

    async def limits(self) -> dict[str, Limit]:
        def work(conn: sqlite3.Connection, now: int) -> dict[str, Limit]:
            return {host: decode_limit(record) for host, record in conn.execute(sql.LIMITS)}

        return await self._run(None, work)

    async def list_limits(self, limit: int = 100, cursor: str | None = None) -> LimitPage:
        self._check_open()
        check_list(limit)
        params = {"cursor": "" if cursor is None else cursor, "limit": limit + 1}

        def work(conn: sqlite3.Connection, now: int) -> list[tuple[str, Limit]]:
            rows = conn.execute(sql.LIMIT_PAGE, params)
            return [(host, decode_limit(record)) for host, record in rows]

        found = await self._run(None, work)
        if len(found) > limit:
            return LimitPage(found[:limit], found[limit - 1][0])
        return LimitPage(found, None)

    async def set_limit(self, host: str, limit: Limit) -> None:
        check_host(host)
        record = encode_limit(limit)
        cap = self.settings.max_limits

        def work(conn: sqlite3.Connection, now: int) -> None:
            new = conn.execute(sql.HAS_LIMIT, (host,)).fetchone() is None
            if new and conn.execute(sql.COUNT_LIMITS).fetchone()[0] >= cap:
                raise CapReached("limits", cap, "host")
            conn.execute(sql.PUT_LIMIT, (host, record))

        await self._run("BEGIN IMMEDIATE", work)

    async def delete_limit(self, host: str) -> bool:
        return await self._run(
            None, lambda conn, now: conn.execute(sql.DELETE_LIMIT, (host,)).rowcount > 0
        )

    async def settings_versions(self) -> tuple[int, int]:
        def work(conn: sqlite3.Connection, now: int) -> tuple[int, int]:
            queues, limits = conn.execute(sql.SETTINGS_VERSIONS).fetchone()
            return queues, limits

        return await self._run(None, work)

    async def list(
        self,
        state: State | None = None,
        limit: int = 100,
        cursor: str | None = None,
        *,
        queue: str | None = None,
        due_from_ms: int | None = None,
        due_to_ms: int | None = None,
    ) -> Page:
        self._check_open()
        check_list(limit)
        check_list_filters(queue, due_from_ms, due_to_ms)
        page = sql.list_page(
            state,
            after_cursor=cursor is not None,
            queue=queue is not None,
            due_from=due_from_ms is not None,
            due_to=due_to_ms is not None,
        )

        def work(conn: sqlite3.Connection, now: int) -> list[Timer]:
            params = {"now": now, "cursor": cursor, "limit": limit + 1, "queue": queue}
            params |= {"due_from": due_from_ms, "due_to": due_to_ms}
            return [self._rows.timer(row) for row in conn.execute(page, params)]

        timers = await self._run(None, work)
        if len(timers) > limit:
            return Page(timers[:limit], timers[limit - 1].id)
        return Page(timers, None)

    async def stats(self) -> Stats:
        def work(conn: sqlite3.Connection, now: int) -> Stats:
            scheduled, earliest = conn.execute(sql.COUNT_SCHEDULED).fetchone()
            counts = {
                State.SCHEDULED: scheduled,
                State.LEASED: conn.execute(sql.COUNT_LEASED).fetchone()[0],
                State.DONE: conn.execute(sql.COUNT_DONE, (now,)).fetchone()[0],
                State.DEAD: conn.execute(sql.COUNT_DEAD).fetchone()[0],
                State.PAUSED: conn.execute(sql.COUNT_PAUSED).fetchone()[0],
            }
            return Stats(counts, earliest)

        # one read transaction: the four counts come from one snapshot
        return await self._run("BEGIN DEFERRED", work)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
        try:
            # queued behind every call already submitted, so those finish first
            await asyncio.get_running_loop().run_in_executor(self._executor, self._disconnect)
        finally:
            self._executor.shutdown(wait=True)

    def _woke(self, row: Row | None) -> bool:
        """Wake the waiters of the queue in `row` (a changed timer's), if any; return whether."""
        if row is None:
            return False
        self._wakeups.notify(row[0])
        return True

    async def _watch(self) -> None:
        """Wake every waiter when another connection has committed, polling while tasks wait.

        ``PRAGMA data_version`` on the store's own connection changes only when another
        connection commits (this store's changes notify their queue directly). The last
        version seen outlives the task, so a commit between two waits still wakes the second;
        the first poll of a store wakes its waiters, having nothing to compare with.
        """
        while True:
            try:
                version = await self._run(None, _data_version)
            except (StoreUnavailable, Closed):
                self._wakeups.notify_all()  # the waiters' next call reports it
                return
            if version != self._seen_version:
                self._seen_version = version
                self._wakeups.notify_all()
            if not self._wakeups:
                return
            await asyncio.sleep(WATCH_INTERVAL_S)

    def _add(
        self,
        conn: sqlite3.Connection,
        now: int,
        timer: Timer,
        replace: bool,
        *,
        in_transaction: bool = False,
    ) -> Timer:
        """Add `timer`; where its id may be taken, in a transaction of its own unless the
        caller holds one."""
        check_due(timer.due_ms, now, self.settings)
        if not replace:
            # the common case, a new id, is one statement and needs no transaction
            added, written = self._insert(conn, now, timer, sql.INSERT_NEW)
            if written:
                return added
        if in_transaction:
            return self._add_over(conn, now, timer, replace)
        return transaction(
            conn,
            "BEGIN IMMEDIATE",
            self._clock,
            lambda c, now: self._add_over(c, now, timer, replace),
        )

    def _add_over(self, conn: sqlite3.Connection, now: int, timer: Timer, replace: bool) -> Timer:
        """Add `timer` where its id may be taken: idempotent, conflict or replace."""
        row = conn.execute(sql.GET, {"id": timer.id, "now": now}).fetchone()
        if row is not None and not replace:
            if self._rows.same_spec(row, timer):
                return self._rows.timer(row)
            raise TimerExists(timer.id)
        # REPLACE also drops a finished timer past its retention that still holds the id; the
        # attempt carries over so a lease on the replaced timer can never match a new one
        old = None if row is None else self._rows.timer(row)
        attempt, deferrals = (0, 0) if old is None else (old.attempt, old.deferrals)
        return self._insert(conn, now, timer, sql.INSERT_OVER, attempt, deferrals=deferrals)[0]

    @staticmethod
    def _insert(
        conn: sqlite3.Connection,
        now: int,
        timer: Timer,
        insert: str,
        attempt: int = 0,
        spec: str | None = None,
        *,
        deferrals: int = 0,
    ) -> tuple[Timer, bool]:
        """Write `timer` as newly scheduled by `insert` (`queries.INSERT_NEW` or `INSERT_OVER`);
        return it as stored and whether a row was written.

        `spec` is `encode_spec(timer)` when the caller has it already.
        """
        row = RowCodec.new_row(timer, now, attempt, spec, deferrals)
        written = conn.execute(insert, row).rowcount > 0
        return as_scheduled(timer, now, attempt, deferrals), written

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
        if not self._insert(conn, now, timer, sql.INSERT_NEW)[1]:
            state, attempt, deferrals = conn.execute(sql.STATE_OF, (timer.id,)).fetchone()
            if state not in (DONE, DEAD):
                return None  # pending already, or in flight: that timer carries the occurrence
            # a finished timer of the same id gives way; its attempt carries over, as when
            # add replaces, so a stale lease on it can never match a claim of the new one
            self._insert(conn, now, timer, sql.INSERT_OVER, attempt, deferrals=deferrals)
        return timer.queue

    async def _change_queue(
        self, queue: str, change: Callable[[QueueSettings], QueueSettings]
    ) -> QueueSettings:
        """Write `change` of `queue`'s settings in one transaction (so a concurrent change of
        another part is kept), wake its waiters, and return the settings it had."""

        def work(conn: sqlite3.Connection, now: int) -> QueueSettings:
            row = conn.execute(sql.QUEUE_SETTINGS_OF, (queue,)).fetchone()
            before = QueueSettings() if row is None else decode_queue_settings(row[0])
            _write_queue(conn, queue, change(before))
            return before

        before = await self._run("BEGIN IMMEDIATE", work)
        self._wakeups.notify(queue)
        return before

    def _wake(self, queue: str | None) -> None:
        if queue is not None:
            self._wakeups.notify(queue)

    async def _run(self, begin: str | None, work: Work[R]) -> R:
        self._check_open()
        try:
            future = asyncio.get_running_loop().run_in_executor(
                self._executor, self._on_thread, begin, work
            )
        except RuntimeError as error:  # the executor shut down under a concurrent close
            raise Closed("store is closed") from error
        return await future

    def _on_thread(self, begin: str | None, work: Work[R]) -> R:
        try:
            if self._conn is None:
                self._conn = connect(self.path, self._clock)
            return transaction(self._conn, begin, self._clock, work)
        except sqlite3.Error as error:
            raise StoreUnavailable(f"sqlite store {self.path}: {error}") from error

    def _disconnect(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("PRAGMA optimize")
            self._conn.close()
            self._conn = None

    def _check_open(self) -> None:
        if self._closed:
            raise Closed("store is closed")
