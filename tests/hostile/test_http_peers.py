"""Receivers and networks that misbehave: each gets a prompt outcome, and costs only itself.

Hand-written servers on loopback (`RawServer` from the engine's HTTP tests, and a few here)
answer with endless headers or bodies, protocol switches, bytes after the response, heads that
trickle in, resets, or nothing at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

import pytest
from engine.support import until
from engine.test_http import RawServer, always, full_listener, ok, serve_ok_once, timer_for

from tickwheel.callbacks import httpclient, resolver
from tickwheel.callbacks.connection import HEAD_LIMIT_BYTES
from tickwheel.callbacks.http import HttpTarget
from tickwheel.callbacks.resolver import AddressInfo
from tickwheel.callbacks.settings import HttpSettings
from tickwheel.engine.outcome import ACKED, Outcome, Verdict


@pytest.fixture
async def target() -> AsyncIterator[HttpTarget]:
    target = HttpTarget(HttpSettings(allow_private_targets=True))
    yield target
    await target.close()


def invalid(reason: str) -> Outcome:
    return Outcome(Verdict.RETRY, f"invalid HTTP response from 127.0.0.1: {reason}")


# --- response heads -----------------------------------------------------------------------------


Behaviour = Callable[[asyncio.StreamWriter], Awaitable[None]]


class Scripted:
    """A server that reads a request's head, then runs `behaviour` on the connection."""

    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.connections = 0
        self.open = 0
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/hook?token=s3cret"

    async def __aenter__(self) -> Scripted:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open += 1
        try:
            await reader.readuntil(b"\r\n\r\n")
            await self.behaviour(writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self.open -= 1
            writer.close()


async def endless_head(writer: asyncio.StreamWriter) -> None:
    """A status line, then one header forever."""
    writer.write(b"HTTP/1.1 200 OK\r\nX-Padding: ")
    while True:
        writer.write(b"a" * 65536)
        await writer.drain()


async def test_an_endless_header_fails_promptly_and_costs_its_connection(
    target: HttpTarget,
) -> None:
    async with Scripted(endless_head) as server:
        started = time.monotonic()
        outcome = await target.fire(timer_for(server.url, timeout_s=10), 1)
        took_s = time.monotonic() - started
        await until(lambda: server.open == 0, timeout_s=2)
        # a second attempt needs a connection of its own: the first is gone
        assert await target.fire(timer_for(server.url, timeout_s=10), 2) == outcome
    assert outcome == invalid(f"headers over {HEAD_LIMIT_BYTES} bytes")
    assert took_s < 1
    assert server.connections == 2


@pytest.mark.parametrize(
    "head",
    [
        pytest.param(b"X-Big: %s\r\n" % (b"b" * HEAD_LIMIT_BYTES), id="one-big-header"),
        pytest.param(b"X-Many: 0123456789abcdef\r\n" * 2000, id="many-headers"),
    ],
)
async def test_a_head_over_the_limit_in_one_piece_fails(target: HttpTarget, head: bytes) -> None:
    reply = b"HTTP/1.1 200 OK\r\n" + head + b"Content-Length: 0\r\n\r\n"
    async with RawServer(always(reply)) as server:
        outcomes = [await target.fire(timer_for(server.url), attempt) for attempt in (1, 2)]
    assert outcomes == [invalid(f"headers over {HEAD_LIMIT_BYTES} bytes")] * 2
    assert server.connections == 2


async def test_a_head_just_under_the_limit_is_read(target: HttpTarget) -> None:
    head = b"X-Many: 0123456789abcdef\r\n" * (HEAD_LIMIT_BYTES // 30)
    reply = b"HTTP/1.1 200 OK\r\n" + head + b"Content-Length: 0\r\n\r\n"
    async with RawServer(always(reply)) as server:
        assert await target.fire(timer_for(server.url), 1) == ACKED
        assert await target.fire(timer_for(server.url), 2) == ACKED
    assert server.connections == 1


# --- responses that do not end where they should ------------------------------------------------


async def test_switching_protocols_is_a_bad_response_and_costs_its_connection(
    target: HttpTarget, caplog: pytest.LogCaptureFixture
) -> None:
    upgrade = (
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
        b"\x81\x05hello"
    )
    async with RawServer(always(upgrade)) as server:
        with caplog.at_level(logging.ERROR, logger="asyncio"):
            outcomes = [await target.fire(timer_for(server.url), attempt) for attempt in (1, 2)]
    assert outcomes == [invalid("the server switched protocols")] * 2
    assert server.connections == 2
    assert caplog.records == []  # no "Fatal error: protocol.data_received() call failed"


@pytest.mark.parametrize(
    "junk",
    [
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", id="a-second-head"),
        pytest.param(b"HTTP/1.1 200 OK\r\n", id="half-a-head"),
        pytest.param(b"H", id="one-byte"),
        pytest.param(b"junk", id="not-http"),
    ],
)
async def test_bytes_after_a_response_cost_the_connection_not_the_next_callback(
    target: HttpTarget, junk: bytes
) -> None:
    def answer(_connection: int, request: int) -> tuple[bytes, bool]:
        return (ok(b"") + junk if request == 1 else ok()), False

    async with RawServer(answer) as server:
        assert await target.fire(timer_for(server.url, timeout_s=5), 1) == ACKED
        started = time.monotonic()
        assert await target.fire(timer_for(server.url, timeout_s=5), 2) == ACKED
        took_s = time.monotonic() - started
    assert took_s < 1
    assert (server.connections, server.requests) == (2, 2)


# --- connections: shares, waits, connects -------------------------------------------------------


async def test_an_origin_that_never_answers_does_not_hold_up_a_healthy_one() -> None:
    target = HttpTarget(HttpSettings(allow_private_targets=True, max_connections=8))
    async with RawServer(always(None)) as stuck, RawServer(always(ok())) as healthy:
        stuck_timers = [timer_for(stuck.url, timer_id=f"s{i}", timeout_s=10) for i in range(20)]
        waiting = [asyncio.create_task(target.fire(t, 1)) for t in stuck_timers]
        await until(lambda: stuck.requests == 2, timeout_s=2)
        await asyncio.sleep(0.05)
        started = time.monotonic()
        outcome = await target.fire(timer_for(healthy.url, timeout_s=10), 1)
        took_s = time.monotonic() - started
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
        await target.close()
        await until(lambda: stuck.open == 0, timeout_s=2)
    assert outcome == ACKED
    assert took_s < 1  # the stuck ones would give up only after 10 s
    assert stuck.most_open == 2  # a quarter of the 8 connections


async def test_endpoints_holding_every_connection_leave_a_bounded_wait_not_a_stall(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(httpclient, "SLOT_WAIT_S", 0.3)
    target = HttpTarget(HttpSettings(allow_private_targets=True, max_connections=2))
    async with (
        RawServer(always(None)) as one,
        RawServer(always(None)) as two,
        RawServer(always(ok())) as healthy,
    ):
        waiting = [
            asyncio.create_task(target.fire(timer_for(server.url, timeout_s=10), 1))
            for server in (one, two)
        ]
        await until(lambda: one.requests == two.requests == 1, timeout_s=2)
        started = time.monotonic()
        outcome = await target.fire(timer_for(healthy.url, timeout_s=10), 1)
        took_s = time.monotonic() - started
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
        await target.close()
        await until(lambda: one.open == two.open == 0, timeout_s=2)
        port = healthy.port
    # never sent: handed back to the store, spending no attempt
    assert (outcome.verdict, outcome.error) == (
        Verdict.DEFER,
        f"no free connection to 127.0.0.1:{port} within 0.3 s",
    )
    assert took_s < 2


async def test_a_connect_gets_seconds_not_the_whole_timeout(
    monkeypatch: pytest.MonkeyPatch, target: HttpTarget
) -> None:
    monkeypatch.setattr(httpclient, "CONNECT_TIMEOUT_S", 0.2)
    with full_listener() as listener:
        port = listener.getsockname()[1]
        started = time.monotonic()
        outcome = await target.fire(timer_for(f"http://127.0.0.1:{port}/", timeout_s=5), 1)
        took_s = time.monotonic() - started
    assert outcome == Outcome(
        Verdict.RETRY, f"connection failed: 127.0.0.1:{port}: no connection in 0.2 s"
    )
    assert 0.35 < took_s < 0.9  # two tries of 0.2 s, and no SYN resent after 1 s


async def test_a_connect_that_times_out_is_tried_again_at_once_on_a_fresh_socket(
    monkeypatch: pytest.MonkeyPatch, target: HttpTarget
) -> None:
    # the queue has room again 0.1 s in: a fresh SYN gets through at 0.3 s, while the first
    # socket's own SYN would be resent only after 1 s
    monkeypatch.setattr(httpclient, "CONNECT_TIMEOUT_S", 0.3)
    with full_listener() as listener:
        port = listener.getsockname()[1]

        async def make_room() -> asyncio.Server:
            await asyncio.sleep(0.1)
            listener.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                while True:
                    listener.accept()[0].close()
            return await asyncio.start_server(serve_ok_once, sock=listener)

        room = asyncio.create_task(make_room())
        started = time.monotonic()
        outcome = await target.fire(timer_for(f"http://127.0.0.1:{port}/", timeout_s=5), 1)
        took_s = time.monotonic() - started
        server = await room
        server.close()
    assert outcome == ACKED
    assert took_s < 0.9


# --- name lookups -------------------------------------------------------------------------------


async def test_a_slow_name_server_holds_up_only_its_own_names(
    monkeypatch: pytest.MonkeyPatch, target: HttpTarget
) -> None:
    # every lookup of slow.test blocks a resolver thread for 1.5 s, as a name server that
    # does not answer; the loop's default executor has a handful of threads
    monkeypatch.setattr(resolver, "DNS_TIMEOUT_S", 0.3)
    loop = asyncio.get_running_loop()
    real = loop.getaddrinfo
    lookups: list[str] = []

    async def resolve(host: str, port: int | None, **kwargs: int) -> Sequence[AddressInfo]:
        lookups.append(host)
        if host == "slow.test":
            await loop.run_in_executor(None, time.sleep, 1.5)
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return await real(host, port, **kwargs)

    monkeypatch.setattr(loop, "getaddrinfo", resolve)
    async with RawServer(always(ok())) as healthy:
        # on 20 ports: 20 origins, each free to connect at once, all needing the one name
        slow = [timer_for(f"http://slow.test:{8000 + i}/", timer_id=f"s{i}") for i in range(20)]
        waiting = [asyncio.create_task(target.fire(t, 1)) for t in slow]
        await asyncio.sleep(0.05)
        started = time.monotonic()
        url = healthy.url.replace("127.0.0.1", "localhost")
        outcome = await target.fire(timer_for(url), 1)
        took_s = time.monotonic() - started
        slow_outcomes = await asyncio.gather(*waiting)
    assert outcome == ACKED
    assert took_s < 1
    assert slow_outcomes == [
        Outcome(Verdict.RETRY, f"DNS lookup failed: slow.test:{8000 + i}: no answer within 0.3 s")
        for i in range(20)
    ]
    assert lookups.count("slow.test") == 1


# --- bodies that never end, bytes that trickle, connections reset ---------------------------------


async def endless_chunked_body(writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"%x\r\n%s\r\n" % (65536, b"z" * 65536)
    while True:
        writer.write(chunk)
        await writer.drain()


async def trickled_head(writer: asyncio.StreamWriter) -> None:
    for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"s" * 10_000:
        writer.write(bytes([byte]))
        await writer.drain()
        await asyncio.sleep(0.05)


async def reset_mid_body(writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\npartial")
    await writer.drain()
    sock = writer.get_extra_info("socket")
    # linger 0: close sends a reset instead of a FIN
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def test_a_body_that_never_ends_is_cut_and_costs_its_connection(target: HttpTarget) -> None:
    async with Scripted(endless_chunked_body) as server:
        started = time.monotonic()
        outcome = await target.fire(timer_for(server.url, timeout_s=10), 1)
        took_s = time.monotonic() - started
        await until(lambda: server.open == 0, timeout_s=2)
    assert outcome == ACKED  # the status was read; the rest of the body is not worth reading
    assert took_s < 1


async def test_a_head_that_trickles_in_ends_at_the_attempts_timeout(target: HttpTarget) -> None:
    async with Scripted(trickled_head) as server:
        started = time.monotonic()
        outcome = await target.fire(timer_for(server.url, timeout_s=0.5), 1)
        took_s = time.monotonic() - started
        await until(lambda: server.open == 0, timeout_s=2)
    assert outcome == Outcome(Verdict.RETRY, "timeout after 0.5 s")
    assert took_s < 1.5


async def test_a_reset_in_the_middle_of_a_response_retries(target: HttpTarget) -> None:
    async with Scripted(reset_mid_body) as server:
        outcome = await target.fire(timer_for(server.url, timeout_s=5), 1)
        await until(lambda: server.open == 0, timeout_s=2)
    assert outcome.verdict is Verdict.RETRY
    assert outcome.error is not None
    assert "127.0.0.1" in outcome.error
