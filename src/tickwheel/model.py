"""The timer record: what to fire, when, how to retry, and where it is in its life.

::

    scheduled ──claim──▶ leased ──ack──▶ done
        ▲                  ├──retry──▶ scheduled (attempt kept, new due)
        │                  ├──defer──▶ scheduled (not sent: deferrals + 1, no attempt spent)
        │                  └──kill───▶ dead ──replay──▶ scheduled
        └──lease expired───┘
"""

from __future__ import annotations

import json
import os
import re
import reprlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from types import MappingProxyType
from typing import Any, TypeVar

from tickwheel.errors import InvalidTimer
from tickwheel.tracecontext import check_trace
from tickwheel.urls import CallbackUrl, parse_url

R = TypeVar("R")

MAX_ID_CHARS = 128
MAX_QUEUE_CHARS = 64
MAX_URL_CHARS = 2048
MAX_HEADERS = 32
MAX_HEADER_BYTES = 8 * 1024
MAX_BODY_BYTES = 64 * 1024
MAX_PAYLOAD_BYTES = 64 * 1024
MAX_ERROR_CHARS = 1024
MAX_JSON_DEPTH = 128
"""How deeply lists and objects may nest in a payload: each level is a stack frame to encode
and decode, and a stored record too deep to decode would fail every claim of its queue."""
MAX_HOST_CHARS = 253
"""A host name's length as DNS spells it (ASCII, punycode for other scripts, no final dot)."""
MAX_DUE_MS = 253_402_300_799_999
"""9999-12-31T23:59:59.999Z, the last instant RFC 3339 can write; a store's horizon is nearer."""
MAX_ATTEMPTS = 1000
MAX_TIMEOUT_S = 1800.0
"""One attempt's deadline: 30 minutes, the cap Cloud Tasks puts on an HTTP task's dispatch."""
MAX_BACKOFF_S = 7 * 86_400.0
"""A week between two attempts; a receiver down for longer is a case for the dead letters."""
MAX_RETRY_S = 365 * 86_400.0
"""A year of attempts from the first; both bounds are far inside a store's 10-year horizon."""
METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE"})

_ID = re.compile(r"[A-Za-z0-9._:-]+")
_URL_REFUSED = re.compile(r"[\x00-\x20\x7f]")  # spaces and control characters
# a schedule's occurrence: `<schedule id>@<nominal epoch ms>`; no other id holds an "@"
_OCCURRENCE_ID = re.compile(r"([A-Za-z0-9._:-]+)@(0|[1-9][0-9]{0,14})")
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# headers the firing engine sets itself or that would corrupt the request if copied
_RESERVED_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "idempotency-key"}
)
# what a header value must not hold: C0 controls but tab, DEL, C1 controls, line and paragraph
# separators, and lone surrogates (UTF-8 cannot encode them)
_NOT_IN_HEADER_VALUE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_CROCKFORD_PAIRS = [a + b for a in _CROCKFORD for b in _CROCKFORD]
_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = 60
_SHORT.maxlong = 40


def _shown(value: object) -> str:
    """Return a short repr of `value` for a message: input may be megabytes, or an int too
    long for `repr` (over 4,300 digits)."""
    try:
        return _SHORT.repr(value)
    except ValueError:
        return f"a {type(value).__name__} too large to show"


def json_depth(value: object, limit: int = MAX_JSON_DEPTH) -> int:
    """Return how deeply lists, tuples and dicts nest in `value` (0 for a scalar), counting
    no further than `limit` + 1, so a deep or cyclic value costs no more than a shallow one."""
    depth = 0
    level = [value]
    while depth <= limit:
        containers = [item for item in level if isinstance(item, list | tuple | dict)]
        if not containers:
            break
        depth += 1
        level = [
            child
            for item in containers
            for child in (item.values() if isinstance(item, dict) else item)
        ]
    return depth


