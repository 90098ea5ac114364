"""The timer record: what to fire, when, how to retry, and where it is in its life.

::

    scheduled ──claim──▶ leased ──ack──▶ done
        ▲                  ├──retry──▶ scheduled (attempt kept, new due)
        │                  └──kill───▶ dead ──replay──▶ scheduled
        └──lease expired───┘
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from typing import Any, TypeVar
from urllib.parse import urlsplit

from tickwheel.errors import InvalidTimer

R = TypeVar("R", "Callback", "RetryPolicy", "Timer")

MAX_ID_CHARS = 128
MAX_QUEUE_CHARS = 64
MAX_URL_CHARS = 2048
MAX_HEADERS = 32
MAX_HEADER_BYTES = 8 * 1024
MAX_BODY_BYTES = 64 * 1024
MAX_PAYLOAD_BYTES = 64 * 1024
MAX_ERROR_CHARS = 1024
METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE"})

_ID = re.compile(r"[A-Za-z0-9._:-]+")
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# headers the firing engine sets itself or that would corrupt the request if copied
_RESERVED_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "idempotency-key"}
)
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _check_name(argument: str, value: object, max_chars: int) -> None:
    if not isinstance(value, str) or not _ID.fullmatch(value) or len(value) > max_chars:
        raise InvalidTimer(
            argument, f"must be 1-{max_chars} characters of A-Z a-z 0-9 . _ : -, got {value!r}"
        )


def _check_url(url: object) -> None:
    if not isinstance(url, str) or len(url) > MAX_URL_CHARS:
        raise InvalidTimer("callback.url", f"must be a string of at most {MAX_URL_CHARS} chars")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:
        raise InvalidTimer("callback.url", f"is not a valid URL: {error}") from None
    if parts.scheme not in {"http", "https"}:
        raise InvalidTimer("callback.url", f"scheme must be http or https, got {url!r}")
    if not parts.hostname:
        raise InvalidTimer("callback.url", f"has no host: {url!r}")
    if parts.username is not None or parts.password is not None:
        raise InvalidTimer("callback.url", "must not carry credentials; send them in headers")
    if port == 0:
        raise InvalidTimer("callback.url", "port must not be 0")
    if any(ord(char) <= 32 or ord(char) == 127 for char in url):
        raise InvalidTimer("callback.url", "must not contain spaces or control characters")


def _check_headers(headers: object) -> None:
    if not isinstance(headers, dict):
        raise InvalidTimer("callback.headers", "must be a mapping of names to values")
    if len(headers) > MAX_HEADERS:
        raise InvalidTimer("callback.headers", f"at most {MAX_HEADERS} headers")
    total = 0
    for name, value in headers.items():
        if not isinstance(name, str) or not _TOKEN.fullmatch(name):
            raise InvalidTimer("callback.headers", f"invalid header name {name!r}")
        lowered = name.lower()
        if lowered in _RESERVED_HEADERS or lowered.startswith("tickwheel-"):
            raise InvalidTimer("callback.headers", f"{name} is set by tickwheel")
        if not isinstance(value, str) or any(c in value for c in "\r\n\0"):
            raise InvalidTimer("callback.headers", f"invalid value for header {name}")
        total += len(name) + len(value.encode())
    if total > MAX_HEADER_BYTES:
        raise InvalidTimer("callback.headers", f"are over {MAX_HEADER_BYTES} bytes in all")


def _check_seconds(argument: str, value: object, *, allow_zero: bool) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidTimer(argument, f"must be a finite number of seconds, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise InvalidTimer(argument, f"must be {'>= 0' if allow_zero else '> 0'}, got {value!r}")


class State(StrEnum):
    """Where a timer is in its life."""

    SCHEDULED = "scheduled"
    LEASED = "leased"
    DONE = "done"
    DEAD = "dead"


@dataclass(frozen=True, slots=True, kw_only=True)
class Callback:
    """The HTTP request to make when a timer fires."""

    url: str
    method: str = "POST"
    headers: dict[str, str] = field(default_factory=dict)
    body: str | None = None

    def __post_init__(self) -> None:
        _check_url(self.url)
        if self.method not in METHODS:
            raise InvalidTimer("callback.method", f"must be one of {sorted(METHODS)}")
        _check_headers(self.headers)
        if self.body is not None:
            if not isinstance(self.body, str):
                raise InvalidTimer("callback.body", "must be a string")
            if len(self.body.encode()) > MAX_BODY_BYTES:
                raise InvalidTimer("callback.body", f"is over {MAX_BODY_BYTES} bytes")


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How often and how far apart a failing timer is tried again."""

    max_attempts: int = 10
    min_backoff_s: float = 1.0
    max_backoff_s: float = 3600.0
    timeout_s: float = 10.0
    max_retry_s: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.max_attempts, int) or not 1 <= self.max_attempts <= 1000:
            raise InvalidTimer("retry.max_attempts", "must be an integer from 1 to 1000")
        for name in ("min_backoff_s", "max_backoff_s", "timeout_s"):
            _check_seconds(f"retry.{name}", getattr(self, name), allow_zero=name != "timeout_s")
        if self.min_backoff_s > self.max_backoff_s:
            raise InvalidTimer("retry.min_backoff_s", "must not exceed retry.max_backoff_s")
        if self.max_retry_s is not None:
            _check_seconds("retry.max_retry_s", self.max_retry_s, allow_zero=True)


DEFAULT_RETRY = RetryPolicy()

# what the caller asked for; the other Timer fields are the store's bookkeeping
_SPEC_FIELDS = ("id", "due_ms", "queue", "callback", "payload", "retry")


