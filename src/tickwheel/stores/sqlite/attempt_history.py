"""The attempt history of a `SqliteStore`: table ``attempts``, written in the transaction of the
settle it records, and emptied of a timer's rows by a trigger when the timer's row goes."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from tickwheel.stores.attempt_record import Attempt, kept_attempts
from tickwheel.stores.sqlite import queries as sql
from tickwheel.stores.sqlite.thread import SqliteThread

PURGE_BATCH = 100
"""Most attempts past the store's retention that one recording transaction deletes."""

RECORD = "INSERT OR REPLACE INTO attempts (timer_id, n, at_ms, record) VALUES (?, ?, ?, ?)"
TRIM = "DELETE FROM attempts WHERE timer_id = :id AND n <= :oldest"
PURGE = """DELETE FROM attempts WHERE rowid IN (
               SELECT rowid FROM attempts WHERE at_ms < :before LIMIT :batch)"""
READ = "SELECT record FROM attempts WHERE timer_id = :id ORDER BY n DESC LIMIT :limit"


class SqliteAttemptHistory(SqliteThread):
    """Records and reads attempts; the settle calls record in their own transaction."""

    def _record(
        self, conn: sqlite3.Connection, now: int, recorded: Iterable[tuple[str, Attempt]]
    ) -> None:
        """Insert each `(timer id, attempt)`, drop what falls out of the timer's last
        `attempt_history`, and some attempts past retention; in the caller's transaction."""
        most = self.settings.attempt_history
        pairs = list(recorded)
        if not pairs or most == 0:
            return
        conn.executemany(RECORD, [(i, a.attempt, a.at_ms, a.to_json()) for i, a in pairs])
        # a timer's first attempts fill its history: only later ones push the oldest out
        trims = [
            {"id": timer_id, "oldest": a.attempt - most}
            for timer_id, a in pairs
            if a.attempt > most
        ]
        if trims:
            conn.executemany(TRIM, trims)
        before = now - self.settings.attempt_retention_ms
        conn.execute(PURGE, {"before": before, "batch": PURGE_BATCH})

    async def attempts(self, timer_id: str) -> list[Attempt]:
        settings = self.settings

        def work(conn: sqlite3.Connection, now: int) -> list[Attempt]:
            row = conn.execute(sql.GET, {"id": timer_id, "now": now}).fetchone()
            if row is None:
                return []
            params = {"id": timer_id, "limit": settings.attempt_history}
            recorded = [Attempt.from_json(text) for (text,) in conn.execute(READ, params)]
            timer = self._rows.timer(row)
            return kept_attempts(
                recorded, timer, now, settings.attempt_retention_ms, settings.attempt_history
            )

        return await self._run("BEGIN", work)
