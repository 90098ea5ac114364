"""A small HTTP/1.1 client for callbacks: keep-alive pools on `asyncio.Protocol` + httptools.

aiohttp's general request path cost ~95 µs of CPU per callback, most of a worker's budget; a
callback needs only a prebuilt request written to a pooled connection and a status, two headers
and a bounded body parsed back by httptools' C parser (docs/decisions.md #15).

Receivers are not trusted to be well behaved: response heads and bodies are bounded, a connect
gets a few seconds, one origin gets a share of the connections that starts small and grows only
while it answers promptly, and a slow name server holds up only the names it serves.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import ssl
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import httptools

from tickwheel.engine.guard import is_public_address

READ_LIMIT_BYTES = 64 * 1024  # read no more of a response; a longer one costs its connection
# status line and headers of a response, over all its interim responses: httptools alone would
# buffer a header of any size (a 50 MB one cost 3 s of CPU); real heads are a few hundred bytes
HEAD_LIMIT_BYTES = 32 * 1024
KEEPALIVE_S = 15.0  # an idle pooled connection, or an unused origin's state, is dropped after this
# one connect (TCP and TLS): a SYN lost once is resent after 1 s and still fits; a listener whose
# queue is full drops it again, and a fresh socket tried at once does better than waiting
CONNECT_TIMEOUT_S = 3.0
SLOT_WAIT_S = 5.0  # longest wait for a connection slot (or the request's timeout if shorter)
# an origin starts with this many requests at once and earns more with prompt answers
INITIAL_PER_HOST = 4
# connections to one origin opening at once (until their first answer): a receiver that has not
# accept()ed them yet holds them in a listen queue that may be as short as Python's 5; past it
# the kernel drops handshakes, or with SYN cookies the request itself, and the client waits
# out retransmissions of 1 s, 3 s, 7 s ... for a connection it believes open
OPENING_PER_HOST = 4
# prompt: within twice the origin's fastest response so far, plus this
PROMPT_MARGIN_S = 0.25
DNS_CACHE_S = 30.0  # getaddrinfo reports no TTL: keep an answer this long
DNS_CACHE_ENTRIES = 1024
DNS_TIMEOUT_S = 5.0  # a resolver's first try (glibc waits 5 s for a server)

Origin = tuple[str, str, int]  # scheme, host (IDNA, IPv6 without brackets), port
AddressInfo = tuple[int, int, int, str, tuple[Any, ...]]  # as getaddrinfo returns it
Resolve = Callable[[str], Awaitable[Sequence[AddressInfo]]]


class PrivateAddressRefused(OSError):
    """A callback host resolved only to addresses tickwheel may not call."""

    def __init__(self, host: str, address: str) -> None:
        super().__init__(f"refused: {host} resolves to private address {address}")


class InvalidHost(ValueError):
    """The host is not a name DNS can carry (an empty label, or one over 63 characters)."""


class ConnectFailed(Exception):
    """No connection could be made to an origin; `cause` says why, `dns` if name lookup."""

    def __init__(self, cause: OSError, *, dns: bool = False) -> None:
        super().__init__(cause)
        self.cause = cause
        self.dns = dns


class PoolTimeout(Exception):
    """No connection slot for the origin came free within `waited_s`."""

    def __init__(self, waited_s: float) -> None:
        super().__init__(f"no free connection within {waited_s:g} s")
        self.waited_s = waited_s


class Disconnected(ConnectionError):
    """The server closed the connection before its response was complete."""

    def __init__(self, started: bool) -> None:
        super().__init__("during the response" if started else "before a response")
        self.started = started


class BadResponse(Exception):
    """The server's bytes are not an HTTP/1.x response tickwheel accepts; str says why if known."""


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


