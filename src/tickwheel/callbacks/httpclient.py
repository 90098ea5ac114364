"""A small HTTP/1.1 client for callbacks: keep-alive pools per origin, bounded and slow-started.

A general client (aiohttp) spent ~95 µs of CPU on each callback, most of a worker's budget; a
callback needs only a prebuilt request written to a pooled connection (`connection.py`) and a
status, two headers and a bounded body parsed back. bench/http_clients.py measures the two.

Receivers are not trusted to be well behaved: a connect gets a few seconds, one origin gets a
share of the connections that starts small and grows only while it answers promptly (`pool.py`),
the ports and names of one address share a cap until they answer promptly, a reserve of the
connections is kept for origins that do, and a slow name server holds up only the names it
serves (`resolver.py`).
"""

from __future__ import annotations

import asyncio
import errno
import functools
import socket
import ssl
from collections.abc import Callable, Sequence

from tickwheel.callbacks.connection import Connection, Disconnected, Response
from tickwheel.callbacks.deadlines import Deadlines
from tickwheel.callbacks.guard import keep_public
from tickwheel.callbacks.pool import INITIAL_PER_HOST, Origin, Pool, PoolTimeout
from tickwheel.callbacks.resolver import AddressInfo, ConnectFailed, Resolve, Resolver, getaddrinfo
from tickwheel.callbacks.shares import Shares

KEEPALIVE_S = 15.0  # an idle pooled connection, or an unused origin's state, is dropped after this
# one connect (TCP and TLS): a SYN lost once is resent after 1 s and still fits; a listener whose
# queue is full drops it again, and a fresh socket tried at once does better than waiting
CONNECT_TIMEOUT_S = 3.0
SLOT_WAIT_S = 5.0  # longest wait for a connection slot (or the request's timeout if shorter)


