"""What every part of `SqliteStore` runs on: the file's one connection, on one thread per store
(or, for a lone add, briefly on its caller's), and the wakeups of tasks waiting for a queue to
change."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tickwheel.errors import Closed, StoreUnavailable
from tickwheel.stores.base import StoreSettings, wall_ms
from tickwheel.stores.contract import StoreContract
from tickwheel.stores.schedule_codec import ScheduleCodec
from tickwheel.stores.sqlite.queries import Row, RowCodec
from tickwheel.stores.sqlite.schema import R, Work, connect, transaction
from tickwheel.stores.wake import Wakeups

WATCH_INTERVAL_S = 0.005
"""How often `wait` checks whether another connection committed (``PRAGMA data_version``)."""

BATCH = 1000  # timers or leases per transaction in add_many and ack_many
AUTOCHECKPOINT_PAGES = 1000
"""SQLite's default ``wal_autocheckpoint``: the WAL pages after which a commit checkpoints."""
INLINE_CHECKPOINT_EVERY = 250
"""Commits made on callers' threads before the first checkpoint the store's thread runs for
them; each checkpoint then sets the next count from the pages the last ones wrote."""
INLINE_CHECKPOINT_RANGE = (16, 1000)
"""The fewest and most inline commits between two such checkpoints."""


def _data_version(conn: sqlite3.Connection, now: int) -> int:
    version: int = conn.execute("PRAGMA data_version").fetchone()[0]
    return version


