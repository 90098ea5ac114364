"""Claiming and settling the timers of a `SqliteStore`: claim, extend, ack, retry, defer and kill,
and the due-queue reads a worker claims by."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from tickwheel.errors import LeaseLost
from tickwheel.model import truncate_error
from tickwheel.stores.attempt_record import Attempt
from tickwheel.stores.base import (
    ANY_QUEUE,
    SINCE_EVER_MS,
    Deferral,
    DueQueues,
    Lease,
    new_lease,
)
from tickwheel.stores.sqlite import queries as sql
from tickwheel.stores.sqlite.attempt_history import SqliteAttemptHistory
from tickwheel.stores.sqlite.group_commit import GroupCommit
from tickwheel.stores.sqlite.thread import BATCH

PURGE_BATCH = 1000
"""Most finished timers past their retention that one claim deletes."""
CLAIM_BATCH = 32
"""Claims that go out in one transaction at most: one holds the store's thread for a bounded
time, and a claim queued behind a crowd of others waits for one such transaction, not for each
of theirs."""


@dataclass(frozen=True, slots=True)
class ClaimAsk:
    """One queue's claim, as a batch of claims carries it."""

    queue: str
    horizon_ms: int
    limit: int
    lease_ms: int


def _settle(conn: sqlite3.Connection, lease: Lease, update: str, **values: object) -> None:
    """Run `update` (a settling statement of `queries`) if `lease` still holds its timer, else
    raise `LeaseLost`."""
    params = {"id": lease.timer.id, "token": lease.token, **values}
    if conn.execute(update, params).rowcount == 0:
        raise LeaseLost(lease.timer.id, lease.token)


