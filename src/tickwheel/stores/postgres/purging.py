"""A queue's bulk calls on a `PostgresStore`: purge one state in batches, set the queue's
defaults."""

from __future__ import annotations

import dataclasses

from tickwheel.model import State
from tickwheel.stores.codec import state_code
from tickwheel.stores.operations import PURGE_BATCH, PURGEABLE
from tickwheel.stores.postgres import queries as sql
from tickwheel.stores.postgres.ops import Op
from tickwheel.stores.postgres.queue_table import PostgresQueueTable
from tickwheel.stores.postgres.schema import SCHEDULED
from tickwheel.stores.queue_defaults import QueueDefaults


def _purge_sql(state: State) -> str:
    """One batch of a purge of `state`, by the state's partial index; rows another transaction
    holds (a claim in flight) are skipped, not waited for; a schedule's pending occurrence (an
    id holding '@') stays with its schedule."""
    code = state_code(state)
    plain = " AND strpos(id, '@') = 0" if code == SCHEDULED else ""
    return f"""DELETE FROM {{s}}.timers WHERE id IN (
        SELECT id FROM {{s}}.timers WHERE queue = %(queue)s AND state = {code}{plain}
        LIMIT %(batch)s FOR UPDATE SKIP LOCKED)"""


_PURGE = {state: _purge_sql(state) for state in PURGEABLE}


def _purge_batch(statement: str, queue: str) -> Op[int]:
    _, deleted = yield statement, {"queue": queue, "batch": PURGE_BATCH}
    return deleted


def _set_head(queue: str, now: int) -> Op[None]:
    yield sql.SET_HEAD, {"queue": queue, "now": now}


class PostgresPurging(PostgresQueueTable):
    """The bulk calls of `PostgresStore` on one queue."""

    async def _purge(self, queue: str, state: State) -> int:
        """Delete `PURGE_BATCH` rows a statement, each in its own transaction (autocommit), so
        no purge holds locks on a million rows or keeps a snapshot open for long."""
        statement = _PURGE[State(state)]
        total = 0
        while True:
            deleted = await self._run(lambda now: _purge_batch(statement, queue))
            total += deleted
            if deleted < PURGE_BATCH:
                break
        if total and state == State.SCHEDULED:
            await self._run(lambda now: _set_head(queue, now), transaction=True)
        return total

    async def _set_queue_defaults(self, queue: str, defaults: QueueDefaults | None) -> bool:
        before = await self._change_queue(
            queue, lambda settings: dataclasses.replace(settings, defaults=defaults)
        )
        return before.defaults is not None
