"""A timer's spec as compact JSON, and the state codes, shared by the SQLite and Redis stores.

The spec (callback, payload, retry policy) is a JSON array, not an object: field names would be
repeated in every one of a million records. Defaults (no headers, the default retry policy) are
stored as null. A timer with a trace context adds its ``traceparent`` and ``tracestate`` as a
fourth and fifth element: records written before they existed read the same. Encoding needs
no state (`encode_spec`, or `SpecCache` over one batch); decoding is a `SpecCodec` each store
owns, which keeps what it decoded so its timers share it. Decoding trusts the stored text: it
was validated on the way in.
"""

from __future__ import annotations

import functools
import json
import json.scanner
from types import MappingProxyType
from typing import Any, TypeAlias, cast

from tickwheel.model import DEFAULT_RETRY, Callback, RetryPolicy, State, Timer, restore
from tickwheel.stores.base import Limit, QueueSettings
from tickwheel.stores.queue_defaults import decode_defaults, encode_defaults

Spec: TypeAlias = tuple[Callback | None, Any, RetryPolicy]
"""A decoded spec: callback, payload, retry policy."""
Parts: TypeAlias = tuple[Callback | None, Any, RetryPolicy, str | None, str | None]
"""A decoded spec with the timer's trace context: ``traceparent`` and ``tracestate``."""

# fixed codes, not the enum's order: files and keyspaces written before a state was added
# must read the same (paused came after dead)
_STATES = (State.SCHEDULED, State.LEASED, State.DONE, State.DEAD, State.PAUSED)
_STATE_CODE = {state: code for code, state in enumerate(_STATES)}
_RETRY_FIELDS = ("max_attempts", "min_backoff_s", "max_backoff_s", "timeout_s", "max_retry_s")
_FRESH = (list, dict)
_NO_TRACE = (None, None)
CACHED_SPEC_CHARS = 512
"""Longer specs are decoded afresh each time: they are rarely shared."""
CACHED_SPECS = 4096
"""Decoded specs a codec keeps; it forgets them all when full."""


def state_code(state: State) -> int:
    """Return the small integer a store keeps for `state`."""
    return _STATE_CODE[state]


def state_of(code: int) -> State:
    return _STATES[code]


def encode_spec(timer: Timer) -> str:
    """Encode what the caller asked for: callback, payload and retry policy, and the trace
    context it came with."""
    if timer.trace_parent is None:
        return encode_target(timer.callback, timer.payload, timer.retry)
    return _encode(
        [
            _callback_fields(timer.callback),
            timer.payload,
            _retry_fields(timer.retry),
            timer.trace_parent,
            timer.trace_state,
        ]
    )


def encode_target(callback: Callback | None, payload: Any, retry: RetryPolicy) -> str:
    """A spec from its parts: a schedule's occurrences share the target it holds."""
    return _encode([_callback_fields(callback), payload, _retry_fields(retry)])


# one encoder for every spec: json.dumps with options builds an encoder per call
_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def _callback_fields(callback: Callback | None) -> list[Any] | None:
    if callback is None:
        return None
    # json encodes a dict, not the callback's read-only view of one
    headers = dict(callback.headers) if callback.headers else None
    return [callback.url, callback.method, headers, callback.body]


def _retry_fields(retry: RetryPolicy) -> list[Any] | None:
    if retry == DEFAULT_RETRY:
        return None
    return [getattr(retry, name) for name in _RETRY_FIELDS]


class SpecCache:
    """`encode_spec` over one batch: timers with no payload that share their callback and
    retry objects share one encoding (the batch holds the objects, so their ids stay theirs)."""

    def __init__(self) -> None:
        self._specs: dict[tuple[int, int], str] = {}

    def encode(self, timer: Timer) -> str:
        if timer.payload is not None or timer.trace_parent is not None:
            return encode_spec(timer)
        key = (id(timer.callback), id(timer.retry))
        spec = self._specs.get(key)
        if spec is None:
            spec = self._specs[key] = encode_spec(timer)
        return spec


