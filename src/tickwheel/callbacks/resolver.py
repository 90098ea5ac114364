"""Name lookups for the HTTP client: answers cached a while, one lookup per name at a time.

getaddrinfo runs in a thread and cannot be interrupted, and it reports no TTL. A slow name
server must hold up only the names it serves, and a burst of callbacks to one host must not
start a lookup each.
"""

from __future__ import annotations

import asyncio
import errno
import socket
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

DNS_CACHE_S = 30.0  # getaddrinfo reports no TTL: keep an answer this long
DNS_CACHE_ENTRIES = 1024
DNS_TIMEOUT_S = 5.0  # a resolver's first try (glibc waits 5 s for a server)

AddressInfo = tuple[int, int, int, str, tuple[Any, ...]]  # as getaddrinfo returns it
Resolve = Callable[[str], Awaitable[Sequence[AddressInfo]]]


class ConnectFailed(Exception):
    """No connection could be made to an origin; `cause` says why, `dns` if name lookup."""

    def __init__(self, cause: OSError, *, dns: bool = False) -> None:
        super().__init__(cause)
        self.cause = cause
        self.dns = dns


class InvalidHost(ValueError):
    """The host is not a name DNS can carry (an empty label, or one over 63 characters)."""


async def getaddrinfo(host: str) -> Sequence[AddressInfo]:
    """Resolve `host` for a TCP connection with the running loop (in its default executor)."""
    found = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    return cast(Sequence[AddressInfo], found)


class Resolver:
    """Name lookups: answers cached for `DNS_CACHE_S`, one lookup per name at a time, waits bounded.

    A lookup that outlives its waiters keeps running in its thread; later requests for the name
    wait on that same lookup, so a slow name server holds at most one resolver thread per name
    instead of all of them. Names are looked up without a port, so one lookup serves every port.
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
