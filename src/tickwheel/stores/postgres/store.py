"""`PostgresStore`: timers in PostgreSQL, in the database an application already runs.

Every call takes a connection from the store's pool (`connect`) and is one
statement in autocommit or one transaction. `add`, `add_many`, `cancel` and `reschedule` also
take ``tx=``, the caller's open psycopg `AsyncConnection`: the change commits or rolls back with
the caller's own writes. Their ``*_sync`` forms do the same on a sync psycopg connection (the
one under a Django ``transaction.atomic()`` or a SQLAlchemy ``session.begin()``). Those of
`add`, `add_many` and `reschedule` are `TransactionContract`'s, which checks their arguments
and calls this class's steps (`_add_in`, `_add_sync`, ...).

Claims lease rows with ``FOR UPDATE SKIP LOCKED`` over the partial index of scheduled timers by
(queue, due time); a claim also returns expired leases and deletes up to `PURGE_BATCH` finished
timers past their retention. A claim marks its rows with its id, so a claim whose reply was lost
(it may have committed) gets its leases back on the queue's next claim. Workers wake through
``LISTEN``/``NOTIFY`` (`listen`).

The schema is `schema.py`'s; the SQL and rows are `queries.py`'s; the operations, which run on
either kind of connection, are `ops.py`'s, `schedule_ops.py`'s and `flow_ops.py`'s; connections
and the running of operations are `runner.py`'s; schedules, settings and reads
`beside_timers.py`'s; purges and queue defaults `purging.py`'s.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from tickwheel.errors import LeaseLost, StoreUnavailable, TimerExists
from tickwheel.model import Timer, truncate_error
from tickwheel.stores.attempt_record import Attempt
from tickwheel.stores.base import (
    ANY_QUEUE,
    SINCE_EVER_MS,
    Deferral,
    DueQueues,
    Lease,
    StoreSettings,
    new_lease,
    wall_ms,
)
from tickwheel.stores.coalesce import Coalescer
from tickwheel.stores.in_doubt import InDoubt
from tickwheel.stores.postgres import attempt_history as history
from tickwheel.stores.postgres import ops
from tickwheel.stores.postgres import queries as sql
from tickwheel.stores.postgres.attempt_history import PostgresAttemptHistory
from tickwheel.stores.postgres.doubts import landed_before
from tickwheel.stores.postgres.ops import Op, R, queue_of
from tickwheel.stores.postgres.purging import PostgresPurging
from tickwheel.stores.postgres.runner import AsyncTx, SyncTx
from tickwheel.stores.postgres.schema import DEAD, DONE, SCHEDULED
from tickwheel.stores.rebuild import as_scheduled

_SETS = {
    sql.ACK: (DONE, False),
    sql.RETRY: (SCHEDULED, True),
    sql.DEFER: (SCHEDULED, True),
    sql.KILL: (DEAD, False),
}
"""The state each settling statement leaves a timer in, and whether due at the time it is
given: how a settle that landed unheard is told from a lease lost."""


@dataclass(frozen=True, slots=True)
class _Unanswered:
    """A claim that failed (it may have committed unheard): its id and its leases' deadline."""

    rid: int
    deadline_ms: int