def default_per_host(max_connections: int) -> int:
    """Return the default `max_per_host`: a quarter of `max_connections`, at least one."""
    return max(1, max_connections // 4)


class NotSent(Exception):
    """The request was not sent: its caller's `go` said no once a connection was ready."""


class HttpClient:
    """Keep-alive HTTP/1.1 connections per origin, bounded globally and per origin.

    A request takes a slot of its origin, then one of its address unless the origin is proven
    prompt, then a global one, waiting for them at most its timeout or `SLOT_WAIT_S`,
    whichever is shorter; then its timeout starts, covering DNS, connect, TLS, writing and
    reading the response. One origin may hold `max_per_host` slots (by default a quarter of
    `max_connections`), so endpoints that never answer cannot hold every connection; it starts
    with a few of them and earns the rest (`Pool`). The origins of one address (an IPv4
    address, an IPv6 /64) not proven prompt share twice that, so many ports or names of one
    host hold no more, and the last quarter of that is kept for first calls (an origin's only
    request in flight, its last not timed out); a quarter of the global slots is kept for
    origins proven prompt (`Shares`), so hanging targets on many addresses leave those to
    targets that answer. A connect gets `CONNECT_TIMEOUT_S` and, if it times out or is refused
    or reset, one more try at once on a fresh socket. Names are resolved through a cache
    (`Resolver`).

    Unless `allow_private`, a name resolves to its public addresses only and the socket connects
    to one of those, so the address checked is the address connected to: a name that resolved
    to a public address when checked cannot be pointed at a private one before the connect.
    Idle connections count against `max_connections`; the oldest idle one of any origin is
    closed to make room. `resolve` replaces the loop's getaddrinfo (tests slow lookups down).
    """

    def __init__(
        self,
        *,
        allow_private: bool,
        max_connections: int,
        max_per_host: int | None = None,
        resolve: Resolve = getaddrinfo,
    ) -> None:
        self._allow_private = allow_private
        self._max_connections = max_connections
        self._max_per_host = (
            default_per_host(max_connections) if max_per_host is None else max_per_host
        )
        self._pools: dict[Origin, Pool] = {}
        self._open = 0  # live and connecting, over all pools
        self._resolver = Resolver(resolve)
        self._shares = Shares(
            max_connections, self._max_per_host, self._resolver, allow_private=allow_private
        )
        self._deadlines = Deadlines(Connection.time_out)
        self._tls: ssl.SSLContext | None = None
        self._sweep: asyncio.TimerHandle | None = None
        self._closed = False
        # the loop it runs on, once known: asking for the running loop is a system call
        self._loop: asyncio.AbstractEventLoop | None = None

    def concurrency(self, origin: Origin) -> int:
        """Return how many requests to `origin` may run at once now."""
        pool = self._pools.get(origin)
        return min(INITIAL_PER_HOST, self._max_per_host) if pool is None else pool.limit

    async def request(
        self,
        origin: Origin,
        request: bytes,
        timeout_s: float,
        go: Callable[[], bool] | None = None,
    ) -> Response:
        """Send the prebuilt `request` to `origin` and return its response.

        `go`, if given, is asked on a ready connection right before the request is written:
        waiting for a slot or a connection may outlast what made the request worth sending
        (a worker stopped there past its lease must not fire a timer another worker holds).

        A reused connection that the server had closed while idle fails before any response
        byte; the request then goes once more on a fresh connection (delivery is at least once).

        Raises:
            PoolTimeout: no connection slot came free in time.
            TimeoutError: no complete response within `timeout_s` of getting the slots.
            ConnectFailed, PrivateAddressRefused: no connection could be made.
            InvalidHost: the host name cannot be looked up.
            Disconnected: the server closed the connection before a complete response.
            BadResponse: the response could not be parsed, or broke a limit.
            NotSent: `go` said no; nothing was written.
        """
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        pool = self._pools.get(origin)
        if pool is None:
            pool = self._pools[origin] = Pool(origin, self._max_per_host)
            pool.proven = self._shares.recall(origin, loop.time())
        pool.users += 1
        wait_s = min(timeout_s, SLOT_WAIT_S)
        wait_until = loop.time() + wait_s
        try:
            if pool.slots.free > 0:  # a free slot is taken here, without a coroutine per slot
                pool.slots.free -= 1
            elif not await pool.slots.take(wait_until):
                raise PoolTimeout(wait_s)
            share = held = None
            try:
                now = loop.time()
                if not pool.prompt(now):
                    # the lookup is the request's own (as in a connect), not the slot wait's
                    share = await self._shares.address(pool, now + timeout_s)
                    held = await share.take(pool.probing(), wait_until, wait_s)
                connections = self._shares.connections
                slots = connections.slots
                if slots.free > 0:  # a free global slot is taken here too
                    slots.free -= 1
                else:
                    # a prompt origin's slots come back promptly: it may wait for the reserve
                    prompt = pool.prompt(loop.time())
                    slots = await connections.take(prompt, wait_until, wait_s)
                # every slot is held: the request's timeout starts now
                started = loop.time()
                pool.started.append(started)
                try:
                    response = await self._send(pool, request, started + timeout_s, go)
                    pool.answered(response.status, loop.time() - started)
                    return response
                except TimeoutError:
                    pool.proven = False
                    pool.timed_out = True
                    pool.shrink()
                    raise
                except ConnectFailed as error:
                    if not error.dns:  # a name server's trouble says nothing of the origin's
                        pool.proven = False
                        pool.shrink()
                    raise
                finally:
                    pool.started.remove(started)
                    slots.give()
            finally:
                if held is not None:
                    held.give()
                if share is not None:
                    share.users -= 1
                pool.slots.give()
        finally:
            pool.users -= 1
            pool.last_used = loop.time()
            if self._sweep is None and not self._closed:
                self._sweep = loop.call_later(KEEPALIVE_S, self._expire)

    async def _send(
        self, pool: Pool, request: bytes, deadline: float, go: Callable[[], bool] | None
    ) -> Response:
        connection = pool.take_idle()
        if connection is not None:
            # `_exchange` inline: a request on an idle connection, the common case, is one
            # coroutine less
            if go is not None and not go():
                self._release(pool, connection)
                raise NotSent
            try:
                try:
                    return await connection.send(request, deadline)
                finally:
                    connection.settle()
                    self._release(pool, connection)
            except Disconnected as error:
                if error.started:
                    raise
        opening = pool.opening
        connection = None
        if opening.free > 0:
            opening.free -= 1
        elif await opening.take(deadline):
            connection = pool.take_idle()  # one may have come free meanwhile
        else:
            raise TimeoutError
        try:
            if connection is not None:
                try:
                    return await self._exchange(pool, connection, request, deadline, go)
                except Disconnected as error:
                    if error.started:
                        raise
            connection = await self._connect(pool, deadline)
            return await self._exchange(pool, connection, request, deadline, go)
        finally:
            opening.give()

    async def _exchange(
        self,
        pool: Pool,
        connection: Connection,
        request: bytes,
        deadline: float,
        go: Callable[[], bool] | None,
    ) -> Response:
        if go is not None and not go():
            self._release(pool, connection)
            raise NotSent
        try:
            return await connection.send(request, deadline)
        finally:
            connection.settle()
            self._release(pool, connection)

    def _release(self, pool: Pool, connection: Connection) -> None:
        if not connection.reusable or connection.closed or self._closed:
            self._discard(pool, connection)
            return
        connection.idle_since = connection.loop.time()
        pool.idle.append(connection)

    def _forget(self, pool: Pool, connection: Connection) -> None:
        """Stop counting `connection` (closed by either side); idempotent."""
        if connection in pool.live:
            pool.live.remove(connection)
            self._open -= 1
            if connection in pool.idle:
                pool.idle.remove(connection)

    def _discard(self, pool: Pool, connection: Connection) -> None:
        self._forget(pool, connection)
        connection.close()

    async def _connect(self, pool: Pool, deadline: float) -> Connection:
        if self._open >= self._max_connections:
            self._evict_oldest_idle()
        self._open += 1  # counted while connecting; from then on as one of pool.live
        try:
            host, port = pool.origin[1:]
            found = await self._resolver.resolve(host, port, deadline)
            addresses = found if self._allow_private else keep_public(host, found)
            try:
                return await self._open_connection(pool, addresses, deadline)
            except ConnectFailed as error:
                if not isinstance(error.cause, TimeoutError | ConnectionError):
                    raise
            return await self._open_connection(pool, addresses, deadline)
        finally:
            self._open -= 1

    def _evict_oldest_idle(self) -> None:
        # every open connection not idle has a global slot, and so does the caller
        oldest = min(
            ((pool, pool.idle[0]) for pool in self._pools.values() if pool.idle),
            key=lambda pair: pair[1].idle_since,
            default=None,
        )
        if oldest is not None:
            self._discard(*oldest)

    async def _open_connection(
        self, pool: Pool, addresses: Sequence[AddressInfo], deadline: float
    ) -> Connection:
        scheme, host, _ = pool.origin
        loop = asyncio.get_running_loop()
        tls = self._tls_context() if scheme == "https" else None
        on_lost = functools.partial(self._forget, pool)
        failure: OSError = OSError(f"no address for {host}")
        for family, kind, proto, _, address in addresses:
            give_up = min(deadline, loop.time() + CONNECT_TIMEOUT_S)
            sock = socket.socket(family, kind, proto)
            try:
                sock.setblocking(False)
                async with asyncio.timeout_at(give_up):
                    await loop.sock_connect(sock, address)
                    transport, connection = await loop.create_connection(
                        lambda: Connection(on_lost, self._deadlines),
                        sock=sock,
                        ssl=tls,
                        server_hostname=host if tls is not None else None,
                    )
            except TimeoutError:
                sock.close()
                if give_up >= deadline:
                    raise  # the request's own timeout
                failure = TimeoutError(errno.ETIMEDOUT, f"no connection in {CONNECT_TIMEOUT_S:g} s")
            except OSError as error:
                sock.close()
                failure = error
            except BaseException:
                sock.close()
                raise
            else:
                connection.connection_made(transport)
                if connection.lost:  # closed by the peer before we could count it
                    failure = ConnectionResetError(errno.ECONNRESET, "closed while connecting")
                    continue
                pool.live.add(connection)
                self._open += 1
                return connection
        raise ConnectFailed(failure)

    def _tls_context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = ssl.create_default_context()
        return self._tls

    def _expire(self) -> None:
        """Close connections idle for `KEEPALIVE_S`; forget origins unused that long."""
        loop = asyncio.get_running_loop()
        cutoff = loop.time() - KEEPALIVE_S
        for origin, pool in list(self._pools.items()):
            for connection in [c for c in pool.idle if c.idle_since <= cutoff]:
                self._discard(pool, connection)
            if not (pool.users or pool.live) and pool.last_used <= cutoff:
                del self._pools[origin]
                self._shares.forget(pool, loop.time())
        self._shares.sweep()
        self._sweep = None
        if self._pools and not self._closed:
            self._sweep = loop.call_later(KEEPALIVE_S, self._expire)

    def close(self) -> None:
        """Close every idle connection now and every other one as its request ends."""
        self._closed = True
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        for pool in list(self._pools.values()):
            for connection in list(pool.idle):
                self._discard(pool, connection)
