"""The tables of a `PostgresStore`, in one PostgreSQL schema, and their versioned migrations.

Every name lives in the store's schema (``tickwheel`` unless the URL says ``?schema=``), written
``{s}`` in the SQL templates here and in `queries`; `Names` fills it in. A store creates its
schema when the database has none, and refuses a schema at another version: ``tickwheel
migrate`` moves an older one on, one transaction per step under an advisory lock, so workers
may keep running (each step takes its table locks for a moment only).

Tables: ``timers`` (one row per timer, partial indexes per state), ``schedules``,
``queue_settings`` and ``limits`` (one JSON record a row, as `codec` writes them),
``queue_heads`` (the due-queue index), ``versions`` (of the settings tables), ``attempts``
(each timer's attempt history) and ``schema_version``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from tickwheel.errors import InvalidArgument
from tickwheel.model import State
from tickwheel.stores.codec import state_code

SCHEDULED = state_code(State.SCHEDULED)
LEASED = state_code(State.LEASED)
DONE = state_code(State.DONE)
DEAD = state_code(State.DEAD)
PAUSED = state_code(State.PAUSED)

DEFAULT_SCHEMA = "tickwheel"
SEQ_BLOCK = 1 << 20
"""Rows one statement orders among themselves: ``seq`` is a sequence value times this plus the
row's place, so every statement's rows come after all earlier ones."""
CONTENDED_MS = 20
"""How far ahead a claim that meets writers in flight on its queue may set the queue's head."""

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,39}")


class Names:
    """Fills a store's schema into SQL templates, keeping each result (the templates are
    module constants, so the cache stays small)."""

    def __init__(self, schema: str) -> None:
        if not _SCHEMA_NAME.fullmatch(schema):
            raise InvalidArgument(
                "schema", f"must be 1-40 of a-z 0-9 _, not starting with a digit: {schema!r:.60}"
            )
        self.schema = schema
        self.channel = f"{schema}_wake"
        self._done: dict[str, str] = {}

    def __call__(self, template: str) -> str:
        sql = self._done.get(template)
        if sql is None:
            sql = self._done[template] = template.replace("{s}", self.schema).replace(
                "{channel}", self.channel
            )
        return sql


# a new head for each queue whose new scheduled rows come before its head; its workers hear
# of it by NOTIFY (sent at commit). The shared advisory lock per queue, held to commit, tells
# a claim that rows it cannot see yet may be on the way (see SET_HEAD).
_LOWER_HEADS = f"""CREATE FUNCTION {{s}}.lower_heads() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    q text;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(hashtextextended('{{s}}:' || queue, 0))
    FROM (SELECT DISTINCT queue FROM new_rows WHERE state = {SCHEDULED}) AS fresh;
    FOR q IN
        INSERT INTO {{s}}.queue_heads AS h (queue, at_ms)
        SELECT f.queue, f.at FROM (
            SELECT queue, min(due_ms) AS at FROM new_rows WHERE state = {SCHEDULED}
            GROUP BY queue) AS f
        WHERE NOT EXISTS (
            SELECT 1 FROM {{s}}.queue_heads AS o WHERE o.queue = f.queue AND o.at_ms <= f.at)
        ON CONFLICT (queue) DO UPDATE SET at_ms = excluded.at_ms WHERE excluded.at_ms < h.at_ms
        RETURNING h.queue
    LOOP
        PERFORM pg_notify('{{channel}}', q);
    END LOOP;
    RETURN NULL;
END $$"""

# a claim sets its queue's head to the queue's earliest due time or lease deadline. Writers
# in flight hold the queue's shared lock and their rows are not visible yet: then the head
# only moves up to CONTENDED_MS ahead, and only if no writer holds its row.
_SET_HEAD = f"""CREATE FUNCTION {{s}}.set_head(q text, now_ms bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    at bigint;
    free boolean := pg_try_advisory_xact_lock(hashtextextended('{{s}}:' || q, 0));
BEGIN
    -- a statement of its own: its snapshot is taken with the lock held
    SELECT least(
        (SELECT due_ms FROM {{s}}.timers WHERE queue = q AND state = {SCHEDULED}
         ORDER BY due_ms LIMIT 1),
        (SELECT deadline_ms FROM {{s}}.timers WHERE queue = q AND state = {LEASED}
         ORDER BY deadline_ms LIMIT 1)) INTO at;
    IF free THEN
        IF at IS NULL THEN
            DELETE FROM {{s}}.queue_heads WHERE queue = q;
        ELSE
            INSERT INTO {{s}}.queue_heads (queue, at_ms) VALUES (q, at)
            ON CONFLICT (queue) DO UPDATE SET at_ms = excluded.at_ms;
        END IF;
    ELSE
        at := least(at, now_ms + {CONTENDED_MS});
        UPDATE {{s}}.queue_heads SET at_ms = at
        WHERE queue = q AND at_ms < at AND queue IN (
            SELECT queue FROM {{s}}.queue_heads WHERE queue = q FOR UPDATE SKIP LOCKED);
    END IF;
END $$"""

# a worker waiting on a paused queue hears of its resume at once
_NOTIFY_QUEUE = """CREATE FUNCTION {s}.notify_queue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('{channel}', coalesce(NEW.queue, OLD.queue));
    RETURN NULL;
END $$"""

