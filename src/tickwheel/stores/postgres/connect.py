"""`Connector`: a `PostgresStore`'s connections (a small pool of its own, the listener's), its
URL, and the schema check each store makes once; `migrate` for ``tickwheel migrate``.

The pool keeps idle connections and makes new ones on demand, failing at once when the server
is down: the caller (a worker) decides when to try again. After any connection error it drops
every idle connection, as a server restart breaks them all; so a restarted server costs one
failed call, not one per pooled connection, nor a reconnect backoff that outlasts a lease.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import suppress
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg.pq import TransactionStatus

from tickwheel.errors import InvalidArgument, StoreUnavailable
from tickwheel.stores.postgres import schema as ddl
from tickwheel.stores.postgres.schema import Names
from tickwheel.stores.redaction import redact

POOL_TIMEOUT_S = 5.0
"""Longest wait for a pooled connection (the server down, the pool busy) before a call fails."""
CONNECT_TIMEOUT_S = 5

# read from pg_class under the statement's snapshot: `to_regclass` answers from the
# backend's catalog cache, which an advisory lock does not refresh, so a store that waited for
# another to create the schema would still see none and create it again
_EXISTS = """SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables
             WHERE schemaname = '{s}' AND tablename = 'schema_version')"""
_VERSION = "SELECT version FROM {s}.schema_version"


def split_url(url: str, schema: str | None) -> tuple[str, str]:
    """Return the connection URL without the store's own ``schema`` parameter, and the
    schema: `schema` if given, else the URL's, else the default."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    named = [value for key, value in query if key == "schema"]
    if len(named) > 1:
        raise InvalidArgument("url", "give ?schema= at most once")
    rest = urlencode([(key, value) for key, value in query if key != "schema"])
    chosen = schema or (named[0] if named else ddl.DEFAULT_SCHEMA)
    return urlunsplit(parts._replace(query=rest)), chosen


