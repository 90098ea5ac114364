"""`SqliteStore`: timers in one SQLite file, the embedded default store.

Durability: a WAL journal with ``synchronous=NORMAL``. A change is in the WAL file when its call
returns, so killing the process (even ``kill -9``) loses nothing; a power loss or OS crash may drop
the last transactions, which were written but not yet fsynced. Several processes may share one
file: a write is one statement or one ``BEGIN IMMEDIATE`` transaction, so they take turns on
SQLite's write lock, waiting up to `schema.BUSY_TIMEOUT_MS` for it.

Schedules: a schedule is a row of ``schedules`` and its occurrences are ordinary timers; each
schedule call is one ``BEGIN IMMEDIATE`` transaction that writes the row together with the
occurrences it cancels, creates or skips, so no crash or other process sees one without the other.

The file, its schema and migrations are `schema.py`'s; the SQL and the rows are `queries.py`'s.
The class is assembled from one part per concept: `thread.py` (the connection and wakeups),
`adding.py` (single adds, inline or through `group_commit.py`), `changing.py`, `leasing.py`,
`stored_schedules.py`, `queue_settings.py` (with `purging.py`, the bulk calls on a queue),
`host_limits.py`, `listing.py` and `queue_table.py` (the queue table a page at a time).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tickwheel.stores.base import StoreSettings, wall_ms
from tickwheel.stores.sqlite.adding import SqliteAdding
from tickwheel.stores.sqlite.changing import SqliteChanging
from tickwheel.stores.sqlite.group_commit import GroupCommit
from tickwheel.stores.sqlite.host_limits import SqliteHostLimits
from tickwheel.stores.sqlite.leasing import CLAIM_BATCH, SqliteLeasing
from tickwheel.stores.sqlite.listing import SqliteListing
from tickwheel.stores.sqlite.purging import SqlitePurging
from tickwheel.stores.sqlite.queue_table import SqliteQueueTable
from tickwheel.stores.sqlite.stored_schedules import SqliteSchedules
from tickwheel.stores.sqlite.thread import BATCH


class SqliteStore(
    SqliteAdding,
    SqliteChanging,
    SqliteLeasing,
    SqliteSchedules,
    SqlitePurging,
    SqliteHostLimits,
    SqliteListing,
    SqliteQueueTable,
):
    """Timers in one SQLite file, shared safely by tasks, threads and processes.

    Every call runs on one thread per store, which opens the connection on first use, so
    construction does no I/O; a lone add may run its one statement on its caller's thread
    instead, when the connection is free. `clock` is called on whichever thread writes.
    """

    def __init__(
        self,
        path: str | Path,
        settings: StoreSettings | None = None,
        *,
        clock: Callable[[], int] = wall_ms,
    ) -> None:
        super().__init__(path, settings, clock=clock)
        self._adding = GroupCommit(self._executor, self._write_new, BATCH, self._add_inline)
        self._replacing = GroupCommit(self._executor, self._write_replacing, BATCH)
        self._claims = GroupCommit(self._executor, self._claim_each, CLAIM_BATCH)
