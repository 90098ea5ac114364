"""Compact JSON encoding of a timer's spec, shared by the SQLite and Redis stores.

The spec (callback, payload, retry policy) is a JSON array, not an object: field names would be
repeated in every one of a million records. Defaults (no headers, the default retry policy) are
stored as null. Decoding trusts the stored text: it was validated on the way in.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from tickwheel.model import DEFAULT_RETRY, Callback, RetryPolicy, State, Timer, restore

_STATES = tuple(State)
_STATE_CODE = {state: code for code, state in enumerate(_STATES)}


def state_code(state: State) -> int:
    """Return the small integer a store keeps for `state`."""
    return _STATE_CODE[state]


def state_of(code: int) -> State:
    return _STATES[code]


def encode_spec(timer: Timer) -> str:
    """Encode what the caller asked for: callback, payload and retry policy."""
    return json.dumps(
        [_callback(timer.callback), timer.payload, _retry(timer.retry)],
        separators=(",", ":"),
        ensure_ascii=False,
    )


def decode_spec(spec: str | bytes) -> tuple[Callback | None, Any, RetryPolicy]:
    """Decode a spec; short ones through a cache, since most timers share a callback.

    Callback and retry policy are frozen, so timers may share them; a list or dict payload
    is decoded afresh for each timer, as a caller may change it.
    """
    if len(spec) > _CACHED_SPEC_CHARS:
        return _decode(spec)
    callback, payload, retry = _decode_cached(spec)
    if isinstance(payload, list | dict):
        payload = json.loads(spec)[1]
    return callback, payload, retry


_CACHED_SPEC_CHARS = 512


def _decode(spec: str | bytes) -> tuple[Callback | None, Any, RetryPolicy]:
    callback, payload, retry = json.loads(spec)
    return _decode_callback(callback), payload, _decode_retry(retry)


_decode_cached = functools.lru_cache(maxsize=4096)(_decode)


_RETRY_FIELDS = ("max_attempts", "min_backoff_s", "max_backoff_s", "timeout_s", "max_retry_s")


def _callback(callback: Callback | None) -> list[Any] | None:
    if callback is None:
        return None
    return [callback.url, callback.method, callback.headers or None, callback.body]


def _decode_callback(fields: list[Any] | None) -> Callback | None:
    if fields is None:
        return None
    url, method, headers, body = fields
    return restore(Callback, url=url, method=method, headers=headers or {}, body=body)


def _retry(retry: RetryPolicy) -> list[Any] | None:
    if retry == DEFAULT_RETRY:
        return None
    return [getattr(retry, name) for name in _RETRY_FIELDS]


def _decode_retry(fields: list[Any] | None) -> RetryPolicy:
    if fields is None:
        return DEFAULT_RETRY
    return restore(RetryPolicy, **dict(zip(_RETRY_FIELDS, fields, strict=True)))
