"""The SQL a `PostgresStore` runs, as templates (``{s}``: its schema), and its rows as timers.

Equal due times are claimed in the order the timers became scheduled, as in `MemoryStore`:
whenever a row is (re)scheduled or leased, its ``seq`` is a fresh value of the schema's sequence
times `SEQ_BLOCK`, plus the row's place when one statement writes many, so it sorts after every
row written before. ``deadline_ms`` is the lease deadline while leased, the end of retention
while done.
"""

from __future__ import annotations

from typing import Any

from tickwheel.model import State, Timer
from tickwheel.stores.codec import SpecCodec, encode_spec, state_code, state_of
from tickwheel.stores.postgres.schema import DEAD, DONE, LEASED, PAUSED, SCHEDULED, SEQ_BLOCK
from tickwheel.stores.rebuild import stored_timer

Row = tuple[Any, ...]

COLUMNS = (
    "id, queue, state, due_ms, attempt, created_ms, updated_ms, last_error, first_claimed_ms, "
    "deferrals, spec"
)
"""The columns a timer is read from, in the order `RowCodec.timer` takes them."""
_T_COLUMNS = ", ".join(f"t.{name.strip()}" for name in COLUMNS.split(","))
LIVE = f"NOT (state = {DONE} AND deadline_ms <= %(now)s)"
NEXT_SEQ = f"nextval('{{s}}.timer_seq') * {SEQ_BLOCK}"

_INSERT = f"""INSERT INTO {{s}}.timers ({COLUMNS}, seq)
    VALUES (%(id)s, %(queue)s, {SCHEDULED}, %(due)s, %(attempt)s, %(now)s, %(now)s, NULL, NULL,
            %(deferrals)s, %(spec)s, {NEXT_SEQ})"""
INSERT_ONE = _INSERT
"""Schedule a timer, failing (a unique violation) if its id is taken: `RowCodec.new_row`."""
INSERT_NEW = f"{_INSERT} ON CONFLICT (id) DO NOTHING"
"""Schedule a timer whose id is free (it writes no row otherwise): `RowCodec.new_row`."""
INSERT_OVER = f"""{_INSERT} ON CONFLICT (id) DO UPDATE SET
    queue = excluded.queue, state = {SCHEDULED}, due_ms = excluded.due_ms,
    attempt = excluded.attempt, created_ms = excluded.created_ms,
    updated_ms = excluded.updated_ms, last_error = NULL, first_claimed_ms = NULL,
    deferrals = excluded.deferrals, spec = excluded.spec, seq = excluded.seq, deadline_ms = NULL"""
"""Schedule a timer in place of the row holding its id, if any: `RowCodec.new_row`."""
_INSERT_MANY = f"""INSERT INTO {{s}}.timers ({COLUMNS}, seq)
    SELECT u.id, u.queue, {SCHEDULED}, u.due, 0, %(now)s, %(now)s, NULL, NULL, 0, u.spec,
           base.b + u.n
    FROM unnest(%(ids)b::text[], %(queues)b::text[], %(dues)b::bigint[], %(specs)b::text[])
         WITH ORDINALITY AS u(id, queue, due, spec, n),
         (SELECT {NEXT_SEQ} AS b) AS base
    ORDER BY u.n"""
INSERT_MANY = f"{_INSERT_MANY} ON CONFLICT (id) DO NOTHING RETURNING id"
"""Schedule the timers of a batch whose ids are free; return the ids written."""
INSERT_PLAIN = f"{_INSERT_MANY} RETURNING id"
"""Schedule a batch of timers, failing (a unique violation) if any id is taken."""
GET = f"SELECT {COLUMNS} FROM {{s}}.timers WHERE id = %(id)s AND {LIVE}"
GET_LOCKED = f"{GET} FOR UPDATE"
CANCEL = f"DELETE FROM {{s}}.timers WHERE id = %(id)s AND state IN ({SCHEDULED}, {PAUSED})"
PAUSE = f"""UPDATE {{s}}.timers SET state = {PAUSED}, updated_ms = %(now)s
            WHERE id = %(id)s AND state = {SCHEDULED}"""
# resume, reschedule and replay wake the queue's workers whether or not the timer comes before
# its queue's head (which may be stale, as a claim alone sets it right)
_WAKE = "RETURNING queue, pg_notify('{channel}', queue)"
RESUME = f"""UPDATE {{s}}.timers SET state = {SCHEDULED}, updated_ms = %(now)s, seq = {NEXT_SEQ}
             WHERE id = %(id)s AND state = {PAUSED} {_WAKE}"""
