"""A loopback TCP proxy to a store's server (Redis, PostgreSQL) that can lose one reply after the
server has acted on its request.

That is the ambiguous outcome a crash or a dropped connection leaves a client with: the command ran
(a PostgreSQL transaction committed), the client never heard. Armed with a marker, the proxy cuts
the first connection whose reply carries it (`arm_reply`: a timer's callback URL, which among a
worker's commands only a claim's reply holds) or whose request carries it (`arm_request`: a timer's
id, which an ack names), passing on none of that reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import time


class _Link:
    """One client connection and its upstream one."""

    def __init__(self, client: asyncio.StreamWriter, upstream: asyncio.StreamWriter) -> None:
        self.writers = (client, upstream)
        self.cut_next_reply = False

    def close(self) -> None:
        for writer in self.writers:
            with contextlib.suppress(Exception):
                writer.transport.abort()


class ReplyDropper:
    """Forwards 127.0.0.1:`port` to a server on `upstream_port`; armed, it loses one reply."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = 0
        self.dropped = asyncio.Event()
        self.dropped_at_ms = 0.0
        self._in_reply: bytes | None = None
        self._cut_at: bytes | None = None
        self._in_request: bytes | None = None
        self._server: asyncio.Server | None = None
        self._pumps: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> ReplyDropper:
        self._server = await asyncio.start_server(self._connected, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.close()
        for pump in list(self._pumps):
            pump.cancel()
        await asyncio.gather(*self._pumps, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    def arm_reply(self, marker: bytes, *, cut_at: bytes | None = None) -> None:
        """Lose the next reply that holds `marker`, and its connection; with `cut_at`, pass
        that reply on and lose the next one on its connection that holds `cut_at` (a
        PostgreSQL claim's rows come back before its client sends ``COMMIT``)."""
        self._in_reply = marker
        self._cut_at = cut_at

    def arm_request(self, marker: bytes) -> None:
        """Pass on the next request that holds `marker`, then lose its reply and connection."""
        self._in_request = marker

    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            return
        link = _Link(writer, up_writer)
        for pump in (self._requests(reader, up_writer, link), self._replies(up_reader, link)):
            task = asyncio.create_task(pump)
            self._pumps.add(task)
            task.add_done_callback(self._pumps.discard)

    async def _requests(
        self, reader: asyncio.StreamReader, up_writer: asyncio.StreamWriter, link: _Link
    ) -> None:
        try:
            while chunk := await reader.read(65536):
                if self._in_request is not None and self._in_request in chunk:
                    self._in_request = None
                    link.cut_next_reply = True
                up_writer.write(chunk)
                await up_writer.drain()
        except OSError:
            pass
        finally:
            link.close()

    async def _replies(self, up_reader: asyncio.StreamReader, link: _Link) -> None:
        tail = b""
        cut_at: bytes | None = None
        try:
            while chunk := await up_reader.read(65536):
                marker = self._in_reply
                if cut_at is not None and cut_at in chunk:
                    link.cut_next_reply = True
                elif marker is not None and marker in tail + chunk:
                    self._in_reply = None
                    cut_at = self._cut_at
                    link.cut_next_reply = cut_at is None
                if link.cut_next_reply:
                    self.dropped_at_ms = time.time_ns() / 1e6
                    self.dropped.set()
                    return  # the finally cuts both sides: this reply never arrives
                tail = chunk[-len(marker) :] if marker else b""
                link.writers[0].write(chunk)
                await link.writers[0].drain()
        except OSError:
            pass
        finally:
            link.close()