class SqliteThread(StoreContract):
    """The file's connection on one thread, and the wakeups; the base of each part of the store.

    Every call runs on one thread per store, which opens the connection on first use, so
    construction does no I/O. A lone add may instead use the connection on its caller's
    thread, holding `_conn_lock` as the store's thread does, but only if it takes the lock
    without waiting (`adding.py`). `clock` is called on whichever thread holds it.
    """

    def __init__(
        self,
        path: str | Path,
        settings: StoreSettings | None = None,
        *,
        clock: Callable[[], int] = wall_ms,
    ) -> None:
        self.path = Path(path)
        self.settings = settings or StoreSettings()
        self._clock = clock
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tickwheel-sqlite")
        self._conn: sqlite3.Connection | None = None  # used only under _conn_lock
        self._conn_lock = threading.Lock()
        # while True the connection does not checkpoint at commit: a caller's thread must never
        # wait for the fsyncs of a checkpoint; the store's thread runs them (_checkpoint)
        self._checkpoints_off = False
        self._inline_commits = 0
        self._inline_checkpoint_every = INLINE_CHECKPOINT_EVERY
        self._closed = False
        self._rows = RowCodec()  # used only on the store's thread
        self._schedules = ScheduleCodec()  # used only on the store's thread
        self._wakeups = Wakeups()
        self._watcher: asyncio.Task[None] | None = None
        self._seen_version: int | None = None

    def now_ms(self) -> int:
        return self._clock()

    async def _wait(self, queue: str, timeout_s: float) -> bool:
        """Wait for a change to `queue` by this store, or a commit by any other connection.

        Other connections (processes) are seen by polling ``PRAGMA data_version`` every
        `WATCH_INTERVAL_S` while a task waits; the file does not say what changed, so such a
        commit wakes every waiter of this store, whatever its queue.
        """
        self._check_open()
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.create_task(self._watch(), name=f"tickwheel-watch {self.path}")
        return await self._wakeups.wait(queue, timeout_s)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
        try:
            # queued behind every call already submitted, so those finish first
            await asyncio.get_running_loop().run_in_executor(self._executor, self._disconnect)
        finally:
            self._executor.shutdown(wait=True)

    def _woke(self, row: Row | None) -> bool:
        """Wake the waiters of the queue in `row` (a changed timer's), if any; return whether."""
        if row is None:
            return False
        self._wakeups.notify(row[0])
        return True

    async def _watch(self) -> None:
        """Wake every waiter when another connection has committed, polling while tasks wait.

        ``PRAGMA data_version`` on the store's own connection changes only when another
        connection commits (this store's changes notify their queue directly). The version is
        first read when the store connects, and the last seen outlives the task, so a commit
        between two waits still wakes the second.
        """
        while True:
            try:
                version = await self._run(None, _data_version)
            except (StoreUnavailable, Closed):
                self._wakeups.notify_all()  # the waiters' next call reports it
                return
            if version != self._seen_version:
                self._seen_version = version
                self._wakeups.notify_all()
            if not self._wakeups:
                return
            await asyncio.sleep(WATCH_INTERVAL_S)

    def _wake(self, queue: str | None) -> None:
        if queue is not None:
            self._wakeups.notify(queue)

    async def _run(self, begin: str | None, work: Work[R]) -> R:
        self._check_open()
        try:
            future = asyncio.get_running_loop().run_in_executor(
                self._executor, self._on_thread, begin, work
            )
        except RuntimeError as error:  # the executor shut down under a concurrent close
            raise Closed("store is closed") from error
        return await future

    def _on_thread(self, begin: str | None, work: Work[R]) -> R:
        try:
            with self._conn_lock:  # held by a lone add on its caller's thread for one statement
                if self._conn is None:
                    self._conn = connect(self.path, self._clock)
                    if self._seen_version is None:
                        # what the watch compares with from the first poll on: however late
                        # that poll comes, only another connection's commit since now wakes
                        self._seen_version = _data_version(self._conn, 0)
                elif self._checkpoints_off:
                    self._conn.execute(f"PRAGMA wal_autocheckpoint = {AUTOCHECKPOINT_PAGES}")
                    self._checkpoints_off = False
                return transaction(self._conn, begin, self._clock, work)
        except sqlite3.Error as error:
            raise StoreUnavailable(f"sqlite store {self.path}: {error}") from error

    def _inline_conn(self) -> sqlite3.Connection | None:
        """With `_conn_lock` held by the caller: the connection, ready to commit on the
        caller's thread without checkpointing, or None before the store's thread opened it."""
        conn = self._conn
        if conn is not None and not self._checkpoints_off:
            conn.execute("PRAGMA wal_autocheckpoint = 0")
            self._checkpoints_off = True
        return conn

    def _inline_committed(self) -> None:
        """With `_conn_lock` held: count a commit made on a caller's thread; when there have
        been enough for about `AUTOCHECKPOINT_PAGES` of WAL, ask the store's thread for the
        checkpoint they did not run."""
        self._inline_commits += 1
        if self._inline_commits == self._inline_checkpoint_every:
            with contextlib.suppress(RuntimeError):  # shut down: closing checkpoints anyway
                self._executor.submit(self._checkpoint)

    def _checkpoint(self) -> None:
        """On the store's thread: copy the WAL into the file as far as readers allow, as
        SQLite's own checkpoint at commit does (a failure leaves it to the next), and set how
        many inline commits make `AUTOCHECKPOINT_PAGES` from the pages these ones wrote.

        It holds the connection, as SQLite's own checkpoint does, so that no commit lands
        while it copies: a checkpoint that always has new pages to catch up with never lets
        the WAL start over (on a second connection it grew to 69,000 pages in 20,000 adds).
        """
        with self._conn_lock:
            commits, self._inline_commits = self._inline_commits, 0
            if self._conn is None:
                return
            try:
                _, pages, _ = self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            except sqlite3.Error:
                return
            if pages > 0 and commits > 0:  # pages is -1 for a database not in WAL mode
                low, high = INLINE_CHECKPOINT_RANGE
                every = commits * AUTOCHECKPOINT_PAGES // pages
                self._inline_checkpoint_every = min(max(every, low), high)

    def _disconnect(self) -> None:
        with self._conn_lock:
            if self._conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.execute("PRAGMA optimize")
                self._conn.close()
                self._conn = None

    def _check_open(self) -> None:
        if self._closed:
            raise Closed("store is closed")