_BUMP_VERSION = """CREATE FUNCTION {s}.bump_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE {s}.versions SET version = version + 1 WHERE name = TG_TABLE_NAME;
    RETURN NULL;
END $$"""

V1 = (
    "CREATE SCHEMA IF NOT EXISTS {s}",
    """CREATE TABLE {s}.timers (
        id text PRIMARY KEY,
        queue text NOT NULL,
        state smallint NOT NULL,
        due_ms bigint NOT NULL,
        seq bigint NOT NULL,
        deadline_ms bigint,
        attempt integer NOT NULL,
        created_ms bigint NOT NULL,
        updated_ms bigint NOT NULL,
        last_error text,
        spec text NOT NULL,
        first_claimed_ms bigint,
        deferrals integer NOT NULL DEFAULT 0
    ) -- every timer leaves dead row versions behind: vacuum at 2 % of them, not 20 %
    WITH (fillfactor = 90, autovacuum_vacuum_scale_factor = 0.02,
            autovacuum_analyze_scale_factor = 0.05)""",
    "CREATE SEQUENCE {s}.timer_seq",
    # deadline_ms is the lease deadline while leased, the end of retention while done
    f"CREATE INDEX timers_due ON {{s}}.timers (queue, due_ms, seq) WHERE state = {SCHEDULED}",
    f"CREATE INDEX timers_lease ON {{s}}.timers (deadline_ms, seq) WHERE state = {LEASED}",
    f"CREATE INDEX timers_lease_queue ON {{s}}.timers (queue, deadline_ms) WHERE state = {LEASED}",
    f"CREATE INDEX timers_done ON {{s}}.timers (deadline_ms) WHERE state = {DONE}",
    f"CREATE INDEX timers_dead ON {{s}}.timers (queue) WHERE state = {DEAD}",
    f"CREATE INDEX timers_paused ON {{s}}.timers (queue) WHERE state = {PAUSED}",
    "CREATE TABLE {s}.schedules (id text PRIMARY KEY, record text NOT NULL)",
    "CREATE TABLE {s}.queue_settings (queue text PRIMARY KEY, record text NOT NULL)",
    "CREATE TABLE {s}.limits (host text PRIMARY KEY, record text NOT NULL)",
    "CREATE TABLE {s}.queue_heads (queue text PRIMARY KEY, at_ms bigint NOT NULL)",
    "CREATE INDEX queue_heads_at ON {s}.queue_heads (at_ms)",
    "CREATE TABLE {s}.versions (name text PRIMARY KEY, version bigint NOT NULL)",
    "INSERT INTO {s}.versions (name, version) VALUES ('queue_settings', 0), ('limits', 0)",
    _LOWER_HEADS,
    _SET_HEAD,
    _BUMP_VERSION,
    _NOTIFY_QUEUE,
    """CREATE TRIGGER queue_settings_notify AFTER INSERT OR UPDATE OR DELETE ON {s}.queue_settings
       FOR EACH ROW EXECUTE FUNCTION {s}.notify_queue()""",
    # transition tables allow one event per trigger
    """CREATE TRIGGER timers_heads_insert AFTER INSERT ON {s}.timers
       REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION {s}.lower_heads()""",
    """CREATE TRIGGER timers_heads_update AFTER UPDATE ON {s}.timers
       REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION {s}.lower_heads()""",
    *(
        f"""CREATE TRIGGER {table}_version AFTER INSERT OR UPDATE OR DELETE ON {{s}}.{table}
            FOR EACH STATEMENT EXECUTE FUNCTION {{s}}.bump_version()"""
        for table in ("queue_settings", "limits")
    ),
    "CREATE TABLE {s}.schema_version (version integer NOT NULL)",
    "INSERT INTO {s}.schema_version (version) VALUES (0)",
)

# attempt history: a timer's last attempts by number, deleted with it
V2 = (
    """CREATE TABLE {s}.attempts (
        timer_id text NOT NULL REFERENCES {s}.timers (id) ON DELETE CASCADE,
        n integer NOT NULL,
        at_ms bigint NOT NULL,
        record text NOT NULL,
        PRIMARY KEY (timer_id, n)
    )""",
    "CREATE INDEX attempts_at ON {s}.attempts (at_ms)",
)

# the queue table a page at a time (`queue_table.py`): done timers by queue, so every state
# has an index led by queue
V3 = (f"CREATE INDEX timers_done_queue ON {{s}}.timers (queue, deadline_ms) WHERE state = {DONE}",)

# the id of the claim that leased a row: a claim whose reply was lost reads its rows back
V4 = ("ALTER TABLE {s}.timers ADD COLUMN claim_rid bigint",)

MIGRATIONS: Sequence[Sequence[str]] = (V1, V2, V3, V4)
"""Step n takes a schema from version n to n + 1 (the first creates it); append, never edit."""
SCHEMA_VERSION = len(MIGRATIONS)

LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('{s}:migrate', 0))"
SET_VERSION = "UPDATE {s}.schema_version SET version = %s"


def older(version: int, url: str) -> str:
    """What a store says when its schema is behind this code."""
    return (
        f"the PostgreSQL store's schema is at version {version}; this tickwheel needs "
        f"{SCHEMA_VERSION}: run `tickwheel migrate --store {url}`"
    )


def newer(version: int) -> str:
    return (
        f"the PostgreSQL store's schema is at version {version}, newer than this tickwheel "
        f"reads ({SCHEMA_VERSION}): upgrade tickwheel"
    )
