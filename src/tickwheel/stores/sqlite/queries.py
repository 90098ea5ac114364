"""The SQL a `SqliteStore` runs, and its rows as timers both ways (`RowCodec`).

Equal due times are claimed in the order the timers became scheduled, exactly as in `MemoryStore`:
a row's ``seq`` is set past every scheduled row of its queue with the same ``due_ms`` whenever it is
(re)scheduled, and past every lease with the same deadline when it is leased. ``deadline_ms`` is
the lease deadline while leased, the end of retention while done.

A schedule is one row of ``schedules``: its id and the record `schedule_codec` encodes. Its
occurrences are ordinary timers, written by the same statements as any other.
"""

from __future__ import annotations

from typing import Any

from tickwheel.model import State, Timer
from tickwheel.stores.codec import SpecCodec, encode_spec, state_code, state_of
from tickwheel.stores.rebuild import stored_timer
from tickwheel.stores.sqlite.schema import DEAD, DONE, LEASED, PAUSED, SCHEDULED

Row = tuple[Any, ...]

COLUMNS = (
    "id, queue, state, due_ms, attempt, created_ms, updated_ms, last_error, first_claimed_ms, "
    "deferrals, spec"
)
"""The columns a timer is read from, in the order `RowCodec.timer` takes them."""
LIVE = f"NOT (state = {DONE} AND deadline_ms <= :now)"


def next_seq(queue: str, due: str) -> str:
    """SQL for a seq after every scheduled timer of `queue` due at `due` (one index probe)."""
    return f"""(SELECT coalesce(max(t.seq), 0) + 1 FROM timers AS t
                WHERE t.queue = {queue} AND t.state = {SCHEDULED} AND t.due_ms = {due})"""


_INSERT = f"""INTO timers ({COLUMNS}, seq)
    VALUES (:id, :queue, {SCHEDULED}, :due, :attempt, :now, :now, NULL, NULL, :deferrals, :spec,
            {next_seq(":queue", ":due")})"""
INSERT_NEW = f"INSERT {_INSERT} ON CONFLICT (id) DO NOTHING"
"""Schedule a timer whose id is free (it writes no row otherwise): `RowCodec.new_row`."""
INSERT_OVER = f"INSERT OR REPLACE {_INSERT}"
"""Schedule a timer in place of the row holding its id, if any: `RowCodec.new_row`."""
GET = f"SELECT {COLUMNS} FROM timers WHERE id = :id AND {LIVE}"
CANCEL = f"DELETE FROM timers WHERE id = ? AND state IN ({SCHEDULED}, {PAUSED})"
PAUSE = f"""UPDATE timers SET state = {PAUSED}, updated_ms = :now
            WHERE id = :id AND state = {SCHEDULED}"""
# back behind the timers of its queue due at the same time, as any timer that becomes scheduled
RESUME = f"""UPDATE timers SET state = {SCHEDULED}, updated_ms = :now,
                 seq = {next_seq("timers.queue", "timers.due_ms")}
             WHERE id = :id AND state = {PAUSED} RETURNING queue"""
# a paused timer moves too, and stays paused (resume sets its seq again)
RESCHEDULE = f"""UPDATE timers SET due_ms = :due, updated_ms = :now, first_claimed_ms = NULL,
                     seq = {next_seq("timers.queue", ":due")}
                 WHERE id = :id AND state IN ({SCHEDULED}, {PAUSED}) RETURNING queue"""
REPLAY = f"""UPDATE timers SET state = {SCHEDULED}, due_ms = :now, updated_ms = :now,
                 first_claimed_ms = NULL, seq = {next_seq("timers.queue", ":now")}
             WHERE id = :id AND state = {DEAD} RETURNING queue"""

# one row at a time, in (deadline, lease order), as MemoryStore's lease heap pops them
EXPIRED = f"""SELECT rowid FROM timers WHERE state = {LEASED} AND deadline_ms <= :now
              ORDER BY deadline_ms, seq"""
UNLEASE = f"""UPDATE timers SET state = {SCHEDULED}, deadline_ms = NULL, updated_ms = :now,
                  seq = {next_seq("timers.queue", "timers.due_ms")}
              WHERE rowid = :rowid"""
LAST_LEASE = f"""SELECT coalesce(max(seq), 0) FROM timers
                 WHERE state = {LEASED} AND deadline_ms = :deadline"""
# UPDATE ... FROM materializes `pick` first; the inner LIMIT bounds the window to claimed rows
CLAIM = f"""
    UPDATE timers SET state = {LEASED}, attempt = attempt + 1, deadline_ms = :deadline,
        updated_ms = :now, seq = :seq + pick.n,
        first_claimed_ms = coalesce(first_claimed_ms, :now)
    FROM (SELECT r, row_number() OVER (ORDER BY due_ms, seq) AS n
          FROM (SELECT rowid AS r, due_ms, seq FROM timers
                WHERE queue = :queue AND state = {SCHEDULED} AND due_ms <= :horizon
                ORDER BY due_ms, seq LIMIT :limit)) AS pick
    WHERE timers.rowid = pick.r
    RETURNING seq, {COLUMNS}"""