class SpecCodec:
    """Decodes the specs of one store, reusing the decoded callbacks and retry policies.

    Most timers share a callback and a policy (frozen, headers read-only, so timers may share
    them) while their payloads differ; a list or dict payload is decoded afresh for each timer,
    as a caller may change it, and so its spec is never kept; nor is one with a trace context,
    which is the timer's own.
    """

    def __init__(self) -> None:
        self._specs: dict[str | bytes, Parts] = {}
        self._kept = self._specs.get  # (bound once: a claim decodes a spec per timer)
        self._callback = functools.lru_cache(maxsize=4096)(_new_callback)
        self._retry = functools.lru_cache(maxsize=1024)(_new_retry)

    def decode(self, spec: str | bytes) -> Spec:
        """Return the callback, payload and retry policy `encode_spec` wrote as `spec`."""
        callback, payload, retry, _, _ = self.parts(spec)
        return callback, payload, retry

    def parts(self, spec: str | bytes) -> Parts:
        """Return what `decode` does, and the trace context `encode_spec` wrote."""
        decoded = self._kept(spec)
        if decoded is not None:
            return decoded
        # json.loads sniffs the encoding of bytes first; decoding them here is cheaper
        callback, payload, retry, *trace = _parse(
            spec.decode() if isinstance(spec, bytes) else spec
        )
        trace_parent, trace_state = trace or _NO_TRACE
        decoded = (
            None if callback is None else self._callback_of(callback),
            payload,
            DEFAULT_RETRY if retry is None else self._retry(*retry),
            trace_parent,
            trace_state,
        )
        if trace_parent is not None:
            return decoded
        if not isinstance(payload, _FRESH) and len(spec) <= CACHED_SPEC_CHARS:
            if len(self._specs) >= CACHED_SPECS:
                self._specs.clear()
            self._specs[spec] = decoded
        return decoded

    def _callback_of(self, fields: list[Any]) -> Callback:
        url, method, headers, body = fields
        return self._callback(url, method, tuple(headers.items()) if headers else (), body)


def _parse(text: str) -> Any:
    """`json.loads` for a spec `encode_spec` wrote, which has no whitespace around it.

    The scanner alone costs a third of `json.loads`, which matches a whitespace regex on
    either side first; text it cannot read goes to `json.loads` to be reported.
    """
    try:
        return _scan(text, 0)[0]
    except StopIteration:
        return json.loads(text)


# (typeshed types its argument as a scanner; it takes the decoder whose settings it copies)
_scan = json.scanner.make_scanner(cast(Any, json.JSONDecoder()))


def _new_callback(
    url: str, method: str, headers: tuple[tuple[str, str], ...], body: str | None
) -> Callback:
    return restore(
        Callback, url=url, method=method, headers=MappingProxyType(dict(headers)), body=body
    )


def _new_retry(*fields: Any) -> RetryPolicy:
    return restore(RetryPolicy, **dict(zip(_RETRY_FIELDS, fields, strict=True)))


def encode_limit(limit: Limit) -> str:
    """A limit as stored: ``{"rate", "burst", "concurrency"}``, unset ones null."""
    return json.dumps(
        {"rate": limit.rate, "burst": limit.burst, "concurrency": limit.concurrency},
        separators=(",", ":"),
    )


def decode_limit(text: str | bytes) -> Limit:
    fields = json.loads(text)
    return Limit(rate=fields["rate"], burst=fields["burst"], concurrency=fields["concurrency"])


def encode_queue_settings(settings: QueueSettings) -> str:
    """A queue's settings as stored: ``{"paused", "limit", "defaults"?}``, the limit as
    `encode_limit`'s, the defaults (only when set) as `encode_defaults`'."""
    limit = None if settings.limit is None else json.loads(encode_limit(settings.limit))
    fields: dict[str, Any] = {"paused": settings.paused, "limit": limit}
    if settings.defaults is not None:
        fields["defaults"] = encode_defaults(settings.defaults)
    return json.dumps(fields, separators=(",", ":"))


def decode_queue_settings(text: str | bytes) -> QueueSettings:
    fields = json.loads(text)
    limit, defaults = fields["limit"], fields.get("defaults")
    return QueueSettings(
        paused=fields["paused"],
        limit=None if limit is None else Limit(**limit),
        defaults=None if defaults is None else decode_defaults(defaults),
    )