async def getaddrinfo(host: str) -> Sequence[AddressInfo]:
    """Resolve `host` for a TCP connection with the running loop (in its default executor)."""
    found = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    return cast(Sequence[AddressInfo], found)


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
        self._answered = False  # the response is complete: any further message is out of step
        self._head_size = 0  # status text, header names and values
        self._head_read = 0  # bytes of reads that ended inside a head
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
        self._answered = False
        self._status = self._size = self._head_size = self._head_read = 0
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
        except httptools.HttpParserUpgrade:
            self._fail(BadResponse("the server switched protocols"))
        except httptools.HttpParserError as error:
            # a limit our callbacks enforce comes back as the context of httptools' error
            cause = error.__context__
            self._fail(cause if isinstance(cause, BadResponse) else BadResponse())
        else:
            if not self._headers_done:
                # the head goes on past this read: httptools buffers a header until it ends,
                # so its size is known only here, read by read
                self._head_read += len(data)
                if self._head_read > HEAD_LIMIT_BYTES:
                    self._fail(_head_too_long())

    def on_message_begin(self) -> None:
        if self._answered:  # bytes after the response: not an answer to anything we sent
            raise BadResponse("bytes after the response")

    def on_status(self, status: bytes) -> None:
        self._head_size += len(status)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_size += len(name) + len(value)
        if self._head_size > HEAD_LIMIT_BYTES:
            raise _head_too_long()
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
        self._answered = True
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


def _head_too_long() -> BadResponse:
    return BadResponse(f"headers over {HEAD_LIMIT_BYTES} bytes")


def _end_wait(waiter: asyncio.Future[bool]) -> None:
    if not waiter.done():
        waiter.set_result(False)


class _Slots:
    """A counting semaphore that hands a freed slot straight to its first waiter.

    `asyncio.Semaphore` wakes waiters to compete for the count again; direct hand-over costs a
    future per wait and nothing when a slot is free. `free` goes below zero when the count is
    cut while slots are taken: slots given back then pay off the debt first.
    """

    def __init__(self, count: int) -> None:
        self.free = count
        self._waiters: deque[asyncio.Future[bool]] = deque()

    async def take(self, deadline: float) -> bool:
        """Wait for a slot until loop time `deadline`; True if it is now the caller's.

        Only for when `free` is not positive: the caller takes a free slot itself (see `request`).
        """
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[bool] = loop.create_future()
        self._waiters.append(waiter)
        timer = loop.call_at(deadline, _end_wait, waiter)
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled() and waiter.result():
                self.give()  # handed over just as we were cancelled: pass it on
            raise
        finally:
            timer.cancel()

    def give(self) -> None:
        """Free a slot: the first waiter still waiting gets it, unless the count was cut."""
        if self.free >= 0:
            waiters = self._waiters
            while waiters:
                waiter = waiters.popleft()
                if not waiter.done():
                    waiter.set_result(True)
                    return
        self.free += 1