class SqliteLeasing(SqliteAttemptHistory):
    """The claim and settle calls of `SqliteStore`."""

    _claims: GroupCommit[ClaimAsk, list[Lease]]
    """Claims made while the store's thread is busy, written together (`_claim_each`)."""

    async def _claim(self, queue: str, horizon_ms: int, limit: int, lease_ms: int) -> list[Lease]:
        self._check_open()
        self._wakeups.mark(queue)
        return await self._claims.submit(ClaimAsk(queue, horizon_ms, limit, lease_ms))

    def _claim_each(self, asks: list[ClaimAsk]) -> list[list[Lease]]:
        """On the store's thread: run the claims that queued, in order, in one transaction.

        Expired leases return to scheduled once, before any claim, and finished timers past
        their retention are purged once after them, as one claim alone would do.
        """
        self._check_open()

        def work(conn: sqlite3.Connection, now: int) -> list[list[Lease]]:
            expired = [{"rowid": r, "now": now} for (r,) in conn.execute(sql.EXPIRED, {"now": now})]
            conn.executemany(sql.UNLEASE, expired)
            claimed = [self._claim_one(conn, now, ask) for ask in asks]
            conn.execute(sql.PURGE_DONE, {"now": now, "batch": PURGE_BATCH})
            return claimed

        return self._on_thread("BEGIN IMMEDIATE", work)

    def _claim_one(self, conn: sqlite3.Connection, now: int, ask: ClaimAsk) -> list[Lease]:
        deadline = now + ask.lease_ms
        seq = conn.execute(sql.LAST_LEASE, {"deadline": deadline}).fetchone()[0]
        params = {"queue": ask.queue, "horizon": ask.horizon_ms, "limit": ask.limit}
        params |= {"deadline": deadline, "now": now, "seq": seq}
        rows = conn.execute(sql.CLAIM, params).fetchall()
        at = conn.execute(sql.NEXT_DUE, {"queue": ask.queue}).fetchone()[0]
        if at is None:
            conn.execute(sql.DROP_HEAD, {"queue": ask.queue})
        else:
            conn.execute(sql.SET_HEAD, {"queue": ask.queue, "at": at})
        rows.sort(key=lambda row: row[0])  # RETURNING order is unspecified
        timers = [self._rows.timer(row[1:]) for row in rows]
        return [new_lease(timer, timer.attempt, deadline) for timer in timers]

    async def _extend(self, lease: Lease, lease_ms: int) -> Lease:

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

    async def _due_queues(self, horizon_ms: int, limit: int, since_ms: int | None) -> DueQueues:
        self._wakeups.mark(ANY_QUEUE)

        def work(conn: sqlite3.Connection, now: int) -> DueQueues:
            since = SINCE_EVER_MS if since_ms is None else since_ms
            params = {"horizon": horizon_ms, "limit": limit, "since": since}
            due = [queue for (queue,) in conn.execute(sql.DUE_HEADS, params)]
            return DueQueues(due, conn.execute(sql.NEXT_HEAD, params).fetchone()[0])

        return await self._run(None, work)

    async def queues(self) -> list[str]:
        self._wakeups.mark(ANY_QUEUE)

        def work(conn: sqlite3.Connection, now: int) -> list[str]:
            return [name for (name,) in conn.execute(sql.QUEUES)]

        return await self._run(None, work)

    async def ack(self, lease: Lease, attempt: Attempt | None = None) -> None:
        def work(conn: sqlite3.Connection, now: int) -> None:
            end = now + self.settings.retention_of(lease.timer.id)
            _settle(conn, lease, sql.ACK, end=end, now=now)
            self._record_one(conn, now, lease, attempt)

        await self._run(None if attempt is None else "BEGIN IMMEDIATE", work)

    async def ack_many(
        self, leases: Sequence[Lease], attempts: Sequence[Attempt | None] = ()
    ) -> list[bool]:
        """Ack many leases, up to 1,000 per transaction, with their attempts."""

        def work(
            conn: sqlite3.Connection,
            now: int,
            *,
            chunk: Sequence[Lease],
            recorded: Sequence[Attempt | None],
        ) -> list[bool]:
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
            acked = [conn.execute(sql.ACK, params).rowcount > 0 for params in held]
            if recorded:
                landed = zip(chunk, recorded, acked, strict=True)
                self._record(
                    conn, now, ((lease.timer.id, a) for lease, a, ok in landed if ok and a)
                )
            return acked

        acked: list[bool] = []
        for start in range(0, len(leases), BATCH):
            chunk = leases[start : start + BATCH]
            recorded = attempts[start : start + BATCH]
            work_chunk = partial(work, chunk=chunk, recorded=recorded)
            acked += await self._run("BEGIN IMMEDIATE", work_chunk)
        return acked

    def _record_one(
        self, conn: sqlite3.Connection, now: int, lease: Lease, attempt: Attempt | None
    ) -> None:
        if attempt is not None:
            self._record(conn, now, [(lease.timer.id, attempt)])

    async def _retry(self, lease: Lease, due_ms: int, error: str, attempt: Attempt | None) -> None:
        def work(conn: sqlite3.Connection, now: int) -> None:
            _settle(conn, lease, sql.RETRY, due=due_ms, now=now, error=truncate_error(error))
            self._record_one(conn, now, lease, attempt)

        await self._run(None if attempt is None else "BEGIN IMMEDIATE", work)
        self._wakeups.notify(lease.timer.queue)

    async def _defer_many(self, deferrals: Sequence[Deferral]) -> list[bool]:
        """Defer many leases, up to 1,000 per transaction."""

        def work(conn: sqlite3.Connection, now: int, *, chunk: Sequence[Deferral]) -> list[bool]:
            return [
                conn.execute(
                    sql.DEFER,
                    {"id": lease.timer.id, "token": lease.token, "due": due_ms, "now": now,
                     "error": truncate_error(reason)},
                ).rowcount > 0
                for lease, due_ms, reason in chunk
            ]  # fmt: skip

        deferred: list[bool] = []
        for start in range(0, len(deferrals), BATCH):
            chunk = deferrals[start : start + BATCH]
            deferred += await self._run("BEGIN IMMEDIATE", partial(work, chunk=chunk))
        for queue in {lease.timer.queue for lease, _, _ in deferrals}:
            self._wakeups.notify(queue)
        return deferred

    async def _defer(self, lease: Lease, due_ms: int, reason: str) -> None:
        def work(conn: sqlite3.Connection, now: int) -> None:
            _settle(conn, lease, sql.DEFER, due=due_ms, now=now, error=truncate_error(reason))

        await self._run(None, work)
        self._wakeups.notify(lease.timer.queue)

    async def kill(self, lease: Lease, error: str, attempt: Attempt | None = None) -> None:
        def work(conn: sqlite3.Connection, now: int) -> None:
            _settle(conn, lease, sql.KILL, now=now, error=truncate_error(error))
            self._record_one(conn, now, lease, attempt)

        await self._run(None if attempt is None else "BEGIN IMMEDIATE", work)