@dataclass(frozen=True, slots=True, kw_only=True)
class Timer:
    """A durable timer: fire `callback` (or hand `payload` to a consumer of `queue`) at `due_ms`.

    `id` is generated (sortable by creation time) when not given. The fields after `retry` are
    the store's bookkeeping; callers leave them at their defaults. `first_claimed_ms` is when
    the current run of attempts began (the first claim since it was added, rescheduled or
    replayed), so `RetryPolicy.max_retry_s` can be measured from it.
    """

    id: str = ""
    due_ms: int
    queue: str = "default"
    callback: Callback | None = None
    payload: Any = None
    retry: RetryPolicy = DEFAULT_RETRY
    attempt: int = 0
    state: State = State.SCHEDULED
    created_ms: int = 0
    updated_ms: int = 0
    last_error: str | None = None
    first_claimed_ms: int | None = None

    def __post_init__(self) -> None:
        if not self.id:
            object.__setattr__(self, "id", new_id())
        _check_name("id", self.id, MAX_ID_CHARS)
        _check_name("queue", self.queue, MAX_QUEUE_CHARS)
        if isinstance(self.due_ms, bool) or not isinstance(self.due_ms, int):
            raise InvalidTimer("due_ms", f"must be integer epoch milliseconds, got {self.due_ms!r}")
        if self.due_ms < 0:
            raise InvalidTimer("due_ms", f"must not be before 1970, got {self.due_ms!r}")
        if self.payload is not None:
            try:
                encoded = json.dumps(self.payload, separators=(",", ":"), allow_nan=False)
            except (TypeError, ValueError) as error:
                raise InvalidTimer("payload", f"must be JSON-serialisable: {error}") from None
            if len(encoded.encode()) > MAX_PAYLOAD_BYTES:
                raise InvalidTimer("payload", f"is over {MAX_PAYLOAD_BYTES} bytes as JSON")
            if isinstance(self.payload, list | dict | tuple):
                # keep it as every store returns it: tuples become lists, keys become strings
                object.__setattr__(self, "payload", json.loads(encoded))

    def spec(self) -> tuple[object, ...]:
        """What the caller asked for; two timers with one id and one spec are the same timer."""
        return (self.due_ms, self.queue, self.callback, self.payload, self.retry)

    def evolve(self, **changes: Any) -> Timer:
        """Return a copy with `changes` applied (and validated)."""
        return replace(self, **changes)


def restore(cls: type[R], **values: Any) -> R:
    """Rebuild a record a store wrote, without validating it again: every field is given.

    Stores validate a timer once, when it is added; re-validating on every claim and get cost
    about half of a claim's client time (bench/stores.py).
    """
    record = object.__new__(cls)
    setters = _SETTERS[cls]
    for name, value in values.items():
        setters[name](record, value)
    return record


def _slot_setters(cls: type[Any]) -> dict[str, Callable[[Any, Any], None]]:
    """Each field's slot setter: it skips the frozen `__setattr__`, at half the cost of
    ``object.__setattr__`` with its name lookup."""
    return {f.name: getattr(cls, f.name).__set__ for f in fields(cls)}


_SETTERS = {cls: _slot_setters(cls) for cls in (Callback, RetryPolicy, Timer)}


(
    _set_id,
    _set_due_ms,
    _set_queue,
    _set_callback,
    _set_payload,
    _set_retry,
    _set_attempt,
    _set_state,
    _set_created_ms,
    _set_updated_ms,
    _set_last_error,
    _set_first_claimed_ms,
) = _SETTERS[Timer].values()


def restore_timer(
    timer_id: str,
    due_ms: int,
    queue: str,
    callback: Callback | None,
    payload: Any,
    retry: RetryPolicy,
    attempt: int,
    state: State,
    created_ms: int,
    updated_ms: int,
    last_error: str | None,
    first_claimed_ms: int | None,
) -> Timer:
    """`restore` for a `Timer`, every field given in order: a claim rebuilds one per timer,
    and keywords and a loop cost more than twice what twelve direct slot sets do."""
    timer = object.__new__(Timer)
    _set_id(timer, timer_id)
    _set_due_ms(timer, due_ms)
    _set_queue(timer, queue)
    _set_callback(timer, callback)
    _set_payload(timer, payload)
    _set_retry(timer, retry)
    _set_attempt(timer, attempt)
    _set_state(timer, state)
    _set_created_ms(timer, created_ms)
    _set_updated_ms(timer, updated_ms)
    _set_last_error(timer, last_error)
    _set_first_claimed_ms(timer, first_claimed_ms)
    return timer


def as_scheduled(timer: Timer, now_ms: int, attempt: int = 0) -> Timer:
    """Return `timer` as a store keeps it once scheduled at `now_ms`, without validating again."""
    return restore(
        Timer,
        **{name: getattr(timer, name) for name in _SPEC_FIELDS},
        attempt=attempt,
        state=State.SCHEDULED,
        created_ms=now_ms,
        updated_ms=now_ms,
        last_error=None,
        first_claimed_ms=None,
    )


def new_id(now_ms: int | None = None) -> str:
    """Return a 26-character ULID-style id: 48 bits of milliseconds, 80 random bits."""
    ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    value = (ms << 80) | int.from_bytes(os.urandom(10), "big")
    return "".join(_CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))


def truncate_error(error: str) -> str:
    """Bound a recorded error message."""
    return error if len(error) <= MAX_ERROR_CHARS else error[: MAX_ERROR_CHARS - 1] + "…"