class PostgresStore(PostgresPurging, PostgresAttemptHistory):
    """Timers in one schema of a PostgreSQL database, shared by any number of processes.

    Construction does no I/O; `clock` decides what is due (the wall clock of this host unless
    a test gives another).
    """

    def __init__(
        self,
        url: str,
        settings: StoreSettings | None = None,
        *,
        schema: str | None = None,
        clock: Callable[[], int] = wall_ms,
        pool_size: int = 10,
    ) -> None:
        super().__init__(url, settings, schema=schema, clock=clock, pool_size=pool_size)
        self._adding = Coalescer(self._add_new, ops.BATCH)
        self._replacing = Coalescer(self._add_replacing, ops.BATCH)
        self._unanswered: dict[str, _Unanswered] = {}
        self._in_doubt = InDoubt()

    async def _add_in(self, tx: AsyncTx, timer: Timer, replace: bool) -> Timer:
        return await self._in(tx, lambda now: ops.add(self._rows, timer, now, replace))

    def _add_sync(self, tx: SyncTx, timer: Timer, replace: bool) -> Timer:
        return self._in_sync(tx, lambda now: ops.add(self._rows, timer, now, replace))

    async def _add_one(self, timer: Timer, replace: bool) -> Timer:
        """Add one timer; adds made while one is being written share the next transaction
        (group commit), each with its own result or error."""
        self._check_open()  # before it waits in the group: no connection is taken yet
        return await (self._replacing if replace else self._adding).submit(timer)

    async def _add_new(self, timers: list[Timer]) -> list[Timer | Exception]:
        return await self._add_each(timers, replace=False)

    async def _add_replacing(self, timers: list[Timer]) -> list[Timer | Exception]:
        return await self._add_each(timers, replace=True)

    async def _add_each(self, timers: list[Timer], *, replace: bool) -> list[Timer | Exception]:
        """Add `timers` in one transaction, a lone new one in one statement (autocommit)."""
        results: list[Timer | Exception]
        if len(timers) == 1 and not replace:
            (timer,) = timers
            try:
                results = [await self._add_lone(timer)]
            except TimerExists as refused:
                results = [refused]
        else:
            results = await self._run(
                lambda now: ops.add_batch(self._rows, timers, now, replace),
                transaction=True,
            )
        for queue in ops.queues_of(results):
            self._wakeups.notify(queue)
        return results

    async def _add_lone(self, timer: Timer) -> Timer:
        async with self._connection() as conn:
            now = self._clock()
            if await ops.run_async(conn, self.names, ops.insert_alone(timer, now)):
                return as_scheduled(timer, now)
            async with conn.transaction():
                return await ops.run_async(
                    conn, self.names, ops.add_over(self._rows, timer, now, replace=False)
                )

    async def _add_many_in(
        self, tx: AsyncTx, timers: Sequence[Timer], replace: bool
    ) -> list[Timer]:
        results: list[Timer | Exception] = []
        for batch in self._batches(timers, replace):
            results += await self._in(tx, batch)
        return _stored(results)

    async def _add_many(self, timers: Sequence[Timer], replace: bool) -> list[Timer]:
        """Add `timers`, up to 1,000 per transaction."""
        self._check_open()  # an empty batch takes no connection
        results: list[Timer | Exception] = []
        for batch in self._batches(timers, replace):
            results += await self._run(batch, transaction=True)
        for queue in ops.queues_of(results):
            self._wakeups.notify(queue)
        return _stored(results)

    def _add_many_sync(self, tx: SyncTx, timers: Sequence[Timer], replace: bool) -> list[Timer]:
        results: list[Timer | Exception] = []
        for batch in self._batches(timers, replace):
            results += self._in_sync(tx, batch)
        return _stored(results)

    def _batches(
        self, timers: Sequence[Timer], replace: bool
    ) -> list[Callable[[int], Op[list[Timer | Exception]]]]:
        """`add_many`'s operations, one per 1,000 timers (their due times checked already)."""

        def batch(now: int, chunk: Sequence[Timer]) -> Op[list[Timer | Exception]]:
            return ops.add_batch(self._rows, chunk, now, replace)

        return [
            functools.partial(batch, chunk=timers[start : start + ops.BATCH])
            for start in range(0, len(timers), ops.BATCH)
        ]

    async def get(self, timer_id: str) -> Timer | None:
        return await self._run(lambda now: ops.get(self._rows, timer_id, now))

    async def cancel(self, timer_id: str, *, tx: AsyncTx | None = None) -> bool:
        """Delete a scheduled or paused timer (in `tx`'s transaction when given)."""
        if tx is not None:
            return await self._in(tx, lambda now: ops.cancel(timer_id))
        return await self._run(lambda now: ops.cancel(timer_id))

    def cancel_sync(self, timer_id: str, *, tx: SyncTx) -> bool:
        """`cancel` inside the transaction of the sync psycopg connection (or cursor) `tx`."""
        return self._in_sync(tx, lambda now: ops.cancel(timer_id))

    async def _reschedule_in(self, tx: AsyncTx, timer_id: str, due_ms: int) -> bool:
        return await self._in(tx, lambda now: ops.reschedule(timer_id, due_ms, now)) is not None

    def _reschedule_sync(self, tx: SyncTx, timer_id: str, due_ms: int) -> bool:
        return self._in_sync(tx, lambda now: ops.reschedule(timer_id, due_ms, now)) is not None

    async def _reschedule(self, timer_id: str, due_ms: int) -> bool:
        return self._woke(await self._run(lambda now: ops.reschedule(timer_id, due_ms, now)))

    async def _claim(self, queue: str, horizon_ms: int, limit: int, lease_ms: int) -> list[Lease]:
        """Lease due timers of `queue`: one round trip (a pipeline) of one transaction that
        returns expired leases, claims, sets the queue's head and purges finished timers.

        Each claim marks its rows with an id of its own. If the last claim of `queue` failed
        (it may have committed unheard), the rows it leased are read back first while their
        leases hold, and returned instead of claiming more.
        """
        self._wakeups.mark(queue)
        names = self.names
        pending = self._unanswered.pop(queue, None)
        try:
            async with self._connection() as conn:
                now = self._clock()
                if pending is not None and now < pending.deadline_ms:
                    sent = {"rid": pending.rid, "deadline": pending.deadline_ms}
                    rows = await (await conn.execute(names(sql.RECLAIM), sent)).fetchall()
                    if rows:
                        return self._leases(rows, pending.deadline_ms)
                pending = _Unanswered(secrets.randbits(63), now + lease_ms)
                params: dict[str, object] = {
                    "queue": queue,
                    "horizon": horizon_ms,
                    "limit": limit,
                    "deadline": pending.deadline_ms,
                    "now": now,
                    "rid": pending.rid,
                }
                async with conn.pipeline(), conn.transaction():
                    await conn.execute(names(sql.UNLEASE), params)
                    claimed = await conn.execute(names(sql.CLAIM), params)
                    await conn.execute(names(sql.SET_HEAD), params)
                    await conn.execute(names(sql.PURGE_DONE), params)
                rows = await claimed.fetchall()
        except (psycopg.Error, StoreUnavailable) as error:
            if pending is not None:
                self._unanswered[queue] = pending
            if isinstance(error, StoreUnavailable):
                raise
            raise StoreUnavailable(f"postgres store: {error}") from error
        return self._leases(rows, pending.deadline_ms)

    def _leases(self, rows: list[tuple[Any, ...]], deadline_ms: int) -> list[Lease]:
        """Leases of claimed rows (each led by its place in its claim), in their claim's order."""
        rows.sort(key=lambda row: row[0])  # RETURNING order is unspecified
        timers = [self._rows.timer(row[1:]) for row in rows]
        return [new_lease(timer, timer.attempt, deadline_ms) for timer in timers]

    async def _extend(self, lease: Lease, lease_ms: int) -> Lease:

        def work(now: int) -> Op[Lease]:
            yield from self._settle(lease, sql.EXTEND, None, now, deadline=now + lease_ms)
            return Lease(lease.timer, lease.token, now + lease_ms)

        return await self._run(work)

    async def next_due_ms(self, queue: str) -> int | None:
        self._wakeups.mark(queue)

        def work(now: int) -> Op[int | None]:
            ((due,),), _ = yield sql.NEXT_DUE, {"queue": queue}
            return None if due is None else int(due)

        return await self._run(work)

    async def _due_queues(self, horizon_ms: int, limit: int, since_ms: int | None) -> DueQueues:
        self._wakeups.mark(ANY_QUEUE)

        def work(now: int) -> Op[DueQueues]:
            since = SINCE_EVER_MS if since_ms is None else since_ms
            params = {"horizon": horizon_ms, "limit": limit, "since": since}
            due, _ = yield sql.DUE_HEADS, params
            ((at,),), _ = yield sql.NEXT_HEAD, params
            return DueQueues([queue for (queue,) in due], None if at is None else int(at))

        return await self._run(work)

    async def queues(self) -> list[str]:
        self._wakeups.mark(ANY_QUEUE)

        def work(now: int) -> Op[list[str]]:
            found, _ = yield sql.QUEUES, {}
            return [name for (name,) in found]

        return await self._run(work)

    async def _wait(self, queue: str, timeout_s: float) -> bool:
        """Wait for a change to `queue` by this store, or a NOTIFY of it by any other."""
        self._check_open()  # waits on no connection
        self._listener.start()
        return await self._wakeups.wait(queue, timeout_s)

    async def ack(self, lease: Lease, attempt: Attempt | None = None) -> None:
        end = self.settings.retention_of(lease.timer.id)
        await self._settling(
            [lease],
            lambda now: self._settle(lease, sql.ACK, attempt, now, end=now + end, now=now),
        )

    async def ack_many(
        self, leases: Sequence[Lease], attempts: Sequence[Attempt | None] = ()
    ) -> list[bool]:
        """Ack many leases, up to 1,000 per statement, which records their attempts too."""
        acked: list[bool] = []
        for start in range(0, len(leases), ops.BATCH):
            chunk = leases[start : start + ops.BATCH]
            recorded = attempts[start : start + ops.BATCH]
            acked += await self._settling(chunk, functools.partial(self._ack_many, chunk, recorded))
        return acked

    def _ack_many(
        self, leases: Sequence[Lease], attempts: Sequence[Attempt | None], now: int
    ) -> Op[list[bool]]:
        retention_of = self.settings.retention_of
        params = {
            "now": now,
            "ids": [lease.timer.id for lease in leases],
            "tokens": [lease.token for lease in leases],
            "ends": [now + retention_of(lease.timer.id) for lease in leases],
        }
        recorded = [
            (lease.timer.id, lease.token, attempt)
            for lease, attempt in zip(leases, attempts, strict=False)
            if attempt is not None
        ]
        if recorded and self.settings.attempt_history:
            params |= history.many_params(recorded, self.settings, now)
            trim = any(a.attempt > self.settings.attempt_history for _, _, a in recorded)
            found, _ = yield history.recording_many(sql.ACK_MANY, trim), params
        else:
            found, _ = yield sql.ACK_MANY, params
        held = set(found)
        acked = []
        for lease in leases:  # the same lease twice: the first acks, the second finds it done
            key = (lease.timer.id, lease.token)
            acked.append(key in held)
            held.discard(key)
        dues = [None] * len(leases)
        return (yield from landed_before(self._in_doubt, leases, acked, DONE, dues))

    async def _retry(self, lease: Lease, due_ms: int, error: str, attempt: Attempt | None) -> None:
        await self._hand_back(lease, due_ms, sql.RETRY, error, attempt)

    async def _defer(self, lease: Lease, due_ms: int, reason: str) -> None:
        await self._hand_back(lease, due_ms, sql.DEFER, reason)

    async def _defer_many(self, deferrals: Sequence[Deferral]) -> list[bool]:
        """Defer many leases, up to 1,000 per statement."""
        deferred: list[bool] = []
        for start in range(0, len(deferrals), ops.BATCH):
            chunk = deferrals[start : start + ops.BATCH]
            leases = [lease for lease, _, _ in chunk]
            deferred += await self._settling(
                leases, functools.partial(_defer_rows, chunk, self._in_doubt)
            )
        for queue in {lease.timer.queue for lease, _, _ in deferrals}:
            self._wakeups.notify(queue)
        return deferred

    async def _hand_back(
        self, lease: Lease, due_ms: int, update: str, error: str, attempt: Attempt | None = None
    ) -> None:
        def work(now: int) -> Op[None]:
            yield from self._settle(
                lease, update, attempt, now, due=due_ms, now=now, error=truncate_error(error)
            )

        await self._settling([lease], work)
        self._wakeups.notify(lease.timer.queue)

    async def kill(self, lease: Lease, error: str, attempt: Attempt | None = None) -> None:
        error = truncate_error(error)
        await self._settling(
            [lease], lambda now: self._settle(lease, sql.KILL, attempt, now, now=now, error=error)
        )

    async def replay(self, timer_id: str) -> bool:
        return self._woke(await self._run(lambda now: queue_of(sql.REPLAY, timer_id, now)))

    async def _settling(self, leases: Sequence[Lease], work: Callable[[int], Op[R]]) -> R:
        """Run a settle of `leases`; if it fails unheard, they are in doubt until sent again."""
        try:
            return await self._run(work)
        except StoreUnavailable:
            self._in_doubt.note(leases, self._clock())
            raise

    def _settle(
        self, lease: Lease, update: str, attempt: Attempt | None, now_ms: int, **values: object
    ) -> Op[None]:
        """Run `update` (a settling statement of `queries`) if `lease` still holds its timer,
        recording `attempt` in the same statement, else raise `LeaseLost` (unless the same
        settle landed before, unheard)."""
        params = {"id": lease.timer.id, "token": lease.token, **values}
        if attempt is None or not self.settings.attempt_history:
            _, changed = yield update, params
        else:
            params |= history.one_params(attempt, self.settings, now_ms)
            trim = attempt.attempt > self.settings.attempt_history
            rows, _ = yield history.recording_one(update, trim), params
            changed = len(rows)
        if changed == 0:
            sets = _SETS.get(update)
            if sets is None:  # not a settle (an extend): the lease is lost
                raise LeaseLost(lease.timer.id, lease.token)
            state, moves = sets
            due = values.get("due")
            dues = [due if moves and isinstance(due, int) else None]
            (landed,) = yield from landed_before(self._in_doubt, [lease], [False], state, dues)
            if not landed:
                raise LeaseLost(lease.timer.id, lease.token)


