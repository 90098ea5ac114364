"""The SQLite file behind a `SqliteStore`: its mode, connection settings, schema and migrations,
and the transactions every call runs in.

File modes: a timer's callback may carry credentials (an ``Authorization`` header), so a file
this store creates is readable by its owner only (0600, whatever the umask); SQLite gives its
``-wal`` and ``-shm`` files the mode of the database file. An existing file keeps its mode.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from tickwheel.errors import StoreUnavailable
from tickwheel.model import State
from tickwheel.stores.codec import state_code

R = TypeVar("R")
Work = Callable[[sqlite3.Connection, int], R]

SCHEMA_VERSION = 7
MIN_SQLITE = (3, 35, 0)  # UPDATE ... FROM (3.33) and RETURNING (3.35)
BUSY_TIMEOUT_MS = 5000
"""How long a call waits for another connection's write lock before the store is unavailable."""
LOCK_POLL_S = 0.0005
"""How often a call waiting for that lock tries again. SQLite's own busy handler sleeps up to
100 ms between tries, and so misses the short gaps between another process's transactions."""
FILE_MODE = 0o600
"""The mode of a database file this store creates: its callbacks may hold credentials."""

# literal state codes: SQLite uses a partial index only when a query repeats its WHERE literally
SCHEDULED = state_code(State.SCHEDULED)
LEASED = state_code(State.LEASED)
DONE = state_code(State.DONE)
DEAD = state_code(State.DEAD)
PAUSED = state_code(State.PAUSED)

# next_due_ms reads a queue's earliest lease deadline from this one
_LEASE_BY_QUEUE = (
    f"CREATE INDEX timers_lease_queue ON timers (queue, deadline_ms) WHERE state = {LEASED}"
)
# a rowid table, not WITHOUT ROWID: a record carries its target (URL, headers, payload), often
# past the twentieth of a page that SQLite advises a WITHOUT ROWID row to stay under
_SCHEDULES = "CREATE TABLE schedules (id TEXT PRIMARY KEY, record TEXT NOT NULL)"
# flow control: paused timers by queue (queue_infos counts them, list filters them), and what
# an operator set, as `codec.encode_queue_settings` and `codec.encode_limit` write it
_FLOW_CONTROL = (
    f"CREATE INDEX timers_paused ON timers (queue) WHERE state = {PAUSED}",
    "CREATE TABLE queue_settings (queue TEXT PRIMARY KEY, record TEXT NOT NULL)",
    "CREATE TABLE limits (host TEXT PRIMARY KEY, record TEXT NOT NULL)",
)


def _lower_head(name: str, event: str) -> str:
    # a timer that becomes scheduled may be its queue's earliest: lower the queue's head
    return f"""CREATE TRIGGER timers_head_{name} AFTER {event} ON timers
        WHEN NEW.state = {SCHEDULED}
        BEGIN
            INSERT INTO queue_heads (queue, at_ms) VALUES (NEW.queue, NEW.due_ms)
            ON CONFLICT (queue) DO UPDATE SET at_ms = excluded.at_ms WHERE excluded.at_ms < at_ms;
        END"""


# the due-queue index (Store.due_queues): per queue a time by which it may hold something to
# claim, never later than its earliest scheduled due time or lease deadline; the triggers
# lower it, and each claim of the queue sets it right (or drops an empty queue)
_QUEUE_HEADS = (
    "CREATE TABLE queue_heads (queue TEXT PRIMARY KEY, at_ms INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE INDEX queue_heads_at ON queue_heads (at_ms)",
    _lower_head("insert", "INSERT"),
    _lower_head("update", "UPDATE OF state, due_ms"),
)


_DEFERRALS = "ALTER TABLE timers ADD COLUMN deferrals INTEGER NOT NULL DEFAULT 0"


