"""The limits on callbacks to each host kept by a `SqliteStore`, one row per host."""

from __future__ import annotations

import sqlite3

from tickwheel.errors import CapReached
from tickwheel.stores.base import Limit, LimitPage
from tickwheel.stores.codec import decode_limit, encode_limit
from tickwheel.stores.sqlite import queries as sql
from tickwheel.stores.sqlite.thread import SqliteThread


class SqliteHostLimits(SqliteThread):
    """The host-limit calls of `SqliteStore`."""

    async def limits(self) -> dict[str, Limit]:
        def work(conn: sqlite3.Connection, now: int) -> dict[str, Limit]:
            return {host: decode_limit(record) for host, record in conn.execute(sql.LIMITS)}

        return await self._run(None, work)

    async def _list_limits(self, limit: int, cursor: str | None) -> LimitPage:
        self._check_open()
        params = {"cursor": "" if cursor is None else cursor, "limit": limit + 1}

        def work(conn: sqlite3.Connection, now: int) -> list[tuple[str, Limit]]:
            rows = conn.execute(sql.LIMIT_PAGE, params)
            return [(host, decode_limit(record)) for host, record in rows]

        found = await self._run(None, work)
        if len(found) > limit:
            return LimitPage(found[:limit], found[limit - 1][0])
        return LimitPage(found, None)

    async def _set_limit(self, host: str, limit: Limit) -> None:
        record = encode_limit(limit)
        cap = self.settings.max_limits

        def work(conn: sqlite3.Connection, now: int) -> None:
            new = conn.execute(sql.HAS_LIMIT, (host,)).fetchone() is None
            if new and conn.execute(sql.COUNT_LIMITS).fetchone()[0] >= cap:
                raise CapReached("limits", cap, "host")
            conn.execute(sql.PUT_LIMIT, (host, record))

        await self._run("BEGIN IMMEDIATE", work)

    async def delete_limit(self, host: str) -> bool:
        return await self._run(
            None, lambda conn, now: conn.execute(sql.DELETE_LIMIT, (host,)).rowcount > 0
        )
