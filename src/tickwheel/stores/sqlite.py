"""`SqliteStore`: timers in one SQLite file, the embedded default store.

Durability: a WAL journal with ``synchronous=NORMAL``. A change is in the WAL file when its call
returns, so killing the process (even ``kill -9``) loses nothing; a power loss or OS crash may drop
the last transactions, which were written but not yet fsynced. Several processes may share one
file: a write is one statement or one ``BEGIN IMMEDIATE`` transaction, so they take turns on
SQLite's write lock, waiting up to `BUSY_TIMEOUT_MS` for it.

File modes: a timer's callback may carry credentials (an ``Authorization`` header), so a file
this store creates is readable by its owner only (0600, whatever the umask); SQLite gives its
``-wal`` and ``-shm`` files the mode of the database file. An existing file keeps its mode.

Equal due times are claimed in the order the timers became scheduled, exactly as in `MemoryStore`:
a row's ``seq`` is set past every scheduled row of its queue with the same ``due_ms`` whenever it is
(re)scheduled, and past every lease with the same deadline when it is leased.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from tickwheel.errors import Closed, LeaseLost, StoreUnavailable, TimerExists
from tickwheel.model import State, Timer, as_scheduled, restore, truncate_error
from tickwheel.stores.base import Lease, Page, Stats, StoreSettings, new_lease
from tickwheel.stores.checks import (
    check_claim,
    check_due,
    check_lease,
    check_list,
    check_timeout,
)
from tickwheel.stores.codec import SpecCache, decode_spec, encode_spec, state_code, state_of
from tickwheel.stores.wake import Wakeups

R = TypeVar("R")
Row = tuple[Any, ...]
Work = Callable[[sqlite3.Connection, int], R]

SCHEMA_VERSION = 2
MIN_SQLITE = (3, 35, 0)  # UPDATE ... FROM (3.33) and RETURNING (3.35)
BUSY_TIMEOUT_MS = 5000
FILE_MODE = 0o600
"""The mode of a database file this store creates: its callbacks may hold credentials."""
PURGE_BATCH = 1000
"""Most finished timers past their retention that one claim deletes."""
WATCH_INTERVAL_S = 0.005
"""How often `wait` checks whether another connection committed (``PRAGMA data_version``)."""

# literal state codes: SQLite uses a partial index only when a query repeats its WHERE literally
_SCHEDULED = state_code(State.SCHEDULED)
_LEASED = state_code(State.LEASED)
_DONE = state_code(State.DONE)
_DEAD = state_code(State.DEAD)

# next_due_ms reads a queue's earliest lease deadline from this one
_LEASE_BY_QUEUE = (
    f"CREATE INDEX timers_lease_queue ON timers (queue, deadline_ms) WHERE state = {_LEASED}"
)
_SCHEMA = (
    """CREATE TABLE timers (
        id TEXT NOT NULL UNIQUE,
        queue TEXT NOT NULL,
        state INTEGER NOT NULL,
        due_ms INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        deadline_ms INTEGER,
        attempt INTEGER NOT NULL,
        created_ms INTEGER NOT NULL,
        updated_ms INTEGER NOT NULL,
        last_error TEXT,
        spec TEXT NOT NULL,
        first_claimed_ms INTEGER
    )""",
    # deadline_ms is the lease deadline while leased, the end of retention while done
    f"CREATE INDEX timers_due ON timers (queue, due_ms, seq) WHERE state = {_SCHEDULED}",
    f"CREATE INDEX timers_lease ON timers (deadline_ms, seq) WHERE state = {_LEASED}",
    _LEASE_BY_QUEUE,
    f"CREATE INDEX timers_done ON timers (deadline_ms) WHERE state = {_DONE}",
    f"CREATE INDEX timers_dead ON timers (id) WHERE state = {_DEAD}",
    f"PRAGMA user_version = {SCHEMA_VERSION}",
)

_COLUMNS = (
    "id, queue, state, due_ms, attempt, created_ms, updated_ms, last_error, first_claimed_ms, spec"
)
_LIVE = f"NOT (state = {_DONE} AND deadline_ms <= :now)"


def _next_seq(queue: str, due: str) -> str:
    """SQL for a seq after every scheduled timer of `queue` due at `due` (one index probe)."""
    return f"""(SELECT coalesce(max(t.seq), 0) + 1 FROM timers AS t
                WHERE t.queue = {queue} AND t.state = {_SCHEDULED} AND t.due_ms = {due})"""


# one row at a time, in (deadline, lease order), as MemoryStore's lease heap pops them
_EXPIRED = f"""SELECT rowid FROM timers WHERE state = {_LEASED} AND deadline_ms <= :now
               ORDER BY deadline_ms, seq"""
_UNLEASE = f"""UPDATE timers SET state = {_SCHEDULED}, deadline_ms = NULL, updated_ms = :now,
                   seq = {_next_seq("timers.queue", "timers.due_ms")}
               WHERE rowid = :rowid"""

_LAST_LEASE = f"""SELECT coalesce(max(seq), 0) FROM timers
                  WHERE state = {_LEASED} AND deadline_ms = :deadline"""
# UPDATE ... FROM materializes `pick` first; the inner LIMIT bounds the window to claimed rows
_CLAIM = f"""
    UPDATE timers SET state = {_LEASED}, attempt = attempt + 1, deadline_ms = :deadline,
        updated_ms = :now, seq = :seq + pick.n,
        first_claimed_ms = coalesce(first_claimed_ms, :now)
    FROM (SELECT r, row_number() OVER (ORDER BY due_ms, seq) AS n
          FROM (SELECT rowid AS r, due_ms, seq FROM timers
                WHERE queue = :queue AND state = {_SCHEDULED} AND due_ms <= :horizon
                ORDER BY due_ms, seq LIMIT :limit)) AS pick
    WHERE timers.rowid = pick.r
    RETURNING seq, {_COLUMNS}"""

_PURGE_DONE = f"""
    DELETE FROM timers WHERE rowid IN (
        SELECT rowid FROM timers WHERE state = {_DONE} AND deadline_ms <= :now LIMIT :batch)"""

_HELD = f"id = :id AND state = {_LEASED} AND attempt = :token"
# past every lease with the same deadline, as when leased
_EXTEND = f"""deadline_ms = :deadline, seq = (SELECT coalesce(max(t.seq), 0) + 1 FROM timers AS t
                  WHERE t.state = {_LEASED} AND t.deadline_ms = :deadline)"""
_ACK = f"state = {_DONE}, deadline_ms = :end, updated_ms = :now"
# two index probes; the aggregate min() skips the NULL of an empty side
_NEXT_DUE = f"""SELECT min(t) FROM (
    SELECT (SELECT due_ms FROM timers WHERE queue = :queue AND state = {_SCHEDULED}
            ORDER BY due_ms LIMIT 1) AS t
    UNION ALL
    SELECT (SELECT deadline_ms FROM timers WHERE queue = :queue AND state = {_LEASED}
            ORDER BY deadline_ms LIMIT 1))"""


_BATCH = 1000  # timers per transaction in add_many


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def _timer(row: Row) -> Timer:
    timer_id, queue, state, due_ms, attempt, created_ms, updated_ms, last_error, first, spec = row
    callback, payload, retry = decode_spec(spec)
    return restore(
        Timer,
        id=timer_id,
        due_ms=due_ms,
        queue=queue,
        callback=callback,
        payload=payload,
        retry=retry,
        attempt=attempt,
        state=state_of(state),
        created_ms=created_ms,
        updated_ms=updated_ms,
        last_error=last_error,
        first_claimed_ms=first,
    )


def _transaction(
    conn: sqlite3.Connection, begin: str | None, clock: Callable[[], int], work: Work[R]
) -> R:
    """Run `work(conn, now)` after `begin` (None: one statement, atomic alone), then commit."""
    if begin is None:
        return work(conn, clock())
    conn.execute(begin)
    try:
        # read the clock once the lock is held, so a wait for the lock does not age `now`
        result = work(conn, clock())
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        raise
    return result


def _data_version(conn: sqlite3.Connection, now: int) -> int:
    version: int = conn.execute("PRAGMA data_version").fetchone()[0]
    return version


def _settle(conn: sqlite3.Connection, lease: Lease, assignments: str, **values: object) -> None:
    """Apply `assignments` to the timer if `lease` still holds it, else raise `LeaseLost`."""
    params = {"id": lease.timer.id, "token": lease.token, **values}
    if conn.execute(f"UPDATE timers SET {assignments} WHERE {_HELD}", params).rowcount == 0:
        raise LeaseLost(lease.timer.id, lease.token)


def _create_private(path: Path) -> None:
    """Create `path` empty with `FILE_MODE` unless it exists; SQLite then takes it as new.

    ``fchmod`` undoes the umask, which may narrow the mode ``open`` gives (to 0400, say).
    """
    if str(path) == ":memory:":  # SQLite's name for a database in memory, not a file
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
    except FileExistsError:
        return  # an existing file (or another process's, just made) keeps its mode
    except OSError as error:
        raise StoreUnavailable(f"sqlite store {path}: cannot create: {error.strerror}") from error
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)


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
        clock: Callable[[], int] = _wall_ms,
    ) -> None:
        self.path = Path(path)
        self.settings = settings or StoreSettings()
        self._clock = clock
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tickwheel-sqlite")
        self._conn: sqlite3.Connection | None = None  # used only on the executor's thread
        self._closed = False
        self._wakeups = Wakeups()
        self._watcher: asyncio.Task[None] | None = None
        self._seen_version: int | None = None

    def now_ms(self) -> int:
        return self._clock()

    async def add(self, timer: Timer, *, replace: bool = False) -> Timer:
        stored = await self._run(None, lambda conn, now: self._add(conn, now, timer, replace))
        self._wakeups.notify(stored.queue)
        return stored

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
                        conn,
                        now,
                        timer,
                        "INSERT",
                        "ON CONFLICT (id) DO NOTHING",
                        spec=specs.encode(timer),
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
            sql = f"SELECT {_COLUMNS} FROM timers WHERE id = :id AND {_LIVE}"
            row = conn.execute(sql, {"id": timer_id, "now": now}).fetchone()
            return None if row is None else _timer(row)

        return await self._run(None, work)

    async def cancel(self, timer_id: str) -> bool:
        sql = f"DELETE FROM timers WHERE id = ? AND state = {_SCHEDULED}"
        return await self._run(None, lambda conn, now: conn.execute(sql, (timer_id,)).rowcount > 0)

    async def reschedule(self, timer_id: str, due_ms: int) -> bool:
        def work(conn: sqlite3.Connection, now: int) -> Row | None:
            check_due(due_ms, now, self.settings)
            sql = f"""UPDATE timers SET due_ms = :due, updated_ms = :now, first_claimed_ms = NULL,
                          seq = {_next_seq("timers.queue", ":due")}
                      WHERE id = :id AND state = {_SCHEDULED} RETURNING queue"""
            row: Row | None = conn.execute(
                sql, {"due": due_ms, "now": now, "id": timer_id}
            ).fetchone()
            return row

        return self._woke(await self._run(None, work))

    async def claim(self, queue: str, horizon_ms: int, limit: int, lease_ms: int) -> list[Lease]:
        self._check_open()
        check_claim(limit, lease_ms, self.settings)
        self._wakeups.mark(queue)

        def work(conn: sqlite3.Connection, now: int) -> list[Lease]:
            expired = [{"rowid": r, "now": now} for (r,) in conn.execute(_EXPIRED, {"now": now})]
            conn.executemany(_UNLEASE, expired)
            deadline = now + lease_ms
            seq = conn.execute(_LAST_LEASE, {"deadline": deadline}).fetchone()[0]
            params = {"queue": queue, "horizon": horizon_ms, "limit": limit}
            params |= {"deadline": deadline, "now": now, "seq": seq}
            rows = conn.execute(_CLAIM, params).fetchall()
            conn.execute(_PURGE_DONE, {"now": now, "batch": PURGE_BATCH})
            rows.sort(key=lambda row: row[0])  # RETURNING order is unspecified
            return [new_lease(t, t.attempt, deadline) for t in (_timer(row[1:]) for row in rows)]

        return await self._run("BEGIN IMMEDIATE", work)

    async def extend(self, lease: Lease, lease_ms: int) -> Lease:
        check_lease(lease_ms)

        def work(conn: sqlite3.Connection, now: int) -> Lease:
            _settle(conn, lease, _EXTEND, deadline=now + lease_ms)
            return Lease(lease.timer, lease.token, now + lease_ms)

        return await self._run(None, work)

    async def next_due_ms(self, queue: str) -> int | None:
        self._wakeups.mark(queue)

        def work(conn: sqlite3.Connection, now: int) -> int | None:
            due: int | None = conn.execute(_NEXT_DUE, {"queue": queue}).fetchone()[0]
            return due

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
            _settle(conn, lease, _ACK, end=now + self.settings.retention_ms, now=now)

        await self._run(None, work)

    async def ack_many(self, leases: Sequence[Lease]) -> list[bool]:
        """Ack many leases, up to 1,000 per transaction."""

        def work(conn: sqlite3.Connection, now: int, *, chunk: Sequence[Lease]) -> list[bool]:
            values = {"end": now + self.settings.retention_ms, "now": now}
            sql = f"UPDATE timers SET {_ACK} WHERE {_HELD}"
            return [
                conn.execute(sql, {"id": lease.timer.id, "token": lease.token, **values}).rowcount
                > 0
                for lease in chunk
            ]

        acked: list[bool] = []
        for start in range(0, len(leases), _BATCH):
            chunk = leases[start : start + _BATCH]
            acked += await self._run("BEGIN IMMEDIATE", partial(work, chunk=chunk))
        return acked

    async def retry(self, lease: Lease, due_ms: int, error: str) -> None:
        def work(conn: sqlite3.Connection, now: int) -> None:
            check_due(due_ms, now, self.settings)
            sql = f"""state = {_SCHEDULED}, due_ms = :due, deadline_ms = NULL, updated_ms = :now,
                      last_error = :error, seq = {_next_seq("timers.queue", ":due")}"""
            _settle(conn, lease, sql, due=due_ms, now=now, error=truncate_error(error))

        await self._run(None, work)
        self._wakeups.notify(lease.timer.queue)

    async def kill(self, lease: Lease, error: str) -> None:
        def work(conn: sqlite3.Connection, now: int) -> None:
            sql = f"state = {_DEAD}, deadline_ms = NULL, updated_ms = :now, last_error = :error"
            _settle(conn, lease, sql, now=now, error=truncate_error(error))

        await self._run(None, work)

    async def replay(self, timer_id: str) -> bool:
        def work(conn: sqlite3.Connection, now: int) -> Row | None:
            sql = f"""UPDATE timers SET state = {_SCHEDULED}, due_ms = :now, updated_ms = :now,
                          first_claimed_ms = NULL, seq = {_next_seq("timers.queue", ":now")}
                      WHERE id = :id AND state = {_DEAD} RETURNING queue"""
            row: Row | None = conn.execute(sql, {"now": now, "id": timer_id}).fetchone()
            return row

        return self._woke(await self._run(None, work))

    async def list(
        self, state: State | None = None, limit: int = 100, cursor: str | None = None
    ) -> Page:
        self._check_open()
        check_list(limit)
        where = [_LIVE]
        if cursor is not None:
            where.append("id > :cursor")
        if state is not None:
            where.append(f"state = {state_code(state)}")
        sql = f"SELECT {_COLUMNS} FROM timers WHERE {' AND '.join(where)} ORDER BY id LIMIT :limit"

        def work(conn: sqlite3.Connection, now: int) -> list[Timer]:
            params = {"now": now, "cursor": cursor, "limit": limit + 1}
            return [_timer(row) for row in conn.execute(sql, params)]

        timers = await self._run(None, work)
        if len(timers) > limit:
            return Page(timers[:limit], timers[limit - 1].id)
        return Page(timers, None)

    async def stats(self) -> Stats:
        def work(conn: sqlite3.Connection, now: int) -> Stats:
            # one count per state, each over that state's partial index rather than the table
            scheduled, earliest = conn.execute(
                f"SELECT count(*), min(due_ms) FROM timers WHERE state = {_SCHEDULED}"
            ).fetchone()
            leased = f"SELECT count(*) FROM timers WHERE state = {_LEASED}"
            done = f"SELECT count(*) FROM timers WHERE state = {_DONE} AND deadline_ms > ?"
            dead = f"SELECT count(*) FROM timers WHERE state = {_DEAD}"
            counts = {
                State.SCHEDULED: scheduled,
                State.LEASED: conn.execute(leased).fetchone()[0],
                State.DONE: conn.execute(done, (now,)).fetchone()[0],
                State.DEAD: conn.execute(dead).fetchone()[0],
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

    def _add(self, conn: sqlite3.Connection, now: int, timer: Timer, replace: bool) -> Timer:
        check_due(timer.due_ms, now, self.settings)
        if not replace:
            # the common case, a new id, is one statement and needs no transaction
            added, written = self._insert(conn, now, timer, "INSERT", "ON CONFLICT (id) DO NOTHING")
            if written:
                return added
        return _transaction(
            conn,
            "BEGIN IMMEDIATE",
            self._clock,
            lambda c, now: self._add_over(c, now, timer, replace),
        )

    def _add_over(self, conn: sqlite3.Connection, now: int, timer: Timer, replace: bool) -> Timer:
        """Add `timer` where its id may be taken: idempotent, conflict or replace."""
        sql = f"SELECT {_COLUMNS} FROM timers WHERE id = :id AND {_LIVE}"
        row = conn.execute(sql, {"id": timer.id, "now": now}).fetchone()
        if row is not None and not replace:
            existing = _timer(row)
            # compare as stored (through JSON), so dict key order and tuple-vs-list do not count
            asked = (timer.due_ms, timer.queue, *decode_spec(encode_spec(timer)))
            if (existing.due_ms, existing.queue, *decode_spec(row[-1])) == asked:
                return existing
            raise TimerExists(timer.id)
        # REPLACE also drops a finished timer past its retention that still holds the id; the
        # attempt carries over so a lease on the replaced timer can never match a new one
        attempt = 0 if row is None else _timer(row).attempt
        return self._insert(conn, now, timer, "INSERT OR REPLACE", "", attempt)[0]

    @staticmethod
    def _insert(
        conn: sqlite3.Connection,
        now: int,
        timer: Timer,
        verb: str,
        conflict: str,
        attempt: int = 0,
        spec: str | None = None,
    ) -> tuple[Timer, bool]:
        """Write `timer` as newly scheduled; return it as stored and whether a row was written.

        `spec` is `encode_spec(timer)` when the caller has it already.
        """
        stored = as_scheduled(timer, now, attempt)
        sql = f"""{verb} INTO timers ({_COLUMNS}, seq)
                  VALUES (:id, :queue, {_SCHEDULED}, :due, :attempt, :now, :now, NULL, NULL, :spec,
                          {_next_seq(":queue", ":due")}) {conflict}"""
        params = {
            "id": stored.id,
            "queue": stored.queue,
            "due": stored.due_ms,
            "now": now,
            "attempt": attempt,
        }
        params["spec"] = encode_spec(stored) if spec is None else spec
        written = conn.execute(sql, params).rowcount > 0
        return stored, written

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
                self._conn = self._connect()
            return _transaction(self._conn, begin, self._clock, work)
        except sqlite3.Error as error:
            raise StoreUnavailable(f"sqlite store {self.path}: {error}") from error

    def _connect(self) -> sqlite3.Connection:
        """Open the file in WAL mode and create the schema if the file is new."""
        if sqlite3.sqlite_version_info < MIN_SQLITE:
            raise StoreUnavailable(
                f"the SQLite store needs SQLite {'.'.join(map(str, MIN_SQLITE))} or newer; "
                f"Python here links SQLite {sqlite3.sqlite_version}"
            )
        _create_private(self.path)
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                _transaction(conn, "BEGIN IMMEDIATE", self._clock, self._migrate)
        except BaseException:
            conn.close()
            raise
        return conn

    def _migrate(self, conn: sqlite3.Connection, now: int) -> None:
        # read again under the write lock: another process may have just created the schema
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == 0:
            for statement in _SCHEMA:
                conn.execute(statement)
        elif version == 1:
            # 1 -> 2: when the current run of attempts began; next_due_ms's lease index
            conn.execute("ALTER TABLE timers ADD COLUMN first_claimed_ms INTEGER")
            conn.execute(_LEASE_BY_QUEUE)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        elif version != SCHEMA_VERSION:
            raise StoreUnavailable(
                f"{self.path} has schema version {version}; this tickwheel reads {SCHEMA_VERSION}"
            )

    def _disconnect(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("PRAGMA optimize")
            self._conn.close()
            self._conn = None

    def _check_open(self) -> None:
        if self._closed:
            raise Closed("store is closed")
