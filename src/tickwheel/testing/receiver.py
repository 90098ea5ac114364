"""A callback receiver on aiohttp: records every request, verifies signatures, replies as told.

Tests use it as the far end of HTTP callbacks, the engine benchmark runs it in its own process,
and ``tickwheel receiver`` runs it from the command line (`run_receiver`).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import TracebackType

from aiohttp import web

from tickwheel.callbacks.signing import verify_signature

Respond = Callable[["Received"], "Reply | Awaitable[Reply]"]


@dataclass(frozen=True, slots=True)
class Received:
    """One request as it arrived; `at_ms` is wall-clock epoch ms, header names are lower-case."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at_ms: float
    timer_id: str | None
    attempt: int | None
    due_ms: int | None
    signature_ok: bool | None  # None when the receiver has no secret


@dataclass(frozen=True, slots=True)
class Reply:
    """What the receiver answers to one request."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: str = ""


_OK = Reply()


def _int_or_none(value: str | None) -> int | None:
    try:
        return None if value is None else int(value)
    except ValueError:
        return None


class Receiver:
    """An HTTP server on `host`:`port` (0: any free port) that records what it receives.

    Args:
        signing_secret: verify ``Tickwheel-Signature`` with it (`Received.signature_ok`): v2
            against the method and the path and query as they came on the request line.
        accept_v1: also accept a header without v2 by its v1, which binds the body alone
            (`verify_signature`); for a migration from senders that sign v1 only.
        respond: called with each request, returns (or awaits to) the `Reply`; default 200.
        keep: append each request to `received`; a long-running receiver turns it off and
            counts only (`count`).
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        signing_secret: str | None = None,
        accept_v1: bool = False,
        respond: Respond | None = None,
        keep: bool = True,
    ) -> None:
        self.host = host
        self.port = port
        self.url = ""
        self.received: list[Received] = []
        self.count = 0
        self._secret = signing_secret
        self._accept_v1 = accept_v1
        self._respond = respond
        self._keep = keep
        self._arrived = asyncio.Event()
        self._runner: web.ServerRunner | None = None

    async def start(self) -> None:
        """Listen; `url` is set once this returns."""
        # a short shutdown timeout: a test's slow handler must not hold stop() for a minute
        server = web.Server(self._handle, handler_cancellation=True, access_log=None)
        runner = web.ServerRunner(server, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, backlog=1024, reuse_address=True)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        address = runner.addresses[0]
        self.port = address[1]
        host = f"[{address[0]}]" if ":" in address[0] else address[0]
        self.url = f"http://{host}:{self.port}"

    async def stop(self) -> None:
        """Stop listening and close connections; idempotent."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> Receiver:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def wait_for(self, count: int, timeout_s: float) -> None:
        """Return once `count` requests have arrived in all.

        Raises:
            TimeoutError: fewer arrived within `timeout_s`.
        """
        try:
            async with asyncio.timeout(timeout_s):
                while self.count < count:
                    self._arrived.clear()
                    await self._arrived.wait()
        except TimeoutError:
            raise TimeoutError(
                f"received {self.count} of {count} requests within {timeout_s} s"
            ) from None

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        at_ms = time.time_ns() / 1e6
        body = await request.read()
        headers: dict[str, str] = {}
        for name, value in request.headers.items():
            key = name.lower()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        received = Received(
            method=request.method,
            path=request.path_qs,
            headers=headers,
            body=body,
            at_ms=at_ms,
            timer_id=headers.get("tickwheel-timer-id"),
            attempt=_int_or_none(headers.get("tickwheel-attempt")),
            due_ms=_int_or_none(headers.get("tickwheel-due")),
            signature_ok=None
            if self._secret is None
            else verify_signature(
                self._secret,
                headers,
                body,
                method=request.method,
                target=request.raw_path,
                accept_v1=self._accept_v1,
            ),
        )
        if self._keep:
            self.received.append(received)
        self.count += 1
        self._arrived.set()
        reply = _OK
        if self._respond is not None:
            result = self._respond(received)
            reply = await result if inspect.isawaitable(result) else result
        return web.Response(status=reply.status, headers=reply.headers, text=reply.body)


def describe(received: Received) -> str:
    """Return one log line for `received`: method, path, timer, lateness, signature check."""
    parts = [received.method, received.path]
    if received.timer_id is not None:
        parts.append(f"timer={received.timer_id} attempt={received.attempt}")
    if received.due_ms is not None:
        parts.append(f"late_ms={received.at_ms - received.due_ms:.1f}")
    if received.signature_ok is not None:
        parts.append("signature=ok" if received.signature_ok else "signature=BAD")
    return " ".join(parts)


async def serve(
    host: str, port: int, signing_secret: str | None, quiet: bool, *, accept_v1: bool = False
) -> None:
    """Run a receiver until cancelled, printing its URL and, unless `quiet`, every request."""

    def respond(received: Received) -> Reply:
        print(describe(received), flush=True)
        return _OK

    receiver = Receiver(
        host=host,
        port=port,
        signing_secret=signing_secret,
        accept_v1=accept_v1,
        respond=None if quiet else respond,
        keep=False,
    )
    async with receiver:
        print(f"receiving on {receiver.url}", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            sys.stdout.flush()


def run_receiver(
    host: str = "127.0.0.1",
    port: int = 9000,
    signing_secret: str | None = None,
    quiet: bool = False,
    *,
    accept_v1: bool = False,
) -> None:
    """Run a receiver in the foreground until interrupted (``tickwheel receiver``).

    Uses uvloop when it is installed: the receiver is the far end of benchmarks and must not be
    their bottleneck.
    """
    try:
        import uvloop

        runner: Callable[..., None] = uvloop.run
    except ImportError:
        runner = asyncio.run
    with contextlib.suppress(KeyboardInterrupt):
        runner(serve(host, port, signing_secret, quiet, accept_v1=accept_v1))
