"""The HTTP callback target: every timer's callback goes through one pooled `HttpClient`.

The client is our own (`httpclient.py`) rather than aiohttp or httpx: measured with
bench/http_clients.py, their general request paths cost most of a worker's CPU per callback.
Each attempt waits for a connection slot (per host, then global) before its timeout starts, so
a burst of due timers queues here instead of opening a connection each; the wait is bounded
too (`SLOT_WAIT_S`), so callbacks to a healthy receiver do not sit behind ones to endpoints
that never answer.
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import random
import ssl
import time
from collections.abc import Callable, Coroutine
from email.utils import parsedate_to_datetime
from importlib import metadata
from typing import Any

from tickwheel.callbacks.connection import BadResponse, Disconnected, Response
from tickwheel.callbacks.guard import PrivateAddressRefused, is_public_address
from tickwheel.callbacks.httpclient import HttpClient, NotSent
from tickwheel.callbacks.pool import Origin, PoolTimeout
from tickwheel.callbacks.resolver import ConnectFailed, InvalidHost
from tickwheel.callbacks.settings import HttpSettings
from tickwheel.callbacks.signing import SIGNATURE_HEADER, sign
from tickwheel.engine.outcome import NO_FREE_CONNECTION, NotFired, Outcome, Verdict
from tickwheel.engine.tracing import spans
from tickwheel.errors import Closed
from tickwheel.model import Callback, Timer, occurrence_of, replace_controls, truncate_error
from tickwheel.stores.attempt_record import ATTEMPT_BODY_BYTES
from tickwheel.tracecontext import attempt_traceparent
from tickwheel.urls import CallbackUrl, InvalidUrl

__all__ = ["ERROR_BODY_CHARS", "MAX_RETRY_AFTER_S", "HttpTarget", "retry_after_s"]

ERROR_BODY_CHARS = 200
# an occurrence of a schedule says which, and its nominal time (epoch ms, before any jitter);
# both come from the timer id, which a signature covers
SCHEDULE_ID_HEADER = "Tickwheel-Schedule-Id"
OCCURRENCE_HEADER = "Tickwheel-Occurrence"
_RETRY_STATUSES = frozenset({408, 429})
_HOLD_STATUSES = frozenset({429, 503})  # their Retry-After speaks for the whole host
MAX_RETRY_AFTER_S = 600.0
"""Longest `Retry-After` a host is held for; a longer one holds it this long."""
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})  # send Content-Length: 0 without a body
_TRACE_HEADERS = frozenset({"traceparent", "tracestate"})  # the timer's trace context wins
NO_SLOT_DEFER_S = 1.0
"""A callback that found no free connection goes back to the store due this much later (with
up to as much again of jitter), spending no attempt: it was never sent."""


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
        return float(value) if len(value) <= 12 else None
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


def _failed(error: str, error_class: str) -> Outcome:
    """A retry for a failure with no HTTP status."""
    return Outcome(Verdict.RETRY, error, error_class=error_class)


def _connection_error(error: ConnectFailed, origin: Origin) -> Outcome:
    cause = error.cause
    where = f"{origin[1]}:{origin[2]}"
    if error.dns:
        reason = cause.strerror or str(cause)
        return _failed(truncate_error(f"DNS lookup failed: {where}: {reason}"), "dns")
    if isinstance(cause, ssl.SSLCertVerificationError):
        return _failed(truncate_error(f"TLS certificate error: {where}"), "tls")
    if cause.errno == errno.ECONNREFUSED:
        return _failed(f"connection refused: {where}", "connection_refused")
    reason = cause.strerror or type(cause).__name__
    return _failed(truncate_error(f"connection failed: {where}: {reason}"), "connect")


@functools.lru_cache(maxsize=1024)
def _public_ip(address: str) -> bool:
    """`is_public_address`, kept for the IP literals called lately: parsing and judging one
    costs about 3 µs, every callback to it."""
    return is_public_address(address)


def _body_head(body: bytes) -> str | None:
    """The first KiB of a response body as an attempt keeps it: control characters replaced
    (a receiver chose it, and an operator's terminal shows it)."""
    if not body:
        return None
    text = body[:ATTEMPT_BODY_BYTES].decode("utf-8", "replace")
    return replace_controls(text, keep_lines=True)


def _printable(outcome: Outcome) -> Outcome:
    """`outcome` with its error fit to store: a receiver chose the body, the reason and the
    Location, and an operator's terminal shows them through `tickwheel get`, so they are
    stored without control characters."""
    error = outcome.error
    if error is None or error.isprintable():
        return outcome
    return dataclasses.replace(outcome, error=replace_controls(error))


_ACKED: dict[int, Outcome] = {}
"""The outcome of each 2xx status answered without a body, made once: outcomes are frozen."""


def _judge(response: Response) -> Outcome:
    status = response.status
    if 200 <= status < 300:
        if not response.body:
            acked = _ACKED.get(status)
            if acked is None:
                acked = _ACKED[status] = Outcome(Verdict.ACK, status=status)
            return acked
        return Outcome(Verdict.ACK, status=status, body=_body_head(response.body))
    body = _body_head(response.body)
    if status in _RETRY_STATUSES or 500 <= status < 600:
        wait_s = retry_after_s(response.retry_after)
        hold_s = None
        if wait_s is not None and status in _HOLD_STATUSES:
            hold_s = min(wait_s, MAX_RETRY_AFTER_S)
        error = _status_error(status, response.body)
        return Outcome(Verdict.RETRY, error, wait_s, hold_s, status, None, body)
    if 300 <= status < 400:
        # a redirect could point anywhere, including behind the firewall
        location = (response.location or "")[:ERROR_BODY_CHARS]
        error = f"HTTP {status}: redirect to {location!r} not followed"
        return Outcome(Verdict.KILL, error, status=status, body=body)
    return Outcome(Verdict.KILL, _status_error(status, response.body), status=status, body=body)


class HttpTarget:
    """Fire timers by making their HTTP callbacks (implements `tickwheel.engine.outcome.Target`).

    `settings` say how (`HttpSettings`; its defaults when None). Callers not yet building the
    settings may pass their fields as keywords instead.
    """

    def __init__(self, settings: HttpSettings | None = None) -> None:
        settings = HttpSettings() if settings is None else settings
        self.settings = settings
        secret = settings.signing_secret
        self._key = None if secret is None else secret.encode()
        self._allow_private = settings.allow_private_targets
        self._agent_line = f"User-Agent: {settings.user_agent or f'tickwheel/{_version()}'}\r\n"
        self._client = HttpClient(
            allow_private=settings.allow_private_targets,
            max_connections=settings.max_connections,
            max_per_host=settings.max_per_host,
        )
        self._closed = False
        self._spans = spans()

    def _request(
        self,
        timer: Timer,
        callback: Callback,
        url: CallbackUrl,
        attempt: int,
        trace: tuple[str, str | None] | None = None,
    ) -> bytes:
        """Return the whole request: the timer's method, headers and body plus tickwheel's,
        and `trace`'s ``traceparent`` and ``tracestate`` when it has one."""
        body = b"" if callback.body is None else callback.body.encode()
        lines = [f"{callback.method} {url.target} HTTP/1.1\r\nHost: {url.host_header}\r\n"]
        own = callback.headers
        names = {name.lower() for name in own} if own else ()
        if "user-agent" not in names:
            lines.append(self._agent_line)
        if "accept-encoding" not in names:
            lines.append("Accept-Encoding: identity\r\n")
        if trace is None:
            lines.extend(f"{name}: {value}\r\n" for name, value in own.items())
        else:
            lines.extend(
                f"{name}: {value}\r\n"
                for name, value in own.items()
                if name.lower() not in _TRACE_HEADERS
            )
            lines.append(f"traceparent: {trace[0]}\r\n")
            if trace[1] is not None:
                lines.append(f"tracestate: {trace[1]}\r\n")
        lines.append(
            f"Tickwheel-Timer-Id: {timer.id}\r\nTickwheel-Attempt: {attempt}\r\n"
            f"Tickwheel-Due: {timer.due_ms}\r\nIdempotency-Key: {timer.id}\r\n"
        )
        occurrence = occurrence_of(timer.id)
        if occurrence is not None:
            lines.append(
                f"{SCHEDULE_ID_HEADER}: {occurrence[0]}\r\n{OCCURRENCE_HEADER}: {occurrence[1]}\r\n"
            )
        if self._key is not None:
            signature = sign(
                self._key,
                body,
                int(time.time()),
                method=callback.method,
                target=url.target,
                timer_id=timer.id,
                attempt=attempt,
            )
            lines.append(f"{SIGNATURE_HEADER}: {signature}\r\n")
        if callback.body is not None or callback.method in _BODY_METHODS:
            lines.append(f"Content-Length: {len(body)}\r\n")
        lines.append("\r\n")
        return "".join(lines).encode() + body

    def fire(self, timer: Timer, attempt: int) -> Coroutine[Any, Any, Outcome]:
        """Make one attempt at `timer`'s callback and say how it went; never raises for it.

        Whatever goes wrong in the attempt becomes an outcome, even an error nobody foresaw
        (a retry naming its type only: its text may quote the URL), so every timer is settled.

        Raises:
            ValueError: `timer` has no callback (it belongs to a Python consumer's queue).
            Closed: the target was closed.
        """
        # the attempt's own coroutine, returned: one coroutine less per callback
        return self._fire(timer, attempt, None)

    def fire_guarded(
        self, timer: Timer, attempt: int, go: Callable[[], bool]
    ) -> Coroutine[Any, Any, Outcome]:
        """As `fire`, asking `go` on a ready connection right before the request is written.

        Raises:
            NotFired: `go` said no; nothing was sent.
        """
        return self._fire(timer, attempt, go)

    def _fire(
        self, timer: Timer, attempt: int, go: Callable[[], bool] | None
    ) -> Coroutine[Any, Any, Outcome]:
        """The attempt's coroutine. On the common path (a URL it may call, no span) the request
        is built here and `_send`'s own coroutine returned: one coroutine less per callback."""
        callback = timer.callback
        if callback is not None and not self._closed:
            spans = self._spans
            try:
                url = callback.parsed_url
            except InvalidUrl:
                return self._fire_checked(timer, attempt, go)
            traced = spans is not None and spans.configured()
            if not traced and not self._refused(url):
                request = self._request(timer, callback, url, attempt, self._trace(timer))
                return self._send(timer, url, request, go)
        return self._fire_checked(timer, attempt, go)

    async def _fire_checked(
        self, timer: Timer, attempt: int, go: Callable[[], bool] | None
    ) -> Outcome:
        """The attempt, every check on the way said by an outcome or raised."""
        callback = timer.callback
        if callback is None:
            raise ValueError(f"timer {timer.id} has no HTTP callback")
        if self._closed:
            raise Closed("HttpTarget is closed")
        try:
            url = callback.parsed_url
        except InvalidUrl as error:
            # not the error's text: it may quote the URL, whose query may carry a token
            error_text = f"invalid URL: host {error.host or '?'}"
            return _printable(Outcome(Verdict.KILL, error_text, error_class="invalid_url"))
        if self._refused(url):
            error_text = f"refused: {url.host} is a private address"
            return _printable(Outcome(Verdict.KILL, error_text, error_class="private_address"))
        if self._spans is not None and self._spans.configured():
            return await self._traced(timer, callback, url, attempt, go)
        request = self._request(timer, callback, url, attempt, self._trace(timer))
        return await self._send(timer, url, request, go)

    def _refused(self, url: CallbackUrl) -> bool:
        """Whether `url` names a private IP address this target may not call (a name is
        judged by what it resolves to, when connecting)."""
        return url.is_ip and not self._allow_private and not _public_ip(url.host)

    @staticmethod
    def _trace(timer: Timer) -> tuple[str, str | None] | None:
        """The trace context an attempt sends without OpenTelemetry: the timer's trace, a
        fresh span id for the attempt."""
        if timer.trace_parent is None:
            return None
        return attempt_traceparent(timer.trace_parent), timer.trace_state

    async def _traced(
        self,
        timer: Timer,
        callback: Callback,
        url: CallbackUrl,
        attempt: int,
        go: Callable[[], bool] | None,
    ) -> Outcome:
        """Make the attempt inside an HTTP client span (OpenTelemetry's semantic conventions),
        the child of the timer's trace context; the request carries the span's own."""
        spans = self._spans
        assert spans is not None
        span = spans.start(
            callback.method,
            timer.trace_parent,
            timer.trace_state,
            client=True,
            attributes={
                "http.request.method": callback.method,
                # no query: it may carry a token, as an error message never quotes it
                "url.full": f"{url.scheme}://{url.host_header}{url.target.partition('?')[0]}",
                "server.address": url.host,
                "server.port": url.port,
                "tickwheel.timer.id": timer.id,
                "tickwheel.attempt": attempt,
            },
        )
        if span is None:  # the provider went away meanwhile
            return await self._send(timer, url, self._request(timer, callback, url, attempt), go)
        answered: list[int] = []
        try:
            trace = spans.traceparent(span) or self._trace(timer)
            request = self._request(timer, callback, url, attempt, trace)
            outcome = await self._send(timer, url, request, go, answered)
            if answered:
                span.set_attribute("http.response.status_code", answered[0])
            if outcome.verdict is not Verdict.ACK:
                spans.fail(span, str(answered[0]) if answered else outcome.verdict.value)
            return outcome
        except NotFired:
            spans.fail(span, "not_sent")
            raise
        finally:
            span.end()

    async def _send(
        self,
        timer: Timer,
        url: CallbackUrl,
        request: bytes,
        go: Callable[[], bool] | None,
        answered: list[int] | None = None,
    ) -> Outcome:
        """Send `request` and judge the answer; whatever fails becomes an outcome, its error
        fit to store (`_printable`)."""
        origin = url.origin
        host = url.host
        timeout_s = timer.retry.timeout_s
        try:
            response = await self._client.request(origin, request, timeout_s, go)
            if answered is not None:
                answered.append(response.status)
            outcome = _judge(response)
        except NotSent:
            raise NotFired from None
        except TimeoutError:
            outcome = _failed(f"timeout after {timeout_s} s", "timeout")
        except PoolTimeout as error:
            where = f"{host}:{url.port}"
            outcome = Outcome(
                Verdict.DEFER,
                f"{NO_FREE_CONNECTION} to {where} within {error.waited_s:g} s",
                NO_SLOT_DEFER_S * (1 + random.random()),
            )
        except InvalidHost:
            outcome = Outcome(Verdict.KILL, f"invalid URL: host {host}", error_class="invalid_url")
        except PrivateAddressRefused as error:
            outcome = Outcome(Verdict.KILL, str(error), error_class="private_address")
        except ConnectFailed as error:
            outcome = _connection_error(error, origin)
        except Disconnected as error:
            outcome = _failed(f"connection closed by {host} {error}", "disconnected")
        except BadResponse as error:
            reason = f": {error}" if str(error) else ""
            outcome = _failed(f"invalid HTTP response from {host}{reason}", "bad_response")
        except OSError as error:
            reason = error.strerror or type(error).__name__
            outcome = _failed(truncate_error(f"connection failed: {host}: {reason}"), "connect")
        except Exception as error:
            outcome = _failed(f"unexpected error: {type(error).__name__}", "unexpected")
        return _printable(outcome)

    async def close(self) -> None:
        """Close every connection; idempotent. Firing afterwards raises `Closed`."""
        self._closed = True
        self._client.close()
