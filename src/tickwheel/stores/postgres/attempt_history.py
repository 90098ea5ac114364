"""The attempt history of a `PostgresStore`: table ``attempts``, written by the very statement of
the settle it records (a CTE over the settling ``UPDATE … RETURNING``), and deleted with its
timer's row (``ON DELETE CASCADE``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tickwheel.stores.attempt_record import Attempt, kept_attempts
from tickwheel.stores.base import StoreSettings
from tickwheel.stores.postgres import ops
from tickwheel.stores.postgres.ops import Op
from tickwheel.stores.postgres.runner import Runner

PURGE_BATCH = 100
"""Most attempts past the store's retention that one recording statement deletes."""

# what a recording statement does besides inserting: delete some attempts past retention
# (skipping locked rows, so that concurrent settles never wait on each other), and, once a
# timer's attempts pass `most`, trim the timers it recorded for to their last `most`
_PURGE = f"""
    purged AS (
        DELETE FROM {{s}}.attempts WHERE ctid = ANY(ARRAY(
            SELECT ctid FROM {{s}}.attempts WHERE at_ms < %(before)s
            LIMIT {PURGE_BATCH} FOR UPDATE SKIP LOCKED)))"""
_TRIM = """,
    trimmed AS (
        DELETE FROM {s}.attempts AS a USING recorded AS r
        WHERE r.n > %(most)s AND a.timer_id = r.timer_id AND a.n <= r.n - %(most)s)"""
_UPSERT = """INSERT INTO {s}.attempts (timer_id, n, at_ms, record)"""
_ON_CONFLICT = """ON CONFLICT (timer_id, n) DO UPDATE
        SET at_ms = excluded.at_ms, record = excluded.record
        RETURNING timer_id, n"""
READ = "SELECT record FROM {s}.attempts WHERE timer_id = %(id)s ORDER BY n DESC LIMIT %(limit)s"


def recording_one(update: str, trim: bool) -> str:
    """`update` (a one-lease settling statement of `queries`) that also records one attempt
    (`trim`: one past the history's size, so the oldest goes); it returns the settled id, none
    when the lease was lost (then nothing is recorded)."""
    return f"""WITH settled AS ({update} RETURNING id),
    recorded AS (
        {_UPSERT} SELECT id, %(n)s, %(at)s, %(record)s FROM settled
        {_ON_CONFLICT}),{_PURGE}{_TRIM if trim else ""}
    SELECT id FROM settled"""


def recording_many(update: str, trim: bool) -> str:
    """`update` (`queries.ACK_MANY`, returning ``t.id, t.attempt``) that also records an
    attempt per lease it settled: arrays `a_ids`, `a_tokens`, `a_ns`, `a_ats`, `a_records`."""
    return f"""WITH settled AS ({update}),
    recorded AS (
        {_UPSERT}
        SELECT DISTINCT ON (r.id) r.id, r.n, r.at_ms, r.record
        FROM unnest(%(a_ids)b::text[], %(a_tokens)b::int[], %(a_ns)b::int[],
                    %(a_ats)b::bigint[], %(a_records)b::text[])
             AS r(id, token, n, at_ms, record)
        JOIN settled AS s ON s.id = r.id AND s.attempt = r.token
        {_ON_CONFLICT}),{_PURGE}{_TRIM if trim else ""}
    SELECT id, attempt FROM settled"""


def history_params(settings: StoreSettings, now: int) -> dict[str, Any]:
    """The parameters every recording statement takes besides its attempts."""
    return {"most": settings.attempt_history, "before": now - settings.attempt_retention_ms}


def one_params(attempt: Attempt, settings: StoreSettings, now: int) -> dict[str, Any]:
    record = {"n": attempt.attempt, "at": attempt.at_ms, "record": attempt.to_json()}
    return record | history_params(settings, now)


def many_params(
    recorded: Sequence[tuple[str, int, Attempt]], settings: StoreSettings, now: int
) -> dict[str, Any]:
    """Arrays of `(timer id, token, attempt)`, for `recording_many`."""
    return {
        "a_ids": [timer_id for timer_id, _, _ in recorded],
        "a_tokens": [token for _, token, _ in recorded],
        "a_ns": [attempt.attempt for _, _, attempt in recorded],
        "a_ats": [attempt.at_ms for _, _, attempt in recorded],
        "a_records": [attempt.to_json() for _, _, attempt in recorded],
    } | history_params(settings, now)


class PostgresAttemptHistory(Runner):
    """Reads a timer's attempts."""

    async def attempts(self, timer_id: str) -> list[Attempt]:
        settings = self.settings
        if settings.attempt_history == 0:
            return []

        def work(now: int) -> Op[list[Attempt]]:
            timer = yield from ops.get(self._rows, timer_id, now)
            if timer is None:
                return []
            rows, _ = yield READ, {"id": timer_id, "limit": settings.attempt_history}
            recorded = [Attempt.from_json(text) for (text,) in rows]
            return kept_attempts(
                recorded, timer, now, settings.attempt_retention_ms, settings.attempt_history
            )

        return await self._run(work, transaction=True)
