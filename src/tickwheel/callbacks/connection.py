"""One keep-alive HTTP/1.1 connection: a prebuilt request written, its response parsed back.

An `asyncio.Protocol` fed to httptools' C parser: a callback needs a status, two headers and a
bounded body, and a general client's request path cost most of a worker's CPU per callback.
Receivers are not trusted to be well behaved: response heads and bodies are bounded, and bytes
nobody asked for cost the connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import NamedTuple, cast

import httptools

from tickwheel.callbacks.deadlines import Deadlines

READ_LIMIT_BYTES = 64 * 1024  # read no more of a response; a longer one costs its connection
# status line and headers of a response, over all its interim responses: httptools alone would
# buffer a header of any size (a 50 MB one cost 3 s of CPU); real heads are a few hundred bytes
HEAD_LIMIT_BYTES = 32 * 1024


class Disconnected(ConnectionError):
    """The server closed the connection before its response was complete."""

    def __init__(self, started: bool) -> None:
        super().__init__("during the response" if started else "before a response")
        self.started = started


class BadResponse(Exception):
    """The server's bytes are not an HTTP/1.x response tickwheel accepts; str says why if known."""


class Response(NamedTuple):
    """What a callback's outcome needs of a response: status, two headers, a bounded body (a
    named tuple: one is made per callback, at a fraction of a frozen dataclass's cost)."""

    status: int
    retry_after: str | None
    location: str | None
    body: bytes


class Connection(asyncio.Protocol):
    """One keep-alive connection: writes a request and parses its response into a future.

    `on_lost` is called once the connection is closed, by either side; `deadlines` times its
    requests out.
    """

    def __init__(
        self, on_lost: Callable[[Connection], None], deadlines: Deadlines[Connection]
    ) -> None:
        # made by its loop's protocol factory: asking for the running loop per request is a
        # system call (CPython compares the loop's process id with getpid())
        self.loop = asyncio.get_running_loop()
        self.idle_since = 0.0
        self.reusable = False
        self.lost = False
        self._on_lost = on_lost
        self._transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future[Response] | None = None
        self._deadlines = deadlines
        self._step: int | None = None  # the deadline step of the request in flight
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

    @property
    def closed(self) -> bool:
        return self.lost or self._transport is None or self._transport.is_closing()

    def send(self, request: bytes, deadline: float) -> asyncio.Future[Response]:
        """Write `request`; the future resolves to its response, or fails at loop time `deadline`
        (within `deadlines.STEP_S` after it)."""
        assert self._transport is not None
        self._waiter = waiter = self.loop.create_future()
        self._step = self._deadlines.add(self.loop, self, deadline)
        self.reusable = self._framed = self._headers_done = self._started = False
        self._answered = False
        self._status = self._size = self._head_size = self._head_read = 0
        self._retry_after = self._location = None
        self._chunks = []
        self._transport.write(request)
        return waiter

    def settle(self) -> None:
        """Stop the current request's deadline (its response is in, or it was given up)."""
        if self._step is not None:
            self._deadlines.discard(self, self._step)
            self._step = None

    def time_out(self) -> None:
        """Fail the request in flight: its deadline has passed (`Deadlines`)."""
        self._step = None
        self._fail(TimeoutError())

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop calls this only after create_connection has returned, so the client calls it
        # too (a second call changes nothing)
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
        self._on_lost(self)


def _head_too_long() -> BadResponse:
    return BadResponse(f"headers over {HEAD_LIMIT_BYTES} bytes")
