"""Store operations written once, run on an async or a sync psycopg connection.

An operation is a generator: it yields ``(sql template, params)`` and is sent back the rows
and the row count, so the same code runs on the store's pool (`run_async`) and on a caller's
sync connection inside its own transaction (`run_sync`, for ``tx=``). Operations hold no
connection and read no clock: the runner's caller passes ``now``.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Mapping, Sequence
from typing import Any, TypeAlias, TypeVar

import psycopg
from psycopg.rows import tuple_row

from tickwheel.errors import StoreUnavailable, TimerExists
from tickwheel.model import Timer
from tickwheel.stores.codec import SpecCache
from tickwheel.stores.postgres import queries as sql
from tickwheel.stores.postgres.queries import Row, RowCodec
from tickwheel.stores.postgres.schema import Names
from tickwheel.stores.rebuild import as_scheduled

R = TypeVar("R")
Ask: TypeAlias = tuple[str, Mapping[str, Any]]
Reply: TypeAlias = tuple[list[Row], int]
Op: TypeAlias = Generator[Ask, Reply, R]

BATCH = 1000
"""Timers one statement of `add_batch` writes at most."""
PLAIN_FIRST = 100
"""From this many new timers on, `add_batch` tries a plain INSERT first (half the server's
work of ON CONFLICT per row), in a savepoint; below, the savepoint's two round trips cost more
than that saves."""


class IdTaken(Exception):
    """Thrown into an operation whose statement hit a unique violation (a plain insert of a
    batch with an id taken), so it can take the slower path that expects conflicts."""


async def run_async(conn: psycopg.AsyncConnection[Any], names: Names, op: Op[R]) -> R:
    """Run `op` on `conn` (in whatever transaction it is in)."""
    try:
        async with conn.cursor(row_factory=tuple_row) as cursor:
            reply: Reply | None = None
            taken: IdTaken | None = None
            while True:
                try:
                    if taken is None:
                        template, params = op.send(reply)  # type: ignore[arg-type]
                    else:
                        template, params = op.throw(taken)
                except StopIteration as stop:
                    result: R = stop.value
                    return result
                try:
                    await cursor.execute(names(template), params)
                except psycopg.errors.UniqueViolation as violation:
                    taken = IdTaken(str(violation))
                    continue
                taken = None
                rows = await cursor.fetchall() if cursor.description is not None else []
                reply = (rows, cursor.rowcount)
    except psycopg.Error as error:
        raise StoreUnavailable(f"postgres store: {error}") from error


def run_sync(conn: psycopg.Connection[Any], names: Names, op: Op[R]) -> R:
    """Run `op` on the sync connection `conn`, in a savepoint of its open transaction (a
    refusal such as `TimerExists` rolls back to it and leaves the caller's transaction
    usable)."""
    try:
        with conn.transaction(), conn.cursor(row_factory=tuple_row) as cursor:
            reply: Reply | None = None
            taken: IdTaken | None = None
            while True:
                try:
                    if taken is None:
                        template, params = op.send(reply)  # type: ignore[arg-type]
                    else:
                        template, params = op.throw(taken)
                except StopIteration as stop:
                    result: R = stop.value
                    return result
                try:
                    cursor.execute(names(template), params)
                except psycopg.errors.UniqueViolation as violation:
                    taken = IdTaken(str(violation))
                    continue
                taken = None
                rows = cursor.fetchall() if cursor.description is not None else []
                reply = (rows, cursor.rowcount)
    except psycopg.Error as error:
        raise StoreUnavailable(f"postgres store: {error}") from error


def get(rows: RowCodec, timer_id: str, now: int) -> Op[Timer | None]:
    found, _ = yield sql.GET, {"id": timer_id, "now": now}
    return rows.timer(found[0]) if found else None


def insert_new(timer: Timer, now: int) -> Op[bool]:
    """Schedule `timer` if its id is free; return whether it was (one statement)."""
    _, written = yield sql.INSERT_NEW, RowCodec.new_row(timer, now, 0, None)
    return written > 0


def insert_alone(timer: Timer, now: int) -> Op[bool]:
    """`insert_new` for a connection in autocommit: a plain INSERT, which fails (and so writes
    nothing) on a taken id, at less of the server's work than ON CONFLICT."""
    try:
        yield sql.INSERT_ONE, RowCodec.new_row(timer, now, 0, None)
    except IdTaken:
        return False
    return True