# a paused timer moves too, and stays paused (resume sets its seq again)
RESCHEDULE = f"""UPDATE {{s}}.timers SET due_ms = %(due)s, updated_ms = %(now)s,
                     first_claimed_ms = NULL, seq = {NEXT_SEQ}
                 WHERE id = %(id)s AND state IN ({SCHEDULED}, {PAUSED}) {_WAKE}"""
REPLAY = f"""UPDATE {{s}}.timers SET state = {SCHEDULED}, due_ms = %(now)s, updated_ms = %(now)s,
                 first_claimed_ms = NULL, seq = {NEXT_SEQ}
             WHERE id = %(id)s AND state = {DEAD} {_WAKE}"""

EXPIRED_BATCH = 1000
"""Most expired leases one claim returns to scheduled; the next claim takes the rest."""
# back to scheduled in (deadline, lease order), as MemoryStore's lease heap pops them
UNLEASE = f"""WITH expired AS (
        SELECT id, row_number() OVER (ORDER BY deadline_ms, seq) AS n FROM (
            SELECT id, deadline_ms, seq FROM {{s}}.timers
            WHERE state = {LEASED} AND deadline_ms <= %(now)s
            ORDER BY deadline_ms, seq LIMIT {EXPIRED_BATCH} FOR UPDATE SKIP LOCKED) AS e),
    base AS (SELECT {NEXT_SEQ} AS b)
    UPDATE {{s}}.timers AS t SET state = {SCHEDULED}, deadline_ms = NULL,
        updated_ms = %(now)s, seq = base.b + expired.n
    FROM expired, base WHERE t.id = expired.id"""
# rows another claimer holds are skipped, not waited for
CLAIM = f"""WITH pick AS (
        SELECT id, row_number() OVER (ORDER BY due_ms, seq) AS n FROM (
            SELECT id, due_ms, seq FROM {{s}}.timers
            WHERE queue = %(queue)s AND state = {SCHEDULED} AND due_ms <= %(horizon)s
            ORDER BY due_ms, seq LIMIT %(limit)s FOR UPDATE SKIP LOCKED) AS p),
    base AS (SELECT {NEXT_SEQ} AS b)
    UPDATE {{s}}.timers AS t SET state = {LEASED}, attempt = t.attempt + 1,
        deadline_ms = %(deadline)s, updated_ms = %(now)s, seq = base.b + pick.n,
        first_claimed_ms = coalesce(t.first_claimed_ms, %(now)s), claim_rid = %(rid)s
    FROM pick, base WHERE t.id = pick.id
    RETURNING pick.n, {_T_COLUMNS}"""
# the rows a claim whose reply was lost leased, while they hold: by the lease index, in order
RECLAIM = f"""SELECT t.seq, {_T_COLUMNS} FROM {{s}}.timers AS t
    WHERE state = {LEASED} AND deadline_ms = %(deadline)s AND claim_rid = %(rid)s"""
SET_HEAD = "SELECT {s}.set_head(%(queue)s, %(now)s)"
PURGE_BATCH = 1000
"""Most finished timers past their retention that one claim deletes."""
PURGE_DONE = f"""DELETE FROM {{s}}.timers WHERE id IN (
    SELECT id FROM {{s}}.timers WHERE state = {DONE} AND deadline_ms <= %(now)s
    LIMIT {PURGE_BATCH} FOR UPDATE SKIP LOCKED)"""

# the settling updates change a timer only while the lease (id, token) still holds it
_HELD = f"id = %(id)s AND state = {LEASED} AND attempt = %(token)s"
EXTEND = f"UPDATE {{s}}.timers SET deadline_ms = %(deadline)s, seq = {NEXT_SEQ} WHERE {_HELD}"
ACK = f"""UPDATE {{s}}.timers SET state = {DONE}, deadline_ms = %(end)s, updated_ms = %(now)s
          WHERE {_HELD}"""
ACK_MANY = f"""UPDATE {{s}}.timers AS t SET state = {DONE}, deadline_ms = u.end_ms,
                   updated_ms = %(now)s
               FROM unnest(%(ids)b::text[], %(tokens)b::int[], %(ends)b::bigint[])
                    AS u(id, token, end_ms)
               WHERE t.id = u.id AND t.state = {LEASED} AND t.attempt = u.token
               RETURNING t.id, t.attempt"""