# a version per settings table, moved by triggers in the transaction of every write to it, so a
# worker reads one row a second instead of every setting (`Store.settings_versions`)
_VERSIONS = (
    "CREATE TABLE versions (name TEXT PRIMARY KEY, version INTEGER NOT NULL) WITHOUT ROWID",
    "INSERT INTO versions (name, version) VALUES ('queue_settings', 0), ('limits', 0)",
    *(
        f"""CREATE TRIGGER {table}_{event.lower()} AFTER {event} ON {table} BEGIN
            UPDATE versions SET version = version + 1 WHERE name = '{table}'; END"""
        for table in ("queue_settings", "limits")
        for event in ("INSERT", "UPDATE", "DELETE")
    ),
)
# attempt history: a timer's last attempts, by number, and its own trigger deletes them with it
_ATTEMPTS = (
    """CREATE TABLE attempts (
        timer_id TEXT NOT NULL,
        n INTEGER NOT NULL,
        at_ms INTEGER NOT NULL,
        record TEXT NOT NULL,
        PRIMARY KEY (timer_id, n)
    )""",
    "CREATE INDEX attempts_at ON attempts (at_ms)",
    """CREATE TRIGGER timers_attempts AFTER DELETE ON timers
        BEGIN DELETE FROM attempts WHERE timer_id = OLD.id; END""",
)

# the queue table a page at a time (`queue_table.py`): done and dead timers by queue, so every
# state has an index led by queue and a page of names, and their counts, read a range of it
_QUEUE_INDEXES = (
    f"CREATE INDEX timers_done_queue ON timers (queue, deadline_ms) WHERE state = {DONE}",
    f"CREATE INDEX timers_dead_queue ON timers (queue) WHERE state = {DEAD}",
)

SCHEMA = (
    """CREATE TABLE timers (
        id TEXT NOT NULL UNIQUE,
        queue TEXT NOT NULL,
        state INTEGER NOT NULL,
        due_ms INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        deadline_ms INTEGER,
        attempt INTEGER NOT NULL,
        created_ms INTEGER NOT NULL,
        updated_ms INTEGER NOT NULL,
        last_error TEXT,
        spec TEXT NOT NULL,
        first_claimed_ms INTEGER,
        deferrals INTEGER NOT NULL DEFAULT 0
    )""",
    # deadline_ms is the lease deadline while leased, the end of retention while done
    f"CREATE INDEX timers_due ON timers (queue, due_ms, seq) WHERE state = {SCHEDULED}",
    f"CREATE INDEX timers_lease ON timers (deadline_ms, seq) WHERE state = {LEASED}",
    _LEASE_BY_QUEUE,
    f"CREATE INDEX timers_done ON timers (deadline_ms) WHERE state = {DONE}",
    f"CREATE INDEX timers_dead ON timers (id) WHERE state = {DEAD}",
    _SCHEDULES,
    *_FLOW_CONTROL,
    *_QUEUE_HEADS,
    *_VERSIONS,
    *_ATTEMPTS,
    *_QUEUE_INDEXES,
    f"PRAGMA user_version = {SCHEMA_VERSION}",
)
"""The statements that make a new file's schema, the last one setting its version."""


def connect(path: Path, clock: Callable[[], int]) -> sqlite3.Connection:
    """Open `path` in WAL mode, creating the file and its schema, or migrating an older one."""
    if sqlite3.sqlite_version_info < MIN_SQLITE:
        raise StoreUnavailable(
            f"the SQLite store needs SQLite {'.'.join(map(str, MIN_SQLITE))} or newer; "
            f"Python here links SQLite {sqlite3.sqlite_version}"
        )
    _create_private(path)
    # used by one thread at a time: the store's, or a caller's for a lone add (`thread.py`)
    conn = sqlite3.connect(
        path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False
    )
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            transaction(conn, "BEGIN IMMEDIATE", clock, lambda c, now: _migrate(c, path))
        # from here on `transaction` waits for the write lock itself, trying often
        conn.execute("PRAGMA busy_timeout = 0")
    except BaseException:
        conn.close()
        raise
    return conn