def add_over(rows: RowCodec, timer: Timer, now: int, replace: bool) -> Op[Timer]:
    """Add `timer` where its id may be taken: idempotent, conflict or replace (in a
    transaction: the row is locked while it is compared)."""
    found, _ = yield sql.GET_LOCKED, {"id": timer.id, "now": now}
    if found and not replace:
        if rows.same_spec(found[0], timer):
            return rows.timer(found[0])
        raise TimerExists(timer.id)
    # a finished timer past its retention that still holds the id is replaced too; the attempt
    # carries over so a lease on the replaced timer can never match a new one
    old = rows.timer(found[0]) if found else None
    attempt, deferrals = (0, 0) if old is None else (old.attempt, old.deferrals)
    yield sql.INSERT_OVER, RowCodec.new_row(timer, now, attempt, None, deferrals)
    return as_scheduled(timer, now, attempt, deferrals)


def add(rows: RowCodec, timer: Timer, now: int, replace: bool) -> Op[Timer]:
    """Add one timer as `Store.add` does (in a transaction), its due time checked already."""
    if not replace and (yield from insert_new(timer, now)):
        return as_scheduled(timer, now)
    return (yield from add_over(rows, timer, now, replace))


def add_batch(
    rows: RowCodec, timers: Sequence[Timer], now: int, replace: bool
) -> Op[list[Timer | Exception]]:
    """Add `timers` (at most `BATCH`, their due times checked already), each as by `add`, in
    one transaction: one statement for those with free ids. A timer's own refusal (a taken id)
    is its result."""
    results: list[Timer | Exception] = []
    written: set[str] = set()
    if not replace and timers:
        specs = SpecCache()
        params = {
            "now": now,
            "ids": [timer.id for timer in timers],
            "queues": [timer.queue for timer in timers],
            "dues": [timer.due_ms for timer in timers],
            "specs": [specs.encode(timer) for timer in timers],
        }
        inserted = yield from _insert_many(params, plain=len(timers) >= PLAIN_FIRST)
        written = {timer_id for (timer_id,) in inserted}
    for timer in timers:
        if timer.id in written:
            written.discard(timer.id)  # a second timer with the same id compares with this one
            results.append(as_scheduled(timer, now))
            continue
        try:
            results.append((yield from add_over(rows, timer, now, replace)))
        except TimerExists as refused:
            results.append(refused)
    return results


def _insert_many(params: Mapping[str, Any], *, plain: bool) -> Op[list[Row]]:
    """Write a batch of new timers; return the ids written (those free)."""
    if plain:
        yield "SAVEPOINT tickwheel_batch", {}
        try:
            inserted, _ = yield sql.INSERT_PLAIN, params
        except IdTaken:  # an id is taken (or twice in the batch): take them one by one
            yield "ROLLBACK TO SAVEPOINT tickwheel_batch", {}
        else:
            yield "RELEASE SAVEPOINT tickwheel_batch", {}
            return inserted
    inserted, _ = yield sql.INSERT_MANY, params
    return inserted


def cancel(timer_id: str) -> Op[bool]:
    _, deleted = yield sql.CANCEL, {"id": timer_id}
    return deleted > 0


def reschedule(timer_id: str, due_ms: int, now: int) -> Op[str | None]:
    """Move a scheduled or paused timer to `due_ms` (checked already); return its queue, None
    if there was none."""
    found, _ = yield sql.RESCHEDULE, {"due": due_ms, "now": now, "id": timer_id}
    return found[0][0] if found else None


def queue_of(update: str, timer_id: str, now: int) -> Op[str | None]:
    """Run `update` (resume, replay) on one timer; return its queue if it changed."""
    found, _ = yield update, {"id": timer_id, "now": now}
    return found[0][0] if found else None


def queues_of(results: Iterable[Timer | Exception]) -> set[str]:
    return {result.queue for result in results if isinstance(result, Timer)}