def _is_unicode(text: str) -> bool:
    """Whether `text` is free of lone surrogates, which no UTF-8 request or store can hold."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _check_name(argument: str, value: object, max_chars: int) -> None:
    if not isinstance(value, str) or not _ID.fullmatch(value) or len(value) > max_chars:
        raise InvalidTimer(
            argument,
            f"must be 1-{max_chars} characters of A-Z a-z 0-9 . _ : -, got {_shown(value)}",
        )


def _check_url(url: object) -> CallbackUrl:
    """Refuse a URL that cannot be called, or that would fail only when the timer fires;
    return it parsed."""
    if not isinstance(url, str) or len(url) > MAX_URL_CHARS:
        raise InvalidTimer("callback.url", f"must be a string of at most {MAX_URL_CHARS} chars")
    if not _is_unicode(url):
        raise InvalidTimer("callback.url", "must be valid Unicode: it holds a lone surrogate")
    parsed = parse_url(url)  # its InvalidUrl is an InvalidTimer naming callback.url
    if _URL_REFUSED.search(url) is not None:
        raise InvalidTimer("callback.url", "must not contain spaces or control characters")
    # a name longer than DNS carries would fail every lookup; an address is no name
    if not parsed.is_ip and len(parsed.host.removesuffix(".")) > MAX_HOST_CHARS:
        raise InvalidTimer(
            "callback.url", f"host is over {MAX_HOST_CHARS} characters as DNS spells it"
        )
    return parsed


def check_headers(headers: object, argument: str = "callback.headers") -> None:
    """Refuse headers that would corrupt the request, or that a receiver's parser refuses.

    A value holds visible characters, spaces and tabs (RFC 9110 field-content). Non-ASCII
    characters are allowed: the request goes out as UTF-8, bytes HTTP carries as opaque
    ``obs-text``, and a receiver that decodes UTF-8 gets the value as given (one that decodes
    Latin-1 sees mojibake, but no parser refuses them). Names are compared ignoring case, as
    HTTP does, so ``X-A`` and ``x-a`` are one header given twice. `argument` names the field in
    errors (a queue's default headers are checked the same way).
    """
    if not isinstance(headers, dict):
        raise InvalidTimer(argument, "must be a mapping of names to values")
    if len(headers) > MAX_HEADERS:
        raise InvalidTimer(argument, f"at most {MAX_HEADERS} headers")
    total = 0
    seen: set[str] = set()
    for name, value in headers.items():
        if not isinstance(name, str) or not _TOKEN.fullmatch(name):
            raise InvalidTimer(argument, f"invalid header name {_shown(name)}")
        lowered = name.lower()
        if lowered in _RESERVED_HEADERS or lowered.startswith("tickwheel-"):
            raise InvalidTimer(argument, f"{_shown(name)} is set by tickwheel")
        if lowered in seen:
            raise InvalidTimer(argument, f"{_shown(name)} is given twice (names ignore case)")
        seen.add(lowered)
        if not isinstance(value, str) or _NOT_IN_HEADER_VALUE.search(value):
            raise InvalidTimer(
                argument,
                f"the value of {_shown(name)} must be text: visible characters, spaces and "
                "tabs, no control characters",
            )
        total += len(name) + len(value.encode())
    if total > MAX_HEADER_BYTES:
        raise InvalidTimer(argument, f"are over {MAX_HEADER_BYTES} bytes in all")


def _check_seconds(argument: str, value: object, max_s: float, *, allow_zero: bool) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidTimer(argument, f"must be a number of seconds, got {_shown(value)}")
    # comparisons, not float(): a huge int would overflow; NaN fails both
    above_zero = value >= 0 if allow_zero else value > 0
    if not (above_zero and value <= max_s):
        low = ">= 0" if allow_zero else "> 0"
        raise InvalidTimer(
            argument, f"must be {low} and at most {max_s:.0f} s, got {_shown(value)}"
        )


class State(StrEnum):
    """Where a timer is in its life."""

    SCHEDULED = "scheduled"
    LEASED = "leased"
    PAUSED = "paused"
    DONE = "done"
    DEAD = "dead"


@dataclass(frozen=True, slots=True, kw_only=True)
class Callback:
    """The HTTP request to make when a timer fires.

    `headers` may be given as a dict; the callback keeps a read-only copy, since stores hand
    one decoded callback to every timer that shares it. The URL is parsed once, when the
    callback is built (or, for one a store rebuilt without checks, when first asked), and
    carried as `parsed_url` for the SSRF guard, the limits and the request.
    """

    url: str
    method: str = "POST"
    headers: Mapping[str, str] = field(default_factory=dict)
    body: str | None = None
    _parsed: CallbackUrl | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_parsed", _check_url(self.url))
        if not isinstance(self.method, str) or self.method not in METHODS:
            raise InvalidTimer("callback.method", f"must be one of {sorted(METHODS)}")
        headers = self.headers
        # another callback's headers come as a read-only view (through `dataclasses.replace`)
        check_headers(dict(headers) if isinstance(headers, MappingProxyType) else headers)
        object.__setattr__(self, "headers", MappingProxyType(dict(headers)))
        if self.body is not None:
            if not isinstance(self.body, str):
                raise InvalidTimer("callback.body", "must be a string")
            if not _is_unicode(self.body):
                raise InvalidTimer(
                    "callback.body", "must be valid Unicode: it holds a lone surrogate"
                )
            if len(self.body.encode()) > MAX_BODY_BYTES:
                raise InvalidTimer("callback.body", f"is over {MAX_BODY_BYTES} bytes as UTF-8")

    @property
    def parsed_url(self) -> CallbackUrl:
        """The URL as it is called: host, port, request target, ``Host`` header.

        Raises:
            InvalidUrl: a URL kept by an earlier release that this one cannot call.
        """
        parsed = getattr(self, "_parsed", None)  # unset on a callback a store rebuilt
        if parsed is None:
            parsed = parse_url(self.url)
            object.__setattr__(self, "_parsed", parsed)
        return parsed

    def with_headers(self, headers: Mapping[str, str]) -> Callback:
        """This callback sending `headers` instead, unchecked (the caller merged checked ones),
        its parsed URL carried over."""
        return restore(
            Callback,
            url=self.url,
            method=self.method,
            headers=MappingProxyType(dict(headers)),
            body=self.body,
            _parsed=getattr(self, "_parsed", None),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How often and how far apart a failing timer is tried again.

    Every field is bounded: at most `MAX_ATTEMPTS` attempts, each given at most
    `MAX_TIMEOUT_S`, at most `MAX_BACKOFF_S` apart, for at most `MAX_RETRY_S` in all (when
    `max_retry_s` is set), so no retry lands past a store's horizon.
    """

    max_attempts: int = 10
    min_backoff_s: float = 1.0
    max_backoff_s: float = 3600.0
    timeout_s: float = 10.0
    max_retry_s: float | None = None

    def __post_init__(self) -> None:
        attempts = self.max_attempts
        if isinstance(attempts, bool) or not isinstance(attempts, int):
            raise InvalidTimer("retry.max_attempts", f"must be an integer, got {_shown(attempts)}")
        if not 1 <= attempts <= MAX_ATTEMPTS:
            raise InvalidTimer("retry.max_attempts", f"must be from 1 to {MAX_ATTEMPTS}")
        _check_seconds("retry.min_backoff_s", self.min_backoff_s, MAX_BACKOFF_S, allow_zero=True)
        _check_seconds("retry.max_backoff_s", self.max_backoff_s, MAX_BACKOFF_S, allow_zero=True)
        _check_seconds("retry.timeout_s", self.timeout_s, MAX_TIMEOUT_S, allow_zero=False)
        if self.min_backoff_s > self.max_backoff_s:
            raise InvalidTimer("retry.min_backoff_s", "must not exceed retry.max_backoff_s")
        if self.max_retry_s is not None:
            _check_seconds("retry.max_retry_s", self.max_retry_s, MAX_RETRY_S, allow_zero=True)


DEFAULT_RETRY = RetryPolicy()


@dataclass(frozen=True, slots=True, kw_only=True)
class Timer:
    """A durable timer: fire `callback` (or hand `payload` to a consumer of `queue`) at `due_ms`.

    `id` is generated (sortable by creation time) when not given. The fields after `retry` are
    the store's bookkeeping; callers leave them at their defaults. `first_claimed_ms` is when
    the current run of attempts began (the first claim since it was added, rescheduled or
    replayed), so `RetryPolicy.max_retry_s` can be measured from it. `attempt` counts claims
    (each claim's lease token is one higher); `deferrals` counts the claims handed back unsent
    (a limit, a `Retry-After` hold, no free connection), so `attempts_spent` is what the
    timer's `max_attempts` and its receiver see.

    `trace_parent` and `trace_state` are the W3C trace context of the request that created the
    timer: each attempt of its callback continues that trace (`tracecontext.py`).
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
    deferrals: int = 0
    trace_parent: str | None = None
    trace_state: str | None = None

    def __post_init__(self) -> None:
        if not self.id:
            object.__setattr__(self, "id", new_id())
        timer_id = self.id
        if not (
            isinstance(timer_id, str)
            and len(timer_id) <= MAX_ID_CHARS
            and occurrence_of(timer_id) is not None
        ):
            _check_name("id", timer_id, MAX_ID_CHARS)
        _check_name("queue", self.queue, MAX_QUEUE_CHARS)
        due_ms = self.due_ms
        if isinstance(due_ms, bool) or not isinstance(due_ms, int):
            raise InvalidTimer(
                "due_ms", f"must be integer epoch milliseconds, got {_shown(due_ms)}"
            )
        if not 0 <= due_ms <= MAX_DUE_MS:
            raise due_out_of_range("due_ms", due_ms)
        if self.payload is not None:
            if json_depth(self.payload) > MAX_JSON_DEPTH:
                raise InvalidTimer(
                    "payload", f"nests more than {MAX_JSON_DEPTH} levels of lists and objects"
                )
            try:
                encoded = json.dumps(
                    self.payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False
                )
            except (TypeError, ValueError) as error:
                raise InvalidTimer("payload", f"must be JSON-serialisable: {error}") from None
            # measured as the stores write it, in UTF-8, which holds no lone surrogate
            if not _is_unicode(encoded):
                raise InvalidTimer("payload", "must be valid Unicode: it holds a lone surrogate")
            if len(encoded.encode()) > MAX_PAYLOAD_BYTES:
                raise InvalidTimer("payload", f"is over {MAX_PAYLOAD_BYTES} bytes as JSON")
            if isinstance(self.payload, list | dict | tuple):
                # keep it as every store returns it: tuples become lists, keys become strings
                object.__setattr__(self, "payload", json.loads(encoded))
        if self.trace_parent is not None or self.trace_state is not None:
            check_trace(self.trace_parent, self.trace_state)

    def spec(self) -> tuple[object, ...]:
        """What the caller asked for; two timers with one id and one spec are the same timer.

        The trace context is not part of it: a client retrying a create sends a new one."""
        return (self.due_ms, self.queue, self.callback, self.payload, self.retry)

    @property
    def attempts_spent(self) -> int:
        """The attempts made or being made: claims that were not handed back unsent."""
        return self.attempt - self.deferrals

    def evolve(self, **changes: Any) -> Timer:
        """Return a copy with `changes` applied (and validated)."""
        return replace(self, **changes)


def due_out_of_range(argument: str, due_ms: int) -> InvalidTimer:
    """The error of a due time outside 1970-9999, naming it `argument`."""
    return InvalidTimer(
        argument, f"must be from 1970 to 9999 (0 to {MAX_DUE_MS}), got {_shown(due_ms)}"
    )


def occurrence_id(schedule_id: str, nominal_ms: int) -> str:
    """The id of a schedule's occurrence at `nominal_ms`: one timer per occurrence, ever."""
    return f"{schedule_id}@{nominal_ms}"


def occurrence_of(timer_id: str) -> tuple[str, int] | None:
    """The schedule id and nominal time of an occurrence's timer id, or None for a plain id."""
    if "@" not in timer_id:
        return None
    match = _OCCURRENCE_ID.fullmatch(timer_id)
    return None if match is None else (match[1], int(match[2]))


def restore(cls: type[R], **values: Any) -> R:
    """Rebuild a record a store wrote, without validating it again: every field is given.

    Stores validate a timer once, when it is added; re-validating on every claim and get cost
    about half of a claim's client time (bench/stores.py). `cls` is a frozen dataclass with
    slots: a timer's parts, or a schedule.
    """
    record = object.__new__(cls)
    setters = _SETTERS.get(cls)
    if setters is None:
        setters = _SETTERS[cls] = _slot_setters(cls)
    for name, value in values.items():
        setters[name](record, value)
    return record


def _slot_setters(cls: type[Any]) -> dict[str, Callable[[Any, Any], None]]:
    """Each field's slot setter: it skips the frozen `__setattr__`, at half the cost of
    ``object.__setattr__`` with its name lookup."""
    return {f.name: getattr(cls, f.name).__set__ for f in fields(cls)}


_SETTERS: dict[type[Any], dict[str, Callable[[Any, Any], None]]] = {
    cls: _slot_setters(cls) for cls in (Callback, RetryPolicy, Timer)
}


def new_id(now_ms: int | None = None) -> str:
    """Return a 26-character ULID-style id: 48 bits of milliseconds, 80 random bits."""
    ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    value = (ms << 80) | int.from_bytes(os.urandom(10), "big")
    pairs = _CROCKFORD_PAIRS  # two characters (10 bits) a lookup: half the steps
    return "".join([pairs[(value >> shift) & 1023] for shift in range(120, -1, -10)])


def truncate_error(error: str) -> str:
    """Bound a recorded error message."""
    return error if len(error) <= MAX_ERROR_CHARS else error[: MAX_ERROR_CHARS - 1] + "…"


REPLACEMENT_CHAR = "\ufffd"
# C0, DEL and C1 (a terminal acts on them: ESC starts a sequence, BEL ends an OSC, 0x9b is a
# one-byte CSI), and the Unicode line separators and bidi controls, which move or reorder what
# an operator reads
_CONTROLS = (
    *range(0x00, 0x20),
    *range(0x7F, 0xA0),
    0x2028,
    0x2029,
    *range(0x202A, 0x202F),
    *range(0x2066, 0x206A),
)
_REPLACE_ALL = dict.fromkeys(_CONTROLS, REPLACEMENT_CHAR)
_REPLACE_KEEPING_LINES = {code: mark for code, mark in _REPLACE_ALL.items() if code not in (9, 10)}


def replace_controls(text: str, *, keep_lines: bool = False) -> str:
    """Return `text` with every control character replaced by U+FFFD, so that text a receiver
    or a user chose cannot drive the terminal it is shown on (its title, the screen, a link).

    `keep_lines` keeps tab and line feed, for text shown on several lines (a body).
    """
    if text.isprintable():  # the common case: nothing to replace
        return text
    return text.translate(_REPLACE_KEEPING_LINES if keep_lines else _REPLACE_ALL)
