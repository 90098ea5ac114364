"""A small HTTP/1.1 client for callbacks: keep-alive pools on `asyncio.Protocol` + httptools.

aiohttp's general request path cost ~95 µs of CPU per callback, most of a worker's budget; a
callback needs only a prebuilt request written to a pooled connection and a status, two headers
and a bounded body parsed back by httptools' C parser (docs/decisions.md #15).
"""

from __future__ import annotations

import asyncio
import errno
import socket
import ssl
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import httptools

from tickwheel.engine.guard import is_public_address

READ_LIMIT_BYTES = 64 * 1024  # read no more of a response; a longer one costs its connection
KEEPALIVE_S = 15.0  # an idle pooled connection is closed after about this long

Origin = tuple[str, str, int]  # scheme, host (IDNA, IPv6 without brackets), port
AddressInfo = tuple[int, int, int, str, tuple[Any, ...]]  # as getaddrinfo returns it


class PrivateAddressRefused(OSError):
    """A callback host resolved only to addresses tickwheel may not call."""

    def __init__(self, host: str, address: str) -> None:
        super().__init__(f"refused: {host} resolves to private address {address}")


class ConnectFailed(Exception):
    """No connection could be made to an origin; `cause` says why, `dns` if name lookup."""

    def __init__(self, cause: OSError, *, dns: bool = False) -> None:
        super().__init__(cause)
        self.cause = cause
        self.dns = dns


class Disconnected(ConnectionError):
    """The server closed the connection before its response was complete."""

    def __init__(self, started: bool) -> None:
        super().__init__("during the response" if started else "before a response")
        self.started = started


class BadResponse(Exception):
    """The server's bytes are not an HTTP/1.x response."""


@dataclass(frozen=True, slots=True)
class Response:
    """What a callback's outcome needs of a response: status, two headers, a bounded body."""

    status: int
    retry_after: str | None
    location: str | None
    body: bytes


def keep_public(host: str, found: Sequence[AddressInfo]) -> list[AddressInfo]:
    """Return the public addresses in `found`; raise `PrivateAddressRefused` if none are."""
    public = [info for info in found if is_public_address(str(info[4][0]))]
    if not public and found:
        raise PrivateAddressRefused(host, str(found[0][4][0]))
    return public


