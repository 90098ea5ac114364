"""What an operator sets on the queues of a `SqliteStore`: pause and limit, one row per queue."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Callable

from tickwheel.stores.base import Limit, QueueSettings
from tickwheel.stores.codec import decode_queue_settings, encode_queue_settings
from tickwheel.stores.sqlite import queries as sql
from tickwheel.stores.sqlite.thread import SqliteThread


def _write_queue(conn: sqlite3.Connection, queue: str, settings: QueueSettings) -> None:
    """Store `queue`'s settings; the defaults delete its row."""
    if settings == QueueSettings():
        conn.execute(sql.DELETE_QUEUE_SETTINGS, (queue,))
    else:
        conn.execute(sql.PUT_QUEUE_SETTINGS, (queue, encode_queue_settings(settings)))


class SqliteQueueSettings(SqliteThread):
    """The queue-settings calls of `SqliteStore`."""

    async def queue_settings(self) -> dict[str, QueueSettings]:
        def work(conn: sqlite3.Connection, now: int) -> dict[str, QueueSettings]:
            rows = conn.execute(sql.QUEUE_SETTINGS)
            return {queue: decode_queue_settings(record) for queue, record in rows}

        return await self._run(None, work)

    async def _set_queue(self, queue: str, settings: QueueSettings) -> None:
        await self._run(None, lambda conn, now: _write_queue(conn, queue, settings))
        self._wakeups.notify(queue)

    async def _pause_queue(self, queue: str, paused: bool) -> bool:
        before = await self._change_queue(
            queue, lambda settings: dataclasses.replace(settings, paused=paused)
        )
        return before.paused != paused

    async def _set_queue_limit(self, queue: str, limit: Limit | None) -> bool:
        before = await self._change_queue(
            queue, lambda settings: dataclasses.replace(settings, limit=limit)
        )
        return before.limit is not None

    async def _change_queue(
        self, queue: str, change: Callable[[QueueSettings], QueueSettings]
    ) -> QueueSettings:
        """Write `change` of `queue`'s settings in one transaction (so a concurrent change of
        another part is kept), wake its waiters, and return the settings it had."""

        def work(conn: sqlite3.Connection, now: int) -> QueueSettings:
            row = conn.execute(sql.QUEUE_SETTINGS_OF, (queue,)).fetchone()
            before = QueueSettings() if row is None else decode_queue_settings(row[0])
            _write_queue(conn, queue, change(before))
            return before

        before = await self._run("BEGIN IMMEDIATE", work)
        self._wakeups.notify(queue)
        return before

    async def settings_versions(self) -> tuple[int, int]:
        def work(conn: sqlite3.Connection, now: int) -> tuple[int, int]:
            queues, limits = conn.execute(sql.SETTINGS_VERSIONS).fetchone()
            return queues, limits

        return await self._run(None, work)