class _Pool:
    """One origin's connections, its slots and how many of them it has earned so far.

    The allowed concurrency (`limit`) grows by one for each prompt answer that came back while
    every slot was taken, up to `most`, and halves (to no less than one) on a timeout, a failed
    connect, or a 429 or 503 answer: slow start, as TCP opens its window. At most
    `OPENING_PER_HOST` connections open at once, so a slot more is earned only while one of
    those is free: a server that closes every connection keeps a limit it can use.
    """

    def __init__(self, origin: Origin, most: int) -> None:
        self.origin = origin
        self.idle: list[_Connection] = []  # most recently used last
        self.live: set[_Connection] = set()
        self.users = 0
        self.last_used = 0.0
        self.most = most
        self.limit = min(INITIAL_PER_HOST, most)
        self.fastest_s = float("inf")
        self.slots = _Slots(self.limit)
        self.opening = _Slots(OPENING_PER_HOST)

    def take_idle(self) -> _Connection | None:
        idle = self.idle
        while idle:
            connection = idle.pop()
            if not connection.closed:
                return connection
        return None

    def answered(self, status: int, took_s: float) -> None:
        """Learn from a response that took `took_s`; call while still holding its slot."""
        if status in (429, 503):
            self.shrink()
            return
        prompt = took_s <= 2 * self.fastest_s + PROMPT_MARGIN_S
        if took_s < self.fastest_s:
            self.fastest_s = took_s
        # earned only while every slot is taken and one more could open a connection now
        busy = self.slots.free <= 0 and self.opening.free > 0
        if prompt and status < 500 and busy and self.limit < self.most:
            self.limit += 1
            self.slots.give()

    def shrink(self) -> None:
        cut = self.limit - max(1, self.limit // 2)
        self.limit -= cut
        self.slots.free -= cut


class _Resolver:
    """Name lookups: answers cached for `DNS_CACHE_S`, one lookup per name at a time, waits bounded.

    A lookup that outlives its waiters keeps running in its thread (getaddrinfo cannot be
    interrupted); later requests for the name wait on that same lookup, so a slow name server
    holds at most one resolver thread per name instead of all of them. Names are looked up
    without a port, so one lookup serves every port.
    """

    def __init__(self, resolve: Resolve) -> None:
        self._resolve = resolve
        self._answers: dict[str, tuple[float, Sequence[AddressInfo]]] = {}
        self._lookups: dict[str, asyncio.Future[Sequence[AddressInfo]]] = {}

    async def resolve(self, host: str, port: int, deadline: float) -> list[AddressInfo]:
        """Return `host`'s addresses with `port`, waiting until loop time `deadline` at most.

        Raises:
            ConnectFailed: (with `dns`) the lookup failed or took `DNS_TIMEOUT_S`.
            TimeoutError: `deadline` came first.
            InvalidHost: `host` cannot be put into a DNS query.
        """
        now = asyncio.get_running_loop().time()
        cached = self._answers.get(host)
        if cached is not None and cached[0] > now:
            found = cached[1]
        else:
            found = await self._wait(host, now, deadline)
        return [(*info[:4], (info[4][0], port, *info[4][2:])) for info in found]

    async def _wait(self, host: str, now: float, deadline: float) -> Sequence[AddressInfo]:
        lookup = self._lookups.get(host)
        if lookup is None:
            lookup = self._lookups[host] = asyncio.ensure_future(self._resolve(host))
            lookup.add_done_callback(lambda done: self._looked_up(host, done))
        give_up = now + DNS_TIMEOUT_S
        try:
            async with asyncio.timeout_at(min(deadline, give_up)):
                return await asyncio.shield(lookup)
        except TimeoutError:
            if deadline <= give_up:
                raise  # the request's own timeout
            late = TimeoutError(errno.ETIMEDOUT, f"no answer within {DNS_TIMEOUT_S:g} s")
            raise ConnectFailed(late, dns=True) from None
        except socket.gaierror as error:
            raise ConnectFailed(error, dns=True) from None
        except UnicodeError:
            raise InvalidHost(host) from None

    def _looked_up(self, host: str, lookup: asyncio.Future[Sequence[AddressInfo]]) -> None:
        del self._lookups[host]
        if lookup.cancelled() or lookup.exception() is not None:  # retrieved: nobody may wait
            return
        answers = self._answers
        answers.pop(host, None)
        if len(answers) >= DNS_CACHE_ENTRIES:
            del answers[next(iter(answers))]  # the oldest answer
        answers[host] = (asyncio.get_running_loop().time() + DNS_CACHE_S, lookup.result())


class HttpClient:
    """Keep-alive HTTP/1.1 connections per origin, bounded globally and per origin.

    A request takes a slot of its origin, then a global one, waiting for them at most its
    timeout or `SLOT_WAIT_S`, whichever is shorter; then its timeout starts, covering DNS,
    connect, TLS, writing and reading the response. One origin may hold `max_per_host` slots
    (by default a quarter of `max_connections`), so endpoints that never answer cannot hold
    every connection; it starts with `INITIAL_PER_HOST` of them and earns the rest (`_Pool`),
    and opens at most `OPENING_PER_HOST` at a time (until each has had its first answer).
    A connect gets `CONNECT_TIMEOUT_S` and, if it times out or is refused or reset, one more
    try at once on a fresh socket. Names are resolved through a cache (`_Resolver`).

    Unless `allow_private`, a name resolves to its public addresses only and the socket connects
    to one of those, so the address checked is the address connected to (decision 17). Idle
    connections count against `max_connections`; the oldest idle one of any origin is closed to
    make room. `resolve` replaces the loop's getaddrinfo (tests use it to slow lookups down).
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
        self._pools: dict[Origin, _Pool] = {}
        self._slots = _Slots(max_connections)
        self._open = 0  # live and connecting, over all pools
        self._resolver = _Resolver(resolve)
        self._tls: ssl.SSLContext | None = None
        self._sweep: asyncio.TimerHandle | None = None
        self._closed = False

    def concurrency(self, origin: Origin) -> int:
        """Return how many requests to `origin` may run at once now."""
        pool = self._pools.get(origin)
        return min(INITIAL_PER_HOST, self._max_per_host) if pool is None else pool.limit

    async def request(self, origin: Origin, request: bytes, timeout_s: float) -> Response:
        """Send the prebuilt `request` to `origin` and return its response.

        A reused connection that the server had closed while idle fails before any response
        byte; the request then goes once more on a fresh connection (delivery is at least once).

        Raises:
            PoolTimeout: no connection slot came free in time.
            TimeoutError: no complete response within `timeout_s` of getting the slots.
            ConnectFailed, PrivateAddressRefused: no connection could be made.
            InvalidHost: the host name cannot be looked up.
            Disconnected: the server closed the connection before a complete response.
            BadResponse: the response could not be parsed, or broke a limit.
        """
        loop = asyncio.get_running_loop()
        pool = self._pools.get(origin)
        if pool is None:
            pool = self._pools[origin] = _Pool(origin, self._max_per_host)
        pool.users += 1
        try:
            wait_until = 0.0
            if pool.slots.free > 0:  # a free slot is taken here, without a coroutine per slot
                pool.slots.free -= 1
            else:
                wait_until = loop.time() + min(timeout_s, SLOT_WAIT_S)
                if not await pool.slots.take(wait_until):
                    raise PoolTimeout(min(timeout_s, SLOT_WAIT_S))
            try:
                if self._slots.free > 0:
                    self._slots.free -= 1
                else:
                    wait_until = wait_until or loop.time() + min(timeout_s, SLOT_WAIT_S)
                    if not await self._slots.take(wait_until):
                        raise PoolTimeout(min(timeout_s, SLOT_WAIT_S))
                try:
                    started = loop.time()
                    response = await self._send(pool, request, started + timeout_s)
                    pool.answered(response.status, loop.time() - started)
                    return response
                except TimeoutError:
                    pool.shrink()
                    raise
                except ConnectFailed as error:
                    if not error.dns:  # a name server's trouble says nothing of the origin's
                        pool.shrink()
                    raise
                finally:
                    self._slots.give()
            finally:
                pool.slots.give()
        finally:
            pool.users -= 1
            pool.last_used = loop.time()
            if self._sweep is None and not self._closed:
                self._sweep = loop.call_later(KEEPALIVE_S, self._expire)

    async def _send(self, pool: _Pool, request: bytes, deadline: float) -> Response:
        connection = pool.take_idle()
        if connection is not None:
            try:
                return await self._exchange(connection, request, deadline)
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
                    return await self._exchange(connection, request, deadline)
                except Disconnected as error:
                    if error.started:
                        raise
            connection = await self._connect(pool, deadline)
            return await self._exchange(connection, request, deadline)
        finally:
            opening.give()

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
        connection.idle_since = asyncio.get_running_loop().time()
        connection.pool.idle.append(connection)

    def forget(self, connection: _Connection) -> None:
        """Stop counting `connection` (closed by either side); idempotent."""
        pool = connection.pool
        if connection in pool.live:
            pool.live.remove(connection)
            self._open -= 1
            if connection in pool.idle:
                pool.idle.remove(connection)

    def _discard(self, connection: _Connection) -> None:
        self.forget(connection)
        connection.close()

    async def _connect(self, pool: _Pool, deadline: float) -> _Connection:
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
            (pool.idle[0] for pool in self._pools.values() if pool.idle),
            key=lambda connection: connection.idle_since,
            default=None,
        )
        if oldest is not None:
            self._discard(oldest)

    async def _open_connection(
        self, pool: _Pool, addresses: Sequence[AddressInfo], deadline: float
    ) -> _Connection:
        scheme, host, _ = pool.origin
        loop = asyncio.get_running_loop()
        tls = self._tls_context() if scheme == "https" else None
        failure: OSError = OSError(f"no address for {host}")
        for family, kind, proto, _, address in addresses:
            give_up = min(deadline, loop.time() + CONNECT_TIMEOUT_S)
            sock = socket.socket(family, kind, proto)
            try:
                sock.setblocking(False)
                async with asyncio.timeout_at(give_up):
                    await loop.sock_connect(sock, address)
                    transport, connection = await loop.create_connection(
                        lambda: _Connection(self, pool),
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
                self._discard(connection)
            if not (pool.users or pool.live) and pool.last_used <= cutoff:
                del self._pools[origin]
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
                self._discard(connection)


def default_per_host(max_connections: int) -> int:
    """Return the default `max_per_host`: a quarter of `max_connections`, at least one."""
    return max(1, max_connections // 4)