class _Connection(asyncio.Protocol):
    """One keep-alive connection: writes a request and parses its response into a future."""

    def __init__(self, client: HttpClient, pool: _Pool) -> None:
        self.client = client
        self.pool = pool
        self.idle_since = 0.0
        self.reusable = False
        self._transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future[Response] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._status = 0
        self._retry_after: str | None = None
        self._location: str | None = None
        self._framed = False  # Content-Length or Transfer-Encoding: the body does not end at EOF
        self._headers_done = False
        self._chunks: list[bytes] = []
        self._size = 0
        self._started = False
        self.lost = False

    @property
    def closed(self) -> bool:
        return self.lost or self._transport is None or self._transport.is_closing()

    def send(self, request: bytes, deadline: float) -> asyncio.Future[Response]:
        """Write `request`; the future resolves to its response, or fails at loop time `deadline`.

        A call_at per request costs a fraction of `asyncio.timeout`'s bookkeeping.
        """
        assert self._transport is not None
        loop = asyncio.get_running_loop()
        self._waiter = waiter = loop.create_future()
        self._timer = loop.call_at(deadline, self._time_out)
        self.reusable = self._framed = self._headers_done = self._started = False
        self._status = self._size = 0
        self._retry_after = self._location = None
        self._chunks = []
        self._transport.write(request)
        return waiter

    def settle(self) -> None:
        """Stop the current request's deadline (its response is in, or it was given up)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _time_out(self) -> None:
        self._fail(TimeoutError())

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop calls this after create_connection has returned: see _open_connection
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self._waiter is None or self._waiter.done():
            self.close()  # bytes nobody asked for: the stream is out of step
            return
        self._started = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError:
            self._fail(BadResponse())

    def on_header(self, name: bytes, value: bytes) -> None:
        lowered = name.lower()
        if lowered == b"retry-after":
            self._retry_after = value.decode("latin-1")
        elif lowered == b"location":
            self._location = value.decode("latin-1")
        elif lowered in (b"content-length", b"transfer-encoding"):
            self._framed = True

    def on_headers_complete(self) -> None:
        self._status = self._parser.get_status_code()
        self._headers_done = True

    def on_body(self, body: bytes) -> None:
        if self._size < READ_LIMIT_BYTES:
            self._chunks.append(body[: READ_LIMIT_BYTES - self._size])
        self._size += len(body)
        if self._size > READ_LIMIT_BYTES:
            self._finish(reusable=False)

    def on_message_complete(self) -> None:
        if 100 <= self._status < 200:  # an interim response: the real one follows
            self._headers_done = self._framed = False
            self._retry_after = self._location = None
            return
        self._finish(reusable=self._parser.should_keep_alive())

    def _finish(self, *, reusable: bool) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            chunks = self._chunks
            body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
            self.reusable = reusable
            waiter.set_result(Response(self._status, self._retry_after, self._location, body))

    def _fail(self, error: Exception) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)
        self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._headers_done and not self._framed:
            self._finish(reusable=False)  # a body delimited by the connection's close
        self._fail(Disconnected(self._started))
        self.lost = True
        self.client.forget(self)


class _Slots:
    """A counting semaphore that hands a freed slot straight to its first waiter.

    `asyncio.Semaphore` wakes waiters to compete for the count again; direct hand-over costs a
    future per wait and nothing when a slot is free.
    """

    def __init__(self, count: int) -> None:
        self.free = count
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def take(self) -> None:
        """Wait for a slot; the caller owns it once this returns (free was 0: see `request`)."""
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if not waiter.cancelled():
                self.give()  # handed over just as we were cancelled: pass it on
            raise

    def give(self) -> None:
        """Free a slot: the first waiter still waiting gets it."""
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self.free += 1


class _Pool:
    """One origin's connections and slots; dropped when nothing uses or holds any."""

    def __init__(self, origin: Origin, max_per_host: int) -> None:
        self.origin = origin
        self.idle: list[_Connection] = []  # most recently used last
        self.live: set[_Connection] = set()
        self.users = 0
        self.slots = _Slots(max_per_host)

    def take_idle(self) -> _Connection | None:
        idle = self.idle
        while idle:
            connection = idle.pop()
            if not connection.closed:
                return connection
        return None


