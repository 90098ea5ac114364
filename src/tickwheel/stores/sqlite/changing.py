"""Reading and changing one timer of a `SqliteStore` by its id: get, cancel, reschedule, pause,
resume and replay."""

from __future__ import annotations

import sqlite3

from tickwheel.model import Timer, occurrence_of
from tickwheel.stores.sqlite import queries as sql
from tickwheel.stores.sqlite.queries import Row
from tickwheel.stores.sqlite.thread import SqliteThread


class SqliteChanging(SqliteThread):
    """The calls of `SqliteStore` on one timer by its id."""

    async def get(self, timer_id: str) -> Timer | None:
        def work(conn: sqlite3.Connection, now: int) -> Timer | None:
            row = conn.execute(sql.GET, {"id": timer_id, "now": now}).fetchone()
            return None if row is None else self._rows.timer(row)

        return await self._run(None, work)

    async def cancel(self, timer_id: str) -> bool:
        return await self._run(
            None, lambda conn, now: conn.execute(sql.CANCEL, (timer_id,)).rowcount > 0
        )

    async def _reschedule(self, timer_id: str, due_ms: int) -> bool:
        def work(conn: sqlite3.Connection, now: int) -> Row | None:
            params = {"due": due_ms, "now": now, "id": timer_id}
            row: Row | None = conn.execute(sql.RESCHEDULE, params).fetchone()
            return row

        return self._woke(await self._run(None, work))

    async def replay(self, timer_id: str) -> bool:
        def work(conn: sqlite3.Connection, now: int) -> Row | None:
            row: Row | None = conn.execute(sql.REPLAY, {"now": now, "id": timer_id}).fetchone()
            return row

        return self._woke(await self._run(None, work))

    async def pause(self, timer_id: str) -> bool:
        if occurrence_of(timer_id) is not None:
            return False  # its schedule owns it
        return await self._run(
            None,
            lambda conn, now: conn.execute(sql.PAUSE, {"id": timer_id, "now": now}).rowcount > 0,
        )

    async def resume(self, timer_id: str) -> bool:
        def work(conn: sqlite3.Connection, now: int) -> Row | None:
            row: Row | None = conn.execute(sql.RESUME, {"id": timer_id, "now": now}).fetchone()
            return row

        return self._woke(await self._run(None, work))
