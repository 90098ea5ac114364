"""The queue table of a `PostgresStore` a page or a queue at a time.

Every state has a partial index led by queue, and ``queue_settings`` is keyed by queue. A page
of names is one statement: a loose index scan of each index from the cursor (one probe per
name, stopped at `limit`) and the settings' keys, merged by the database, so names compare
and sort by its collation throughout. Their counts then read each index over the page's range
of names only, in the same snapshot (one repeatable-read transaction).
"""

from __future__ import annotations

from tickwheel.model import State
from tickwheel.stores.base import QueueInfo, QueueSettings
from tickwheel.stores.codec import decode_queue_settings, state_of
from tickwheel.stores.postgres.beside_timers import BesideTimers
from tickwheel.stores.postgres.ops import Op
from tickwheel.stores.postgres.schema import DEAD, DONE, LEASED, PAUSED, SCHEDULED
from tickwheel.stores.queue_pages import QueuePage, page_of

_CODES = (SCHEDULED, LEASED, PAUSED, DONE, DEAD)
# a done timer past its retention is no longer counted (the purge deletes it later)
_LIVE = {DONE: " AND deadline_ms > %(now)s"}


def _first_after(state: int, after: str) -> str:
    return f"""(SELECT queue FROM {{s}}.timers WHERE state = {state} AND queue > {after}
                {_LIVE.get(state, "")} ORDER BY queue LIMIT 1)"""


NAMES = (
    "WITH RECURSIVE "
    + ", ".join(
        f"""n{state}(name) AS (SELECT {_first_after(state, "%(after)s")}
            UNION ALL SELECT {_first_after(state, f"n{state}.name")}
            FROM n{state} WHERE n{state}.name IS NOT NULL)"""
        for state in _CODES
    )
    + " SELECT name FROM ("
    + " UNION ".join(
        f"(SELECT name FROM n{state} WHERE name IS NOT NULL LIMIT %(limit)s)" for state in _CODES
    )
    + """ UNION (SELECT queue FROM {s}.queue_settings WHERE queue > %(after)s
                 ORDER BY queue LIMIT %(limit)s)) AS found ORDER BY name LIMIT %(limit)s"""
)
_RANGE = "queue >= %(first)s AND queue <= %(last)s"
COUNTS = " UNION ALL ".join(
    f"""(SELECT queue, {state}, count(*), min(due_ms) FROM {{s}}.timers
         WHERE state = {state} AND {_RANGE}{_LIVE.get(state, "")} GROUP BY queue)"""
    for state in _CODES
)
SETTINGS = f"SELECT queue, record FROM {{s}}.queue_settings WHERE {_RANGE}"


def infos(now: int, names: list[str]) -> Op[list[QueueInfo]]:
    """The infos of `names` (in the database's order, not empty), counted over their range."""
    bounds = {"first": names[0], "last": names[-1], "now": now}
    counts = {name: dict.fromkeys(State, 0) for name in names}
    earliest: dict[str, int] = {}
    found, _ = yield COUNTS, bounds
    for queue, code, n, due in found:
        state = state_of(code)
        counts[queue][state] = n
        if state is State.SCHEDULED:
            earliest[queue] = due
    rows, _ = yield SETTINGS, bounds
    settings = {queue: decode_queue_settings(record) for queue, record in rows}
    return [
        QueueInfo(name, counts[name], earliest.get(name), settings.get(name, QueueSettings()))
        for name in names
    ]


def page(now: int, after: str, limit: int) -> Op[list[QueueInfo]]:
    """Up to `limit` queues after `after`, in one snapshot (first in a transaction)."""
    yield "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ", {}
    found, _ = yield NAMES, {"after": after, "limit": limit, "now": now}
    names = [name for (name,) in found]
    if not names:
        return []
    return (yield from infos(now, names))


def one(now: int, queue: str) -> Op[list[QueueInfo]]:
    """`queue`'s info, in one snapshot (first in a transaction)."""
    yield "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ", {}
    return (yield from infos(now, [queue]))


class PostgresQueueTable(BesideTimers):
    """The paged queue-table calls of `PostgresStore`."""

    async def _list_queues(self, limit: int, cursor: str | None) -> QueuePage:
        # one more than the page says whether another follows; "" sorts before every name
        after = "" if cursor is None else cursor
        found = await self._run(lambda now: page(now, after, limit + 1), transaction=True)
        return page_of(found, limit)

    async def _queue_info(self, queue: str) -> QueueInfo:
        (info,) = await self._run(lambda now: one(now, queue), transaction=True)
        return info