PURGE_DONE = f"""
    DELETE FROM timers WHERE rowid IN (
        SELECT rowid FROM timers WHERE state = {DONE} AND deadline_ms <= :now LIMIT :batch)"""

# the settling updates change a timer only while the lease (:id, :token) still holds it
_HELD = f"id = :id AND state = {LEASED} AND attempt = :token"
# past every lease with the same deadline, as when leased
EXTEND = f"""UPDATE timers SET deadline_ms = :deadline,
                 seq = (SELECT coalesce(max(t.seq), 0) + 1 FROM timers AS t
                        WHERE t.state = {LEASED} AND t.deadline_ms = :deadline)
             WHERE {_HELD}"""
ACK = f"UPDATE timers SET state = {DONE}, deadline_ms = :end, updated_ms = :now WHERE {_HELD}"
RETRY = f"""UPDATE timers SET state = {SCHEDULED}, due_ms = :due, deadline_ms = NULL,
                updated_ms = :now, last_error = :error, seq = {next_seq("timers.queue", ":due")}
            WHERE {_HELD}"""
# a hand-back that spends no attempt: the claim count (the token) stays, the deferrals rise
DEFER = f"""UPDATE timers SET state = {SCHEDULED}, due_ms = :due, deadline_ms = NULL,
                updated_ms = :now, last_error = :error, deferrals = deferrals + 1,
                first_claimed_ms = CASE WHEN attempt - deferrals > 1 THEN first_claimed_ms END,
                seq = {next_seq("timers.queue", ":due")}
            WHERE {_HELD}"""
KILL = f"""UPDATE timers SET state = {DEAD}, deadline_ms = NULL, updated_ms = :now,
               last_error = :error
           WHERE {_HELD}"""
HOLDS = f"SELECT 1 FROM timers WHERE {_HELD}"
DROP_HELD = f"DELETE FROM timers WHERE {_HELD}"
"""Delete an occurrence its schedule skips (misfire ``skip``), while the lease still holds it."""
# the state and attempt of the row holding an id, finished or not, past retention or not
STATE_OF = "SELECT state, attempt, deferrals FROM timers WHERE id = ?"

GET_SCHEDULE = "SELECT record FROM schedules WHERE id = ?"
PUT_SCHEDULE = "INSERT OR REPLACE INTO schedules (id, record) VALUES (?, ?)"
DELETE_SCHEDULE = "DELETE FROM schedules WHERE id = ? RETURNING record"

# two index probes; the aggregate min() skips the NULL of an empty side
NEXT_DUE = f"""SELECT min(t) FROM (
    SELECT (SELECT due_ms FROM timers WHERE queue = :queue AND state = {SCHEDULED}
            ORDER BY due_ms LIMIT 1) AS t
    UNION ALL
    SELECT (SELECT deadline_ms FROM timers WHERE queue = :queue AND state = {LEASED}
            ORDER BY deadline_ms LIMIT 1))"""

SET_HEAD = """INSERT INTO queue_heads (queue, at_ms) VALUES (:queue, :at)
              ON CONFLICT (queue) DO UPDATE SET at_ms = excluded.at_ms"""
DROP_HEAD = "DELETE FROM queue_heads WHERE queue = :queue"
DUE_HEADS = """SELECT queue FROM queue_heads WHERE at_ms BETWEEN :since AND :horizon
               ORDER BY at_ms LIMIT :limit"""
NEXT_HEAD = "SELECT min(at_ms) FROM queue_heads WHERE at_ms > :horizon"


def _each_queue(state: int) -> str:
    # a loose index scan: one probe of the state's partial index per queue, not a row scan
    return f"""SELECT name FROM (
        WITH RECURSIVE q(name) AS (
            SELECT min(queue) FROM timers WHERE state = {state}
            UNION ALL
            SELECT (SELECT min(queue) FROM timers WHERE state = {state} AND queue > q.name)
            FROM q WHERE q.name IS NOT NULL)
        SELECT name FROM q WHERE name IS NOT NULL)"""


# the queues with scheduled or leased timers, sorted: over the timers_due and
# timers_lease_queue partial indexes, both led by queue
QUEUES = f"{_each_queue(SCHEDULED)} UNION {_each_queue(LEASED)} ORDER BY 1"

# one count per state, each over that state's partial index rather than the table
COUNT_SCHEDULED = f"SELECT count(*), min(due_ms) FROM timers WHERE state = {SCHEDULED}"
COUNT_LEASED = f"SELECT count(*) FROM timers WHERE state = {LEASED}"
COUNT_DONE = f"SELECT count(*) FROM timers WHERE state = {DONE} AND deadline_ms > ?"
COUNT_DEAD = f"SELECT count(*) FROM timers WHERE state = {DEAD}"


# counts per queue, each state over its partial index: the scheduled and leased ones are led
# by queue, so those groups need no sort
QUEUE_SCHEDULED = f"""SELECT queue, count(*), min(due_ms) FROM timers WHERE state = {SCHEDULED}
                      GROUP BY queue"""
