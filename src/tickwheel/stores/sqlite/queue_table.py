"""The queue table of a `SqliteStore` a page or a queue at a time.

Every state has a partial index led by queue (``timers_due``, ``timers_lease_queue``,
``timers_paused``, ``timers_done_queue``, ``timers_dead_queue``), and ``queue_settings`` is
keyed by queue. A page of names is the first `limit` after the cursor among a loose index
scan of each (a probe per name, stopped at `limit`) and the settings' keys; its counts then
read each index over the page's range of names only. One read transaction, one snapshot.
"""

from __future__ import annotations

import heapq
import sqlite3

from tickwheel.model import State
from tickwheel.stores.base import QueueInfo, QueueSettings
from tickwheel.stores.codec import decode_queue_settings
from tickwheel.stores.queue_pages import QueuePage, page_of
from tickwheel.stores.sqlite.schema import DEAD, DONE, LEASED, PAUSED, SCHEDULED
from tickwheel.stores.sqlite.thread import SqliteThread

# a done timer past its retention is no longer counted (the purge deletes it later)
_LIVE = {DONE: " AND deadline_ms > :now"}


def _names_after(state: int) -> str:
    # a loose index scan of the state's index from :after, stopped after :limit names
    live = _LIVE.get(state, "")
    return f"""WITH RECURSIVE q(name) AS (
            SELECT (SELECT min(queue) FROM timers
                    WHERE state = {state} AND queue > :after{live})
            UNION ALL
            SELECT (SELECT min(queue) FROM timers
                    WHERE state = {state} AND queue > q.name{live})
            FROM q WHERE q.name IS NOT NULL
            LIMIT :limit)
        SELECT name FROM q WHERE name IS NOT NULL"""


NAMES = tuple(_names_after(state) for state in (SCHEDULED, LEASED, PAUSED, DONE, DEAD))
SETTINGS_NAMES = """SELECT queue FROM queue_settings WHERE queue > :after
                    ORDER BY queue LIMIT :limit"""
_RANGE = "queue >= :first AND queue <= :last"
SCHEDULED_RANGE = f"""SELECT queue, count(*), min(due_ms) FROM timers
                      WHERE state = {SCHEDULED} AND {_RANGE} GROUP BY queue"""
COUNTS_RANGE = {
    state: f"""SELECT queue, count(*) FROM timers
               WHERE state = {code} AND {_RANGE}{_LIVE.get(code, "")} GROUP BY queue"""
    for state, code in (
        (State.LEASED, LEASED),
        (State.PAUSED, PAUSED),
        (State.DONE, DONE),
        (State.DEAD, DEAD),
    )
}
SETTINGS_RANGE = f"SELECT queue, record FROM queue_settings WHERE {_RANGE}"


def infos_of(conn: sqlite3.Connection, now: int, names: list[str]) -> list[QueueInfo]:
    """The infos of `names` (sorted, not empty), counted over their range of each index."""
    bounds = {"first": names[0], "last": names[-1], "now": now}
    counts = {name: dict.fromkeys(State, 0) for name in names}
    earliest: dict[str, int] = {}
    for queue, n, due in conn.execute(SCHEDULED_RANGE, bounds):
        counts[queue][State.SCHEDULED] = n
        earliest[queue] = due
    for state, query in COUNTS_RANGE.items():
        for queue, n in conn.execute(query, bounds):
            counts[queue][state] = n
    settings = {
        queue: decode_queue_settings(record)
        for queue, record in conn.execute(SETTINGS_RANGE, bounds)
    }
    return [
        QueueInfo(name, counts[name], earliest.get(name), settings.get(name, QueueSettings()))
        for name in names
    ]


class SqliteQueueTable(SqliteThread):
    """The paged queue-table calls of `SqliteStore`."""

    async def _list_queues(self, limit: int, cursor: str | None) -> QueuePage:
        self._check_open()
        # one more than the page says whether another follows; "" sorts before every name
        params = {"after": "" if cursor is None else cursor, "limit": limit + 1}

        def work(conn: sqlite3.Connection, now: int) -> list[QueueInfo]:
            found: set[str] = set()
            for query in (*NAMES, SETTINGS_NAMES):
                found.update(name for (name,) in conn.execute(query, params | {"now": now}))
            names = heapq.nsmallest(limit + 1, found)
            return infos_of(conn, now, names) if names else []

        return page_of(await self._run("BEGIN DEFERRED", work), limit)

    async def _queue_info(self, queue: str) -> QueueInfo:
        self._check_open()

        def work(conn: sqlite3.Connection, now: int) -> QueueInfo:
            return infos_of(conn, now, [queue])[0]

        return await self._run("BEGIN DEFERRED", work)
