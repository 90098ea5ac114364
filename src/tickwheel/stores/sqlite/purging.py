"""A queue's bulk calls on a `SqliteStore`: purge one state in batches, set the queue's
defaults."""

from __future__ import annotations

import dataclasses
import sqlite3

from tickwheel.model import State
from tickwheel.stores.codec import state_code
from tickwheel.stores.operations import PURGE_BATCH, PURGEABLE
from tickwheel.stores.queue_defaults import QueueDefaults
from tickwheel.stores.sqlite import queries as sql
from tickwheel.stores.sqlite.queue_settings import SqliteQueueSettings
from tickwheel.stores.sqlite.schema import SCHEDULED


def _purge_sql(state: State) -> str:
    """One batch of a purge of `state`: the state a literal, so SQLite picks its partial index;
    a schedule's pending occurrence (an id holding '@') stays with its schedule."""
    code = state_code(state)
    plain = " AND instr(id, '@') = 0" if code == SCHEDULED else ""
    return f"""DELETE FROM timers WHERE rowid IN (
        SELECT rowid FROM timers WHERE queue = :queue AND state = {code}{plain} LIMIT :batch)"""


_PURGE = {state: _purge_sql(state) for state in PURGEABLE}


def _fix_head(conn: sqlite3.Connection, queue: str) -> None:
    """Set `queue`'s entry in the due-queue index to its next due time, or drop it."""
    at = conn.execute(sql.NEXT_DUE, {"queue": queue}).fetchone()[0]
    if at is None:
        conn.execute(sql.DROP_HEAD, {"queue": queue})
    else:
        conn.execute(sql.SET_HEAD, {"queue": queue, "at": at})


class SqlitePurging(SqliteQueueSettings):
    """The bulk calls of `SqliteStore` on one queue."""

    async def _purge(self, queue: str, state: State) -> int:
        """Delete `PURGE_BATCH` rows a statement, each its own write: other writers (a claim,
        an add) get the file's lock between batches."""
        statement = _PURGE[State(state)]
        params = {"queue": queue, "batch": PURGE_BATCH}
        total = 0
        while True:
            deleted = await self._run(
                None, lambda conn, now: conn.execute(statement, params).rowcount
            )
            total += deleted
            if deleted < PURGE_BATCH:
                break
        if total and state == State.SCHEDULED:
            await self._run("BEGIN IMMEDIATE", lambda conn, now: _fix_head(conn, queue))
        return total

    async def _set_queue_defaults(self, queue: str, defaults: QueueDefaults | None) -> bool:
        before = await self._change_queue(
            queue, lambda settings: dataclasses.replace(settings, defaults=defaults)
        )
        return before.defaults is not None