class HttpClient:
    """Keep-alive HTTP/1.1 connections per origin, bounded globally and per origin.

    A request takes a slot of its origin, then a global one, then starts its timeout, which
    covers DNS, connect, TLS, writing and reading the response. Unless `allow_private`, a name
    resolves to its public addresses only and the socket connects to one of those, so the
    address checked is the address connected to (decision 17). Idle connections count against
    `max_connections`; the oldest idle one of any origin is closed to make room.
    """

    def __init__(self, *, allow_private: bool, max_connections: int, max_per_host: int) -> None:
        self._allow_private = allow_private
        self._max_connections = max_connections
        self._max_per_host = max_per_host
        self._pools: dict[Origin, _Pool] = {}
        self._slots = _Slots(max_connections)
        self._open = 0  # live and connecting, over all pools
        self._tls: ssl.SSLContext | None = None
        self._sweep: asyncio.TimerHandle | None = None
        self._closed = False

    async def request(self, origin: Origin, request: bytes, timeout_s: float) -> Response:
        """Send the prebuilt `request` to `origin` and return its response.

        A reused connection that the server had closed while idle fails before any response
        byte; the request then goes once more on a fresh connection (delivery is at least once).

        Raises:
            TimeoutError: no complete response within `timeout_s` of getting the slots.
            ConnectFailed, PrivateAddressRefused: no connection could be made.
            Disconnected: the server closed the connection before a complete response.
            BadResponse: the response could not be parsed.
        """
        pool = self._pools.get(origin)
        if pool is None:
            pool = self._pools[origin] = _Pool(origin, self._max_per_host)
        pool.users += 1
        try:
            if pool.slots.free:  # a free slot is taken here, without a coroutine per slot
                pool.slots.free -= 1
            else:
                await pool.slots.take()
            try:
                if self._slots.free:
                    self._slots.free -= 1
                else:
                    await self._slots.take()
                try:
                    return await self._send(pool, request, timeout_s)
                finally:
                    self._slots.give()
            finally:
                pool.slots.give()
        finally:
            pool.users -= 1
            self._drop_if_unused(pool)

    async def _send(self, pool: _Pool, request: bytes, timeout_s: float) -> Response:
        deadline = asyncio.get_running_loop().time() + timeout_s
        connection = pool.take_idle()
        if connection is not None:
            try:
                return await self._exchange(connection, request, deadline)
            except Disconnected as error:
                if error.started:
                    raise
        async with asyncio.timeout_at(deadline):
            connection = await self._connect(pool)
        return await self._exchange(connection, request, deadline)

    async def _exchange(self, connection: _Connection, request: bytes, deadline: float) -> Response:
        try:
            return await connection.send(request, deadline)
        finally:
            connection.settle()
            self._release(connection)

    def _release(self, connection: _Connection) -> None:
        if not connection.reusable or connection.closed or self._closed:
            self._discard(connection)
            return
        loop = asyncio.get_running_loop()
        connection.idle_since = loop.time()
        connection.pool.idle.append(connection)
        if self._sweep is None:
            self._sweep = loop.call_later(KEEPALIVE_S, self._expire)

    def forget(self, connection: _Connection) -> None:
        """Stop counting `connection` (closed by either side); idempotent."""
        pool = connection.pool
        if connection in pool.live:
            pool.live.remove(connection)
            self._open -= 1
            if connection in pool.idle:
                pool.idle.remove(connection)
            self._drop_if_unused(pool)

    def _discard(self, connection: _Connection) -> None:
        self.forget(connection)
        connection.close()

    def _drop_if_unused(self, pool: _Pool) -> None:
        if not (pool.users or pool.live) and self._pools.get(pool.origin) is pool:
            del self._pools[pool.origin]

    async def _connect(self, pool: _Pool) -> _Connection:
        if self._open >= self._max_connections:
            self._evict_oldest_idle()
        self._open += 1  # counted while connecting; from then on as one of pool.live
        try:
            return await self._open_connection(pool)
        finally:
            self._open -= 1

    def _evict_oldest_idle(self) -> None:
        # every open connection not idle has a global slot, and so does the caller
        oldest = min(
            (pool.idle[0] for pool in self._pools.values() if pool.idle),
            key=lambda connection: connection.idle_since,
            default=None,
        )
        if oldest is not None:
            self._discard(oldest)

    async def _open_connection(self, pool: _Pool) -> _Connection:
        scheme, host, port = pool.origin
        loop = asyncio.get_running_loop()
        try:
            found = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as error:
            raise ConnectFailed(error, dns=True) from None
        addresses = found if self._allow_private else keep_public(host, found)
        tls = self._tls_context() if scheme == "https" else None
        failure: OSError = OSError(f"no address for {host}")
        for family, kind, proto, _, address in addresses:
            sock = socket.socket(family, kind, proto)
            try:
                sock.setblocking(False)
                await loop.sock_connect(sock, address)
                transport, connection = await loop.create_connection(
                    lambda: _Connection(self, pool),
                    sock=sock,
                    ssl=tls,
                    server_hostname=host if tls is not None else None,
                )
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
        loop = asyncio.get_running_loop()
        cutoff = loop.time() - KEEPALIVE_S
        for pool in list(self._pools.values()):
            for connection in [c for c in pool.idle if c.idle_since <= cutoff]:
                self._discard(connection)
        self._sweep = None
        if any(pool.idle for pool in self._pools.values()):
            self._sweep = loop.call_later(KEEPALIVE_S, self._expire)

    def close(self) -> None:
        """Close every idle connection now and every other one as its request ends."""
        self._closed = True
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        for pool in list(self._pools.values()):
            for connection in list(pool.idle):
                self._discard(connection)
