"""Adding timers to a `SqliteStore`: one at a time (on the caller's thread when the connection
is free, else group commit), many per transaction, and over an id that may be taken."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Sequence
from functools import partial

from tickwheel.errors import TimerExists
from tickwheel.model import Timer
from tickwheel.stores.codec import SpecCache
from tickwheel.stores.rebuild import as_scheduled
from tickwheel.stores.sqlite import queries as sql
from tickwheel.stores.sqlite.group_commit import GroupCommit
from tickwheel.stores.sqlite.queries import RowCodec
from tickwheel.stores.sqlite.schema import transaction
from tickwheel.stores.sqlite.thread import BATCH, SqliteThread


def insert_timer(
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


class SqliteAdding(SqliteThread):
    """The add calls of `SqliteStore`."""

    _adding: GroupCommit[Timer, Timer]
    _replacing: GroupCommit[Timer, Timer]

    async def _add_one(self, timer: Timer, replace: bool) -> Timer:
        """Add one timer; adds made while one is being written, from any task or thread, share
        the next transaction (group commit), each answered with its own result or error once
        that transaction has committed. New ids added in one loop pass are written on the
        caller's thread when nothing waits and the connection is free (`_add_inline`)."""
        self._check_open()
        stored = await (self._replacing if replace else self._adding).submit(timer)
        self._wakeups.notify(stored.queue)
        return stored

    def _add_inline(self, timers: list[Timer]) -> list[Timer | None] | None:
        """Write new timers in one transaction on the caller's thread, if the connection and
        SQLite's write lock are both free right now; return each as stored, or None for one
        whose id is taken (the store's thread decides it); None when nothing was written.

        Nothing here waits: not for the connection (taken without blocking), not for another
        connection's write lock (the busy timeout is 0: a busy insert fails before writing),
        not for an fsync (the connection does not checkpoint while a caller's thread holds it;
        WAL with ``synchronous=NORMAL`` syncs only at checkpoints). The commit is the same as
        on the store's thread: in the WAL when this returns. Any error rolls back, and the
        store's thread tries and reports.
        """
        if self._closed or not self._conn_lock.acquire(blocking=False):
            return None
        conn = None
        try:
            conn = self._inline_conn()
            if conn is None:
                return None
            now = self._clock()
            if len(timers) == 1:
                stored, written = insert_timer(conn, now, timers[0], sql.INSERT_NEW)
                added: list[Timer | None] = [stored if written else None]
            else:
                conn.execute("BEGIN IMMEDIATE")
                rows = [RowCodec.new_row(timer, now, 0, None) for timer in timers]
                if conn.executemany(sql.INSERT_NEW, rows).rowcount == len(rows):
                    added = [as_scheduled(timer, now) for timer in timers]
                else:  # an id is taken: write again row by row to tell which
                    conn.execute("ROLLBACK")
                    conn.execute("BEGIN IMMEDIATE")
                    added = []
                    for timer in timers:
                        stored, written = insert_timer(conn, now, timer, sql.INSERT_NEW)
                        added.append(stored if written else None)
                conn.execute("COMMIT")
            self._inline_committed()
            return added
        except sqlite3.Error:  # busy, or failing: the store's thread tries and reports
            if conn is not None and conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            return None
        finally:
            self._conn_lock.release()

    def _write_new(self, timers: list[Timer]) -> list[Timer | Exception]:
        return self._write_each(timers, replace=False)

    def _write_replacing(self, timers: list[Timer]) -> list[Timer | Exception]:
        return self._write_each(timers, replace=True)

    def _write_each(self, timers: list[Timer], *, replace: bool) -> list[Timer | Exception]:
        """On the store's thread: add `timers` in one transaction (a lone one in one statement
        when its id is new); a timer's own refusal (a taken id) is its result."""
        self._check_open()
        if len(timers) == 1:
            (timer,) = timers
            try:
                return [self._on_thread(None, lambda c, now: self._add(c, now, timer, replace))]
            except TimerExists as refused:
                return [refused]

        def work(conn: sqlite3.Connection, now: int) -> list[Timer | Exception]:
            results: list[Timer | Exception] = []
            for timer in timers:
                try:
                    results.append(self._add(conn, now, timer, replace, in_transaction=True))
                except TimerExists as refused:
                    results.append(refused)
            return results

        return self._on_thread("BEGIN IMMEDIATE", work)

    async def _add_many(self, timers: Sequence[Timer], replace: bool) -> list[Timer]:
        """Add many timers, up to 1,000 per transaction; return them as stored, in order.

        Each transaction is atomic; an id held by a timer with another spec raises
        `TimerExists` once the rest are stored.
        """
        stored: list[Timer] = []
        conflicts: list[TimerExists] = []
        specs = SpecCache()

        def work(conn: sqlite3.Connection, now: int, *, chunk: Sequence[Timer]) -> list[Timer]:
            added = []
            for timer in chunk:
                if not replace:
                    timer_added, written = insert_timer(
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

        for start in range(0, len(timers), BATCH):
            stored.extend(
                await self._run(
                    "BEGIN IMMEDIATE", partial(work, chunk=timers[start : start + BATCH])
                )
            )
        for queue in {timer.queue for timer in stored}:
            self._wakeups.notify(queue)
        if conflicts:
            raise conflicts[0]
        return stored

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
        if not replace:
            # the common case, a new id, is one statement and needs no transaction
            added, written = insert_timer(conn, now, timer, sql.INSERT_NEW)
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
        return insert_timer(conn, now, timer, sql.INSERT_OVER, attempt, deferrals=deferrals)[0]