RETRY = f"""UPDATE {{s}}.timers SET state = {SCHEDULED}, due_ms = %(due)s, deadline_ms = NULL,
                updated_ms = %(now)s, last_error = %(error)s, seq = {NEXT_SEQ}
            WHERE {_HELD}"""
# a hand-back that spends no attempt: the claim count (the token) stays, the deferrals rise
DEFER = f"""UPDATE {{s}}.timers SET state = {SCHEDULED}, due_ms = %(due)s, deadline_ms = NULL,
                updated_ms = %(now)s, last_error = %(error)s, deferrals = deferrals + 1,
                first_claimed_ms = CASE WHEN attempt - deferrals > 1 THEN first_claimed_ms END,
                seq = {NEXT_SEQ}
            WHERE {_HELD}"""
DEFER_MANY = f"""WITH u AS (
        SELECT * FROM unnest(%(ids)b::text[], %(tokens)b::int[], %(dues)b::bigint[],
                             %(errors)b::text[]) WITH ORDINALITY AS u(id, token, due, error, n)),
    base AS (SELECT {NEXT_SEQ} AS b)
    UPDATE {{s}}.timers AS t SET state = {SCHEDULED}, due_ms = u.due, deadline_ms = NULL,
        updated_ms = %(now)s, last_error = u.error, deferrals = t.deferrals + 1,
        first_claimed_ms = CASE WHEN t.attempt - t.deferrals > 1 THEN t.first_claimed_ms END,
        seq = base.b + u.n
    FROM u, base WHERE t.id = u.id AND t.state = {LEASED} AND t.attempt = u.token
    RETURNING u.n"""
"""`DEFER` for many leases in one statement, each its own (id, token, due, error); returns the
place (from 1) of each one deferred."""
KILL = f"""UPDATE {{s}}.timers SET state = {DEAD}, deadline_ms = NULL, updated_ms = %(now)s,
               last_error = %(error)s
           WHERE {_HELD}"""
HOLDS = f"SELECT 1 FROM {{s}}.timers WHERE {_HELD} FOR UPDATE"
DROP_HELD = f"DELETE FROM {{s}}.timers WHERE {_HELD}"
"""Delete an occurrence its schedule skips (misfire ``skip``), while the lease still holds it."""
# the state and attempt of the row holding an id, finished or not, past retention or not
STATE_OF = "SELECT state, attempt, deferrals FROM {s}.timers WHERE id = %(id)s"
# what settled timers whose settle may have landed unheard show now (`doubts`)
LANDED = "SELECT id, state, attempt, due_ms FROM {s}.timers WHERE id = ANY(%(ids)s)"

NEXT_DUE = f"""SELECT least(
    (SELECT due_ms FROM {{s}}.timers WHERE queue = %(queue)s AND state = {SCHEDULED}
     ORDER BY due_ms LIMIT 1),
    (SELECT deadline_ms FROM {{s}}.timers WHERE queue = %(queue)s AND state = {LEASED}
     ORDER BY deadline_ms LIMIT 1))"""
DUE_HEADS = """SELECT queue FROM {s}.queue_heads WHERE at_ms BETWEEN %(since)s AND %(horizon)s
               ORDER BY at_ms LIMIT %(limit)s"""
NEXT_HEAD = "SELECT min(at_ms) FROM {s}.queue_heads WHERE at_ms > %(horizon)s"


def _each_queue(state: int) -> str:
    # a loose index scan: one probe of the state's partial index per queue, not a row scan
    return f"""(WITH RECURSIVE q(name) AS (
            SELECT min(queue) FROM {{s}}.timers WHERE state = {state}
            UNION ALL
            SELECT (SELECT min(queue) FROM {{s}}.timers WHERE state = {state} AND queue > q.name)
            FROM q WHERE q.name IS NOT NULL)
        SELECT name FROM q WHERE name IS NOT NULL)"""


QUEUES = f"{_each_queue(SCHEDULED)} UNION {_each_queue(LEASED)} ORDER BY 1"


def _count(state: int, extra: str = "") -> str:
    return f"(SELECT count(*) FROM {{s}}.timers WHERE state = {state}{extra})"


# one statement, so every count comes from one snapshot
STATS = f"""SELECT {_count(SCHEDULED)},
    (SELECT min(due_ms) FROM {{s}}.timers WHERE state = {SCHEDULED}),
    {_count(LEASED)}, {_count(DONE, " AND deadline_ms > %(now)s")}, {_count(DEAD)},
    {_count(PAUSED)}"""
