"""What both clients share around httpx: the URL and token checks, the answer's decoding, and
when a failed request is sent again.

A request is sent again, up to `retries` times with a doubling backoff (or the answer's
``Retry-After``, at most `MAX_WAIT_S`), when it surely did not arrive (the connection was
refused), when nothing was written (429 with ``Retry-After``), and, for an idempotent request
only, when it may have arrived (the connection broke, 502, 503, 504).
"""

from __future__ import annotations

import functools
import json
import random
import socket
import ssl
import string
import urllib.parse
from typing import Any

import httpx

from tickwheel.client.calls import Answer, Request
from tickwheel.errors import ServiceUnreachable

DEFAULT_API = "http://127.0.0.1:8080"
TIMEOUT_S = 30.0
RETRIES = 3
FIRST_WAIT_S = 0.2
MAX_WAIT_S = 5.0
"""The longest wait before a retry, whatever ``Retry-After`` asks."""
_TOKEN_CHARS = frozenset(string.printable) - frozenset(string.whitespace)
_DOUBTFUL_STATUSES = frozenset({502, 503, 504})
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


def base_url_of(api_url: str) -> str:
    """`api_url` without a trailing slash, once checked; neither it nor a token is echoed in an
    error, as either may hold a secret.

    Raises:
        ValueError: the URL is not ``http(s)://host[:port]``, or holds credentials.
    """
    parsed = urllib.parse.urlsplit(api_url)
    if "@" in parsed.netloc:
        raise ValueError("the API URL must not hold credentials: give the token instead")
    if parsed.scheme not in {"http", "https"} or not parsed.hostname:
        raise ValueError(f"the API URL must look like http://host:port, got {api_url!r}")
    return api_url.rstrip("/")


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The context httpx makes for every client by default (certifi's CAs, the environment's
    ignored), made once a process: loading the CAs costs 40 ms of CPU a client."""
    return httpx.create_ssl_context(trust_env=False)


def headers_of(token: str | None) -> dict[str, str]:
    """The headers every request carries.

    Raises:
        ValueError: the token has whitespace or other characters no header value may carry.
    """
    headers = {"accept": "application/json"}
    if token:
        if not set(token) <= _TOKEN_CHARS:
            raise ValueError("the token must be printable ASCII without whitespace")
        headers["authorization"] = f"Bearer {token}"
    return headers


def arguments(request: Request) -> dict[str, Any]:
    """The keyword arguments of httpx's ``request`` for `request`."""
    query = {key: str(value) for key, value in request.query.items() if value is not None}
    sent: dict[str, Any] = {"params": query}
    if request.body is not None:
        sent["content"] = json.dumps(request.body).encode()
        sent["headers"] = {"content-type": "application/json"}
    return sent


def answer_of(response: httpx.Response, doubted: bool) -> Answer:
    """The `Answer` of an httpx response (whose body has been read)."""
    return Answer(response.status_code, _decode(response.content), _retry_after(response), doubted)


def wait_before_retry(request: Request, answer: Answer, tries: int, retries: int) -> float | None:
    """Seconds to wait before sending `request` again after `answer`, or None to keep it."""
    if tries > retries:
        return None
    if answer.status == 429 and answer.retry_after_s is not None:
        return min(max(answer.retry_after_s, backoff(tries)), MAX_WAIT_S)
    if answer.status in _DOUBTFUL_STATUSES and request.idempotent:
        return min(max(answer.retry_after_s or 0.0, backoff(tries)), MAX_WAIT_S)
    return None


def sent_maybe(error: httpx.TransportError) -> bool:
    """Whether the request may have reached the service before `error`."""
    return not isinstance(error, _NOT_SENT)


def backoff(tries: int) -> float:
    """The wait after the `tries`-th failed try: doubling from `FIRST_WAIT_S`, with jitter so
    that clients failed by one outage do not come back at once."""
    return FIRST_WAIT_S * 2.0 ** (tries - 1) * random.uniform(0.5, 1.0)


def unreachable(base_url: str, error: httpx.TransportError, timeout_s: float) -> ServiceUnreachable:
    """The `ServiceUnreachable` that `error` means, with its reason in a few words."""
    if isinstance(error, httpx.TimeoutException):
        return ServiceUnreachable(base_url, f"no answer within {timeout_s:g} s")
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError):
            return ServiceUnreachable(base_url, "connection refused")
        if isinstance(cause, socket.gaierror):
            return ServiceUnreachable(base_url, f"unknown host: {cause.strerror}")
        cause = cause.__cause__ or cause.__context__
    return ServiceUnreachable(base_url, str(error) or type(error).__name__)


def redirected(response: httpx.Response) -> Answer:
    """A redirect as an error answer: the token goes only to the URL given."""
    location = response.headers.get("location") or "nowhere"
    shown = "".join(c for c in location[:200] if c.isprintable())
    message = (
        f"the API redirects to {shown}; tickwheel follows no redirect, so that the token goes "
        "only to the URL given: if that is the API, use its URL instead"
    )
    return Answer(response.status_code, {"error": {"code": "redirect", "message": message}})


def _decode(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return float(response.headers["retry-after"])
    except (KeyError, ValueError):
        return None
