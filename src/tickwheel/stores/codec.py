"""Compact JSON encoding of a timer's spec, shared by the SQLite and Redis stores.

The spec (callback, payload, retry policy) is a JSON array, not an object: field names would be
repeated in every one of a million records. Defaults (no headers, the default retry policy) are
stored as null. Decoding trusts the stored text: it was validated on the way in.
"""

from __future__ import annotations

import functools
import json
import json.scanner
from typing import Any, cast

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


class SpecCache:
    """`encode_spec` over one batch: timers with no payload that share their callback and
    retry objects share one encoding (the batch holds the objects, so their ids stay theirs)."""

    def __init__(self) -> None:
        self._specs: dict[tuple[int, int], str] = {}

    def encode(self, timer: Timer) -> str:
        if timer.payload is not None:
            return encode_spec(timer)
        key = (id(timer.callback), id(timer.retry))
        spec = self._specs.get(key)
        if spec is None:
            spec = self._specs[key] = encode_spec(timer)
        return spec


def decode_spec(spec: str | bytes) -> tuple[Callback | None, Any, RetryPolicy]:
    """Decode a spec, reusing the decoded callback and retry policy of specs seen before.

    Most timers share a callback and a policy (frozen, so timers may share them) while their
    payloads differ; a list or dict payload is decoded afresh for each timer, as a caller may
    change it, and so is never cached.
    """
    cached = _SPECS.get(spec)
    if cached is not None:
        return cached
    # json.loads sniffs the encoding of bytes first; decoding them here is cheaper
    callback, payload, retry = _parse(spec.decode() if isinstance(spec, bytes) else spec)
    decoded = (
        None if callback is None else _callback_of(callback),
        payload,
        DEFAULT_RETRY if retry is None else _shared_retry(*retry),
    )
    if not isinstance(payload, _FRESH) and len(spec) <= _CACHED_SPEC_CHARS:
        if len(_SPECS) >= _CACHED_SPECS:
            _SPECS.clear()
        _SPECS[spec] = decoded
    return decoded


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
_FRESH = (list, dict)
_CACHED_SPEC_CHARS = 512
_CACHED_SPECS = 4096
_SPECS: dict[str | bytes, tuple[Callback | None, Any, RetryPolicy]] = {}


_RETRY_FIELDS = ("max_attempts", "min_backoff_s", "max_backoff_s", "timeout_s", "max_retry_s")


def _callback(callback: Callback | None) -> list[Any] | None:
    if callback is None:
        return None
    return [callback.url, callback.method, callback.headers or None, callback.body]


def _callback_of(fields: list[Any]) -> Callback:
    url, method, headers, body = fields
    return _shared_callback(url, method, tuple(headers.items()) if headers else (), body)


@functools.lru_cache(maxsize=4096)
def _shared_callback(
    url: str, method: str, headers: tuple[tuple[str, str], ...], body: str | None
) -> Callback:
    return restore(Callback, url=url, method=method, headers=dict(headers), body=body)


def _retry(retry: RetryPolicy) -> list[Any] | None:
    if retry == DEFAULT_RETRY:
        return None
    return [getattr(retry, name) for name in _RETRY_FIELDS]


@functools.lru_cache(maxsize=1024)
def _shared_retry(*fields: Any) -> RetryPolicy:
    return restore(RetryPolicy, **dict(zip(_RETRY_FIELDS, fields, strict=True)))