QUEUE_COUNTS = f"""SELECT queue, state, count(*), min(due_ms) FROM {{s}}.timers
    WHERE NOT (state = {DONE} AND deadline_ms <= %(now)s) GROUP BY queue, state"""

GET_SCHEDULE = "SELECT record FROM {s}.schedules WHERE id = %(id)s"
GET_SCHEDULE_LOCKED = f"{GET_SCHEDULE} FOR UPDATE"
PUT_SCHEDULE = """INSERT INTO {s}.schedules (id, record) VALUES (%(id)s, %(record)s)
                  ON CONFLICT (id) DO UPDATE SET record = excluded.record"""
DELETE_SCHEDULE = "DELETE FROM {s}.schedules WHERE id = %(id)s RETURNING record"
COUNT_SCHEDULES = "SELECT count(*) FROM {s}.schedules"
# caps are checked and kept under one lock per schema and table
CAP_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('{s}:' || %(table)s, 0))"

QUEUE_SETTINGS = "SELECT queue, record FROM {s}.queue_settings"
QUEUE_SETTINGS_OF = "SELECT record FROM {s}.queue_settings WHERE queue = %(queue)s FOR UPDATE"
PUT_QUEUE_SETTINGS = """INSERT INTO {s}.queue_settings (queue, record)
                        VALUES (%(queue)s, %(record)s)
                        ON CONFLICT (queue) DO UPDATE SET record = excluded.record"""
DELETE_QUEUE_SETTINGS = "DELETE FROM {s}.queue_settings WHERE queue = %(queue)s"
LIMITS = "SELECT host, record FROM {s}.limits"
LIMIT_PAGE = """SELECT host, record FROM {s}.limits WHERE host > %(cursor)s
                ORDER BY host LIMIT %(limit)s"""
PUT_LIMIT = """INSERT INTO {s}.limits (host, record) VALUES (%(host)s, %(record)s)
               ON CONFLICT (host) DO UPDATE SET record = excluded.record"""
DELETE_LIMIT = "DELETE FROM {s}.limits WHERE host = %(host)s"
HAS_LIMIT = "SELECT 1 FROM {s}.limits WHERE host = %(host)s"
COUNT_LIMITS = "SELECT count(*) FROM {s}.limits"
SETTINGS_VERSIONS = """SELECT (SELECT version FROM {s}.versions WHERE name = 'queue_settings'),
                              (SELECT version FROM {s}.versions WHERE name = 'limits')"""


def list_page(
    state: State | None,
    *,
    after_cursor: bool,
    queue: bool = False,
    due_from: bool = False,
    due_to: bool = False,
) -> str:
    """SQL for a page of live timers in id order, in `state` if given, after ``cursor`` if
    `after_cursor`, of ``queue``, due from ``due_from`` and before ``due_to`` when those are
    asked for; it reads ``limit`` rows."""
    where = [LIVE]
    if after_cursor:
        where.append("id > %(cursor)s")
    if state is not None:
        where.append(f"state = {state_code(state)}")
    if queue:
        where.append("queue = %(queue)s")
    if due_from:
        where.append("due_ms >= %(due_from)s")
    if due_to:
        where.append("due_ms < %(due_to)s")
    return (
        f"SELECT {COLUMNS} FROM {{s}}.timers WHERE {' AND '.join(where)} "
        "ORDER BY id LIMIT %(limit)s"
    )


def schedule_page(*, after_cursor: bool) -> str:
    """SQL for a page of schedules (id, record) in id order, after ``cursor`` if
    `after_cursor`; it reads ``limit`` rows."""
    where = "WHERE id > %(cursor)s " if after_cursor else ""
    return f"SELECT id, record FROM {{s}}.schedules {where}ORDER BY id LIMIT %(limit)s"


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
        (timer_id, queue, state, due_ms, attempt, created, updated, error, first, defer, spec) = row
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
            created,
            updated,
            error,
            first,
            defer,
            trace_parent,
            trace_state,
        )

    def same_spec(self, row: Row, timer: Timer) -> bool:
        """Whether the timer in `row` has `timer`'s spec, compared as stored (through JSON),
        so dict key order and tuple-vs-list do not count."""
        stored = (row[3], row[1], *self._specs.decode(row[-1]))
        return stored == (timer.due_ms, timer.queue, *self._specs.decode(encode_spec(timer)))