def transaction(
    conn: sqlite3.Connection, begin: str | None, clock: Callable[[], int], work: Work[R]
) -> R:
    """Run `work(conn, now)` after `begin` (None: one statement, atomic alone), then commit.

    While another connection holds the write lock, the whole call is tried again every
    `LOCK_POLL_S`, for up to `BUSY_TIMEOUT_MS`: a busy error comes before anything is written
    (at ``BEGIN IMMEDIATE``, or from the one statement), so trying again is safe.
    """
    deadline: float | None = None
    while True:
        try:
            return _once(conn, begin, clock, work)
        except sqlite3.OperationalError as error:
            # an error SQLite raised carries its code; one raised by Python code does not
            if getattr(error, "sqlite_errorcode", 0) & 0xFF != sqlite3.SQLITE_BUSY:
                raise
            now = time.monotonic()
            deadline = deadline or now + BUSY_TIMEOUT_MS / 1000
            if now >= deadline:
                raise
        time.sleep(LOCK_POLL_S)


def _once(
    conn: sqlite3.Connection, begin: str | None, clock: Callable[[], int], work: Work[R]
) -> R:
    if begin is None:
        return work(conn, clock())
    conn.execute(begin)
    try:
        # read the clock once the lock is held, so a wait for the lock does not age `now`
        result = work(conn, clock())
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        raise
    return result


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    # read again under the write lock: another process may have just created the schema
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version == 0:
        for statement in SCHEMA:
            conn.execute(statement)
        return
    if version == SCHEMA_VERSION:
        return
    if not 1 <= version < SCHEMA_VERSION:
        raise StoreUnavailable(
            f"{path} has schema version {version}; this tickwheel reads {SCHEMA_VERSION}"
        )
    # each step takes the file one version on, so an old file passes through them all
    if version == 1:
        # 1 -> 2: when the current run of attempts began; next_due_ms's lease index
        conn.execute("ALTER TABLE timers ADD COLUMN first_claimed_ms INTEGER")
        conn.execute(_LEASE_BY_QUEUE)
    if version <= 2:
        # 2 -> 3: durable schedules; their occurrences are ordinary timers
        conn.execute(_SCHEDULES)
    if version <= 3:
        # 3 -> 4: paused timers, queue settings and host limits (state codes 0-3 are unchanged)
        for statement in _FLOW_CONTROL:
            conn.execute(statement)
    if version <= 4:
        # 4 -> 5: claims handed back unsent (a limit, a Retry-After hold, no free connection),
        # and the due-queue index, filled from the timers the file holds
        conn.execute(_DEFERRALS)
        for statement in _QUEUE_HEADS:
            conn.execute(statement)
        conn.execute(
            f"""INSERT INTO queue_heads (queue, at_ms)
                SELECT queue, min(t) FROM (
                    SELECT queue, due_ms AS t FROM timers WHERE state = {SCHEDULED}
                    UNION ALL
                    SELECT queue, deadline_ms FROM timers WHERE state = {LEASED})
                GROUP BY queue"""
        )
        for statement in _VERSIONS:
            conn.execute(statement)
    if version <= 5:
        # 5 -> 6: attempt history
        for statement in _ATTEMPTS:
            conn.execute(statement)
    if version <= 6:
        # 6 -> 7: done and dead timers by queue, for a page of the queue table
        for statement in _QUEUE_INDEXES:
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _create_private(path: Path) -> None:
    """Create `path` empty with `FILE_MODE` unless it exists; SQLite then takes it as new.

    ``fchmod`` undoes the umask, which may narrow the mode ``open`` gives (to 0400, say).
    """
    if str(path) == ":memory:":  # SQLite's name for a database in memory, not a file
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
    except FileExistsError:
        return  # an existing file (or another process's, just made) keeps its mode
    except OSError as error:
        raise StoreUnavailable(f"sqlite store {path}: cannot create: {error.strerror}") from error
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)