def _defer_rows(deferrals: Sequence[Deferral], doubts: InDoubt, now: int) -> Op[list[bool]]:
    """Defer each (lease, due, reason) whose lease holds; the same lease twice defers once."""
    first: dict[tuple[str, int], int] = {}
    for index, (lease, _, _) in enumerate(deferrals):
        first.setdefault((lease.timer.id, lease.token), index)
    chosen = [deferrals[index] for index in sorted(first.values())]
    if not chosen:
        return []
    params = {
        "now": now,
        "ids": [lease.timer.id for lease, _, _ in chosen],
        "tokens": [lease.token for lease, _, _ in chosen],
        "dues": [due_ms for _, due_ms, _ in chosen],
        "errors": [truncate_error(reason) for _, _, reason in chosen],
    }
    found, _ = yield sql.DEFER_MANY, params
    places = sorted(first.values())
    landed = {places[n - 1] for (n,) in found}
    deferred = [index in landed for index in range(len(deferrals))]
    leases = [lease for lease, _, _ in deferrals]
    dues = [due_ms for _, due_ms, _ in deferrals]
    return (yield from landed_before(doubts, leases, deferred, SCHEDULED, dues))


def _stored(results: Sequence[Timer | Exception]) -> list[Timer]:
    """The timers stored; the first refusal raised once they are."""
    stored = [result for result in results if isinstance(result, Timer)]
    refused = [result for result in results if isinstance(result, Exception)]
    if refused:
        raise refused[0]
    return stored