class Connector:
    """The connections of one store; the schema is checked (created when absent) on the first
    connection it hands out."""

    def __init__(self, url: str, schema: str | None, pool_size: int) -> None:
        self.url = url
        self.conninfo, chosen = split_url(url, schema)
        self.names = Names(chosen)
        self._pool_size = pool_size
        self._idle: list[psycopg.AsyncConnection[Any]] = []
        self._slots: asyncio.Semaphore | None = None
        self._checked = False
        self._closed = False

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A connection in autocommit, back to the pool after the block unless it broke;
        errors reaching the server are `StoreUnavailable`."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self._pool_size)
        try:
            if self._slots.locked():  # all in use: wait, within bounds
                async with asyncio.timeout(POOL_TIMEOUT_S):
                    await self._slots.acquire()
            else:
                await self._slots.acquire()
        except TimeoutError:
            raise StoreUnavailable(
                f"postgres store {redact(self.url)}: no free connection in {POOL_TIMEOUT_S:g} s"
            ) from None
        conn: psycopg.AsyncConnection[Any] | None = None
        try:
            conn = self._idle.pop() if self._idle else await self._connect()
            yield conn
        except psycopg.OperationalError as error:
            self._drop_idle()
            raise StoreUnavailable(f"postgres store {redact(self.url)}: {error}") from error
        except StoreUnavailable:
            self._drop_idle()
            raise
        finally:
            self._slots.release()
            if conn is not None:
                self._give_back(conn)

    async def _connect(self) -> psycopg.AsyncConnection[Any]:
        if not self._checked:
            async with await self.listener() as conn:
                await _ensure_async(conn, self.names, self.url)
            self._checked = True
        return await self.listener()

    def _give_back(self, conn: psycopg.AsyncConnection[Any]) -> None:
        idle = conn.info.transaction_status == TransactionStatus.IDLE
        if self._closed or conn.closed or conn.broken or not idle:
            _close_soon(conn)
        else:
            self._idle.append(conn)

    def _drop_idle(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            _close_soon(conn)

    async def listener(self) -> psycopg.AsyncConnection[Any]:
        """A new connection of its own, in autocommit (for LISTEN, and the schema check)."""
        try:
            return await psycopg.AsyncConnection.connect(
                self.conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S
            )
        except psycopg.OperationalError as error:
            raise StoreUnavailable(f"postgres store {redact(self.url)}: {error}") from error

    async def ready(self, tx: psycopg.AsyncConnection[Any]) -> None:
        """Check the schema before the first write in a caller's transaction (`tx` is not
        used: a schema made in it would roll back with it)."""
        if not self._checked:
            async with self.connection():
                pass

    def ready_sync(self, tx: psycopg.Connection[Any]) -> None:
        """`ready` for a sync caller, on a short connection of its own."""
        if self._checked:
            return
        try:
            with psycopg.connect(self.conninfo, autocommit=True) as conn:
                _ensure_sync(conn, self.names, self.url)
        except psycopg.Error as error:
            raise StoreUnavailable(f"postgres store {redact(self.url)}: {error}") from error
        self._checked = True

    async def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            with suppress(psycopg.Error, OSError):
                await conn.close()


def _close_soon(conn: psycopg.AsyncConnection[Any]) -> None:
    """Close a connection the pool will not keep, without waiting on a server that may be gone
    (closing a broken one sends nothing)."""
    with suppress(psycopg.Error, OSError):
        conn.pgconn.finish()


async def _ensure_async(conn: psycopg.AsyncConnection[Any], names: Names, url: str) -> None:
    """Create the schema if the database has none; refuse one at another version."""
    try:
        version = await _version_async(conn, names)
        if version == 0:
            async with conn.transaction():
                await conn.execute(names(ddl.LOCK))
                if await _version_async(conn, names) == 0:  # no one made it meanwhile
                    for statement in _steps(0):
                        await conn.execute(names(statement))
                    await conn.execute(names(ddl.SET_VERSION), (ddl.SCHEMA_VERSION,))
            version = ddl.SCHEMA_VERSION
    except psycopg.Error as error:
        raise StoreUnavailable(f"postgres store {redact(url)}: {error}") from error
    _check(version, url)


async def _version_async(conn: psycopg.AsyncConnection[Any], names: Names) -> int:
    row = await (await conn.execute(names(_EXISTS))).fetchone()
    if row is None or not row[0]:
        return 0
    row = await (await conn.execute(names(_VERSION))).fetchone()
    return 0 if row is None else int(row[0])


def _ensure_sync(conn: psycopg.Connection[Any], names: Names, url: str) -> None:
    version = _version_sync(conn, names)
    if version == 0:
        migrate_on(conn, names)
        version = ddl.SCHEMA_VERSION
    _check(version, url)


def _version_sync(conn: psycopg.Connection[Any], names: Names) -> int:
    row = conn.execute(names(_EXISTS)).fetchone()
    if row is None or not row[0]:
        return 0
    row = conn.execute(names(_VERSION)).fetchone()
    return 0 if row is None else int(row[0])


def _check(version: int, url: str) -> None:
    if version < ddl.SCHEMA_VERSION:
        raise StoreUnavailable(ddl.older(version, redact(url)))
    if version > ddl.SCHEMA_VERSION:
        raise StoreUnavailable(ddl.newer(version))


def _steps(version: int) -> list[str]:
    return [statement for step in ddl.MIGRATIONS[version:] for statement in step]


def migrate_on(conn: psycopg.Connection[Any], names: Names) -> tuple[int, int]:
    """Bring the schema to `SCHEMA_VERSION`, a step per transaction under the migration lock;
    return the versions before and after."""
    before = _version_sync(conn, names)
    while True:
        with conn.transaction():
            conn.execute(names(ddl.LOCK))
            version = _version_sync(conn, names)  # again, under the lock
            if version >= ddl.SCHEMA_VERSION:
                break
            for statement in ddl.MIGRATIONS[version]:
                conn.execute(names(statement))
            conn.execute(names(ddl.SET_VERSION), (version + 1,))
    if version > ddl.SCHEMA_VERSION:
        raise StoreUnavailable(ddl.newer(version))
    return before, version


def migrate(url: str) -> tuple[int, int]:
    """Apply the migrations the store at `url` (a ``postgresql://`` URL, ``?schema=`` allowed)
    lacks; return its schema versions before and after. Safe while workers run."""
    conninfo, chosen = split_url(url, None)
    try:
        with psycopg.connect(conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S) as conn:
            return migrate_on(conn, Names(chosen))
    except psycopg.Error as error:
        raise StoreUnavailable(f"postgres store {redact(url)}: {error}") from error
