"""Listing and counting the timers of a `SqliteStore`: list, stats and queue_infos."""

from __future__ import annotations

import sqlite3

from tickwheel.model import State, Timer
from tickwheel.stores.base import Page, QueueInfo, QueueSettings, Stats
from tickwheel.stores.codec import decode_queue_settings
from tickwheel.stores.sqlite import queries as sql
from tickwheel.stores.sqlite.thread import SqliteThread


class SqliteListing(SqliteThread):
    """The list and count calls of `SqliteStore`."""

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

    async def _list(
        self,
        state: State | None,
        limit: int,
        cursor: str | None,
        queue: str | None,
        due_from_ms: int | None,
        due_to_ms: int | None,
    ) -> Page:
        self._check_open()
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
