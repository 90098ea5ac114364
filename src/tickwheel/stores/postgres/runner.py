"""`Runner`: what every part of a `PostgresStore` stands on: its settings, clock, connections,
wake-ups, and the running of operations on the pool or in a caller's transaction."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import psycopg

from tickwheel.errors import Closed, StoreUnavailable
from tickwheel.stores.base import StoreSettings, wall_ms
from tickwheel.stores.contract import TransactionContract
from tickwheel.stores.postgres import ops
from tickwheel.stores.postgres.connect import Connector
from tickwheel.stores.postgres.listen import Listener
from tickwheel.stores.postgres.ops import Op, R
from tickwheel.stores.postgres.queries import RowCodec
from tickwheel.stores.postgres.schedule_ops import ScheduleOps

AsyncTx = psycopg.AsyncConnection[Any]
SyncTx = psycopg.Connection[Any] | psycopg.Cursor[Any]


class Runner(TransactionContract[AsyncTx, SyncTx]):
    """Connections and the running of operations; construction does no I/O. Every operation
    runs through `_connection`, `_in` or `_in_sync`, which refuse once the store is closed."""

    def __init__(
        self,
        url: str,
        settings: StoreSettings | None = None,
        *,
        schema: str | None = None,
        clock: Callable[[], int] = wall_ms,
        pool_size: int = 10,
    ) -> None:
        self.settings = settings or StoreSettings()
        self._clock = clock
        self._connector = Connector(url, schema, pool_size)
        self.names = self._connector.names
        self._rows = RowCodec()
        self._schedules = ScheduleOps(self._rows, self.settings)
        self._listener = Listener(self._connector.listener, self.names.channel)
        self._wakeups = self._listener.wakeups
        self._closed = False

    def now_ms(self) -> int:
        """Return the store's clock in epoch ms: the one that decides what is due."""
        return self._clock()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._listener.close()
        await self._connector.close()

    def _woke(self, queue: str | None) -> bool:
        """Wake the waiters of `queue` (a changed timer's), if any; return whether."""
        if queue is None:
            return False
        self._wakeups.notify(queue)
        return True

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        self._check_open()
        async with self._connector.connection() as conn:
            yield conn

    async def _run(self, work: Callable[[int], Op[R]], *, transaction: bool = False) -> R:
        """Run the operation `work(now)` on a pooled connection: one statement in autocommit,
        or all of its statements in one transaction."""
        async with self._connection() as conn:
            if not transaction:
                return await ops.run_async(conn, self.names, work(self._clock()))
            try:
                async with conn.transaction():
                    return await ops.run_async(conn, self.names, work(self._clock()))
            except psycopg.Error as error:  # the commit itself failed
                raise StoreUnavailable(f"postgres store: {error}") from error

    async def _in(self, tx: AsyncTx, work: Callable[[int], Op[R]]) -> R:
        """Run `work(now)` in a savepoint of the caller's transaction on `tx`."""
        self._check_open()
        await self._connector.ready(tx)
        try:
            async with tx.transaction():
                return await ops.run_async(tx, self.names, work(self._clock()))
        except psycopg.Error as error:
            raise StoreUnavailable(f"postgres store: {error}") from error

    def _in_sync(self, tx: SyncTx, work: Callable[[int], Op[R]]) -> R:
        self._check_open()
        conn = tx.connection if isinstance(tx, psycopg.Cursor) else tx
        self._connector.ready_sync(conn)
        return ops.run_sync(conn, self.names, work(self._clock()))

    def _check_open(self) -> None:
        if self._closed:
            raise Closed("store is closed")