QUEUE_COUNTS = {
    State.LEASED: f"SELECT queue, count(*) FROM timers WHERE state = {LEASED} GROUP BY queue",
    State.PAUSED: f"SELECT queue, count(*) FROM timers WHERE state = {PAUSED} GROUP BY queue",
    State.DONE: f"""SELECT queue, count(*) FROM timers WHERE state = {DONE} AND deadline_ms > :now
                    GROUP BY queue""",
    State.DEAD: f"SELECT queue, count(*) FROM timers WHERE state = {DEAD} GROUP BY queue",
}
COUNT_PAUSED = f"SELECT count(*) FROM timers WHERE state = {PAUSED}"

QUEUE_SETTINGS = "SELECT queue, record FROM queue_settings"
QUEUE_SETTINGS_OF = "SELECT record FROM queue_settings WHERE queue = ?"
PUT_QUEUE_SETTINGS = "INSERT OR REPLACE INTO queue_settings (queue, record) VALUES (?, ?)"
DELETE_QUEUE_SETTINGS = "DELETE FROM queue_settings WHERE queue = ?"
LIMITS = "SELECT host, record FROM limits"
# by the primary key's index: a page reads its rows only; "" sorts before every host
LIMIT_PAGE = "SELECT host, record FROM limits WHERE host > :cursor ORDER BY host LIMIT :limit"
PUT_LIMIT = "INSERT OR REPLACE INTO limits (host, record) VALUES (?, ?)"
DELETE_LIMIT = "DELETE FROM limits WHERE host = ?"
HAS_LIMIT = "SELECT 1 FROM limits WHERE host = ?"
COUNT_LIMITS = "SELECT count(*) FROM limits"
COUNT_SCHEDULES = "SELECT count(*) FROM schedules"
SETTINGS_VERSIONS = """SELECT (SELECT version FROM versions WHERE name = 'queue_settings'),
                              (SELECT version FROM versions WHERE name = 'limits')"""


def list_page(
    state: State | None,
    *,
    after_cursor: bool,
    queue: bool = False,
    due_from: bool = False,
    due_to: bool = False,
) -> str:
    """SQL for a page of live timers in id order, in `state` if given, after ``:cursor``
    if `after_cursor`, of ``:queue``, due from ``:due_from`` and before ``:due_to`` when
    those are asked for; it reads ``:limit`` rows."""
    where = [LIVE]
    if after_cursor:
        where.append("id > :cursor")
    if state is not None:
        where.append(f"state = {state_code(state)}")
    if queue:
        where.append("queue = :queue")
    if due_from:
        where.append("due_ms >= :due_from")
    if due_to:
        where.append("due_ms < :due_to")
    return f"SELECT {COLUMNS} FROM timers WHERE {' AND '.join(where)} ORDER BY id LIMIT :limit"


def schedule_page(*, after_cursor: bool) -> str:
    """SQL for a page of schedules (id, record) in id order, after ``:cursor`` if
    `after_cursor`; it reads ``:limit`` rows."""
    where = "WHERE id > :cursor " if after_cursor else ""
    return f"SELECT id, record FROM schedules {where}ORDER BY id LIMIT :limit"


class RowCodec:
    """Writes and reads the rows of one store; it keeps the decoded specs its timers share."""

    def __init__(self) -> None:
        self._specs = SpecCodec()

    @staticmethod
    def new_row(
        timer: Timer, now_ms: int, attempt: int, spec: str | None, deferrals: int = 0
    ) -> dict[str, Any]:
        """The parameters of `INSERT_NEW` or `INSERT_OVER` for `timer`, scheduled at `now_ms`;
        `spec` is `encode_spec(timer)` when the caller has it already."""
        return {
            "deferrals": deferrals,
            "id": timer.id,
            "queue": timer.queue,
            "due": timer.due_ms,
            "now": now_ms,
            "attempt": attempt,
            "spec": encode_spec(timer) if spec is None else spec,
        }

    def timer(self, row: Row) -> Timer:
        """Rebuild a timer from a row of `COLUMNS`."""
        (
            timer_id,
            queue,
            state,
            due_ms,
            attempt,
            created_ms,
            updated_ms,
            error,
            first,
            deferrals,
            spec,
        ) = row
        callback, payload, retry, trace_parent, trace_state = self._specs.parts(spec)
        return stored_timer(
            timer_id,
            due_ms,
            queue,
            callback,
            payload,
            retry,
            attempt,
            state_of(state),
            created_ms,
            updated_ms,
            error,
            first,
            deferrals,
            trace_parent,
            trace_state,
        )

    def same_spec(self, row: Row, timer: Timer) -> bool:
        """Whether the timer in `row` has `timer`'s spec, compared as stored (through JSON),
        so dict key order and tuple-vs-list do not count."""
        stored = (row[3], row[1], *self._specs.decode(row[-1]))
        return stored == (timer.due_ms, timer.queue, *self._specs.decode(encode_spec(timer)))
