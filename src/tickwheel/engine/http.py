"""The HTTP callback target: one pooled aiohttp session fires every timer's callback.

aiohttp was chosen over httpx by measurement (bench/http_clients.py, docs/decisions.md #15).
Each attempt waits for a connection slot (per host, then global) before its timeout starts, so a
burst of due timers queues here instead of opening a connection each or timing out in the queue.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from email.utils import parsedate_to_datetime
from importlib import metadata

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver
from yarl import URL

from tickwheel.engine.guard import is_public_address
from tickwheel.engine.outcome import ACKED, Outcome, Verdict
from tickwheel.engine.signing import SIGNATURE_HEADER, sign
from tickwheel.errors import Closed, InvalidArgument
from tickwheel.model import Callback, Timer, truncate_error

READ_LIMIT_BYTES = 64 * 1024  # read no more of a response; a longer one costs its connection
ERROR_BODY_CHARS = 200
_RETRY_STATUSES = frozenset({408, 429})


class PrivateAddressRefused(OSError):
    """A callback host resolved only to addresses tickwheel may not call."""

    def __init__(self, host: str, address: str) -> None:
        super().__init__(f"refused: {host} resolves to private address {address}")


class PublicOnlyResolver(AbstractResolver):
    """Resolve names with aiohttp's resolver and keep only public addresses.

    The connector connects only to what this returns, so the address checked is the address
    connected to: a name that re-resolves to a private address between check and connect cannot
    slip through (DNS rebinding).
    """

    def __init__(self, inner: AbstractResolver | None = None) -> None:
        self._inner = inner if inner is not None else DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        """Return the public addresses of `host`; raise `PrivateAddressRefused` if none."""
        found = await self._inner.resolve(host, port, family)
        public = [result for result in found if is_public_address(result["host"])]
        if not public and found:
            raise PrivateAddressRefused(host, found[0]["host"])
        return public

    async def close(self) -> None:
        """Close the wrapped resolver."""
        await self._inner.close()


class _HostSlots:
    """One semaphore per host, dropped when no attempt holds or waits for it."""

    def __init__(self, per_host: int) -> None:
        self._per_host = per_host
        self._slots: dict[tuple[str, str, int], tuple[asyncio.Semaphore, list[int]]] = {}

    @asynccontextmanager
    async def hold(self, key: tuple[str, str, int]) -> AsyncIterator[None]:
        entry = self._slots.get(key)
        if entry is None:
            entry = self._slots[key] = (asyncio.Semaphore(self._per_host), [0])
        semaphore, users = entry
        users[0] += 1
        try:
            async with semaphore:
                yield
        finally:
            users[0] -= 1
            if not users[0]:
                del self._slots[key]


def _version() -> str:
    try:
        return metadata.version("tickwheel")
    except metadata.PackageNotFoundError:
        return "0"


def retry_after_s(value: str | None, now_s: float | None = None) -> float | None:
    """Parse a ``Retry-After`` header (delay seconds or HTTP-date) into seconds from now."""
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    now = time.time() if now_s is None else now_s
    return max(0.0, when.timestamp() - now)


def _one_line(body: bytes) -> str:
    return " ".join(body.decode("utf-8", "replace").split())[:ERROR_BODY_CHARS]


def _status_error(status: int, body: bytes) -> str:
    text = _one_line(body)
    return f"HTTP {status}: {text}" if text else f"HTTP {status}"


def _connection_error(error: aiohttp.ClientConnectorError) -> Outcome:
    cause = error.os_error
    if isinstance(cause, PrivateAddressRefused):
        return Outcome(Verdict.KILL, str(cause))
    where = f"{error.host}:{error.port}"
    if isinstance(error, aiohttp.ClientConnectorDNSError):
        return Outcome(Verdict.RETRY, truncate_error(f"DNS lookup failed: {where}: {cause}"))
    if isinstance(error, aiohttp.ClientConnectorCertificateError):
        return Outcome(Verdict.RETRY, truncate_error(f"TLS certificate error: {where}"))
    if cause.errno == errno.ECONNREFUSED:
        return Outcome(Verdict.RETRY, f"connection refused: {where}")
    reason = cause.strerror or type(cause).__name__
    return Outcome(Verdict.RETRY, truncate_error(f"connection failed: {where}: {reason}"))


async def _read_some(reply: aiohttp.ClientResponse) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while size < READ_LIMIT_BYTES:
        chunk = await reply.content.read(READ_LIMIT_BYTES - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


class HttpTarget:
    """Fire timers by making their HTTP callbacks (implements `tickwheel.engine.outcome.Target`).

    Args:
        signing_secret: sign every body (``Tickwheel-Signature``); never logged or recorded.
        allow_private_targets: let callbacks reach loopback, private and link-local addresses.
        max_connections: connections open at once, over all hosts.
        max_per_host: connections open at once to one scheme, host and port.
    """

    def __init__(
        self,
        *,
        signing_secret: str | None = None,
        allow_private_targets: bool = False,
        max_connections: int = 256,
        max_per_host: int = 64,
        user_agent: str | None = None,
    ) -> None:
        for name, value in (("max_connections", max_connections), ("max_per_host", max_per_host)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgument(name, f"must be an integer >= 1, got {value!r}")
        self._secret = signing_secret
        self._allow_private = allow_private_targets
        self._max_connections = max_connections
        self._max_per_host = max_per_host
        self._user_agent = user_agent or f"tickwheel/{_version()}"
        self._session: aiohttp.ClientSession | None = None
        self._slots: asyncio.Semaphore | None = None
        self._host_slots = _HostSlots(max_per_host)
        self._closed = False

    def _open(self) -> tuple[aiohttp.ClientSession, asyncio.Semaphore]:
        # built on first use: aiohttp wants a running loop
        if self._closed:
            raise Closed("HttpTarget is closed")
        if self._session is None or self._slots is None:
            connector = aiohttp.TCPConnector(
                limit=self._max_connections,
                limit_per_host=self._max_per_host,
                resolver=None if self._allow_private else PublicOnlyResolver(),
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                # one deadline per attempt is set in fire(); responses are read raw and bounded,
                # and no cookie one receiver sets is ever sent to another
                timeout=aiohttp.ClientTimeout(total=None),
                auto_decompress=False,
                cookie_jar=aiohttp.DummyCookieJar(),
                skip_auto_headers=("Content-Type",),
            )
            self._slots = asyncio.Semaphore(self._max_connections)
        return self._session, self._slots

    def _headers(
        self, timer: Timer, callback: Callback, attempt: int, body: bytes
    ) -> dict[str, str]:
        headers = {"User-Agent": self._user_agent, "Accept-Encoding": "identity"}
        headers.update(callback.headers)
        headers["Tickwheel-Timer-Id"] = timer.id
        headers["Tickwheel-Attempt"] = str(attempt)
        headers["Tickwheel-Due"] = str(timer.due_ms)
        headers["Idempotency-Key"] = timer.id
        if self._secret is not None:
            headers[SIGNATURE_HEADER] = sign(self._secret, body, int(time.time()))
        return headers

    def _refuse_literal(self, host: str) -> Outcome | None:
        # the connector does not resolve IP literals, so the resolver never sees them
        if self._allow_private:
            return None
        try:
            public = is_public_address(host)
        except ValueError:
            return None
        return None if public else Outcome(Verdict.KILL, f"refused: {host} is a private address")

    async def fire(self, timer: Timer, attempt: int) -> Outcome:
        """Make one attempt at `timer`'s callback and say how it went; never raises for it.

        Raises:
            ValueError: `timer` has no callback (it belongs to a Python consumer's queue).
            Closed: the target was closed.
        """
        callback = timer.callback
        if callback is None:
            raise ValueError(f"timer {timer.id} has no HTTP callback")
        session, slots = self._open()
        url = URL(callback.url, encoded=False)
        host = url.raw_host or ""
        refused = self._refuse_literal(host)
        if refused is not None:
            return refused
        body = b"" if callback.body is None else callback.body.encode()
        timeout_s = timer.retry.timeout_s
        key = (url.scheme, host, url.port or 0)
        try:
            async with (
                self._host_slots.hold(key),
                slots,
                asyncio.timeout(timeout_s),
                session.request(
                    callback.method,
                    url,
                    data=body if callback.body is not None else None,
                    headers=self._headers(timer, callback, attempt, body),
                    allow_redirects=False,
                ) as reply,
            ):
                return self._judge(reply, await _read_some(reply))
        except TimeoutError:
            return Outcome(Verdict.RETRY, f"timeout after {timeout_s} s")
        except aiohttp.ClientConnectorError as error:
            return _connection_error(error)
        except aiohttp.InvalidURL as error:
            # not str(error): it holds the whole URL, whose query may carry a token
            reason = error.description or "rejected"
            return Outcome(Verdict.KILL, truncate_error(f"invalid URL: host {host}: {reason}"))
        except aiohttp.ServerDisconnectedError:
            return Outcome(Verdict.RETRY, f"connection closed by {host} before a response")
        except aiohttp.ClientError as error:
            # the class names the failure; its text may quote the URL, which may carry a token
            return Outcome(Verdict.RETRY, truncate_error(f"{type(error).__name__}: {host}"))
        except OSError as error:
            reason = error.strerror or type(error).__name__
            return Outcome(Verdict.RETRY, truncate_error(f"connection failed: {host}: {reason}"))

    def _judge(self, reply: aiohttp.ClientResponse, content: bytes) -> Outcome:
        status = reply.status
        if 200 <= status < 300:
            return ACKED
        if status in _RETRY_STATUSES or 500 <= status < 600:
            wait_s = retry_after_s(reply.headers.get("Retry-After"))
            return Outcome(Verdict.RETRY, _status_error(status, content), wait_s)
        if 300 <= status < 400:
            # a redirect could point anywhere, including behind the firewall
            location = reply.headers.get("Location", "")[:ERROR_BODY_CHARS]
            return Outcome(Verdict.KILL, f"HTTP {status}: redirect to {location!r} not followed")
        return Outcome(Verdict.KILL, _status_error(status, content))

    async def close(self) -> None:
        """Close every connection; idempotent. Firing afterwards raises `Closed`."""
        self._closed = True
        session, self._session = self._session, None
        if session is not None:
            await session.close()
