"""A queue's defaults: the retry policy and callback headers its timers take when they set none.

Defaults are applied when a timer fires, not when it is added: a change reaches timers already
waiting. A timer whose retry policy is the built-in one (`DEFAULT_RETRY`, which the stores keep
as "none given") takes the queue's whole policy; any other policy is the timer's own and wins.
Headers merge: the queue's, then the timer's own over them (names compared ignoring case).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from tickwheel.errors import InvalidArgument
from tickwheel.model import DEFAULT_RETRY, Callback, RetryPolicy, Timer, check_headers, restore

_RETRY_FIELDS = ("max_attempts", "min_backoff_s", "max_backoff_s", "timeout_s", "max_retry_s")
_TIMER_FIELDS = tuple(f.name for f in fields(Timer))


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueDefaults:
    """What a queue's timers take at fire time when they set none of their own: a retry
    policy (None: the built-in one) and callback headers (checked as a timer's are)."""

    retry: RetryPolicy | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.retry is not None and not isinstance(self.retry, RetryPolicy):
            raise InvalidArgument("retry", f"must be a RetryPolicy or None, got {self.retry!r:.80}")
        headers = self.headers
        given = dict(headers) if isinstance(headers, MappingProxyType) else headers
        check_headers(given, "headers")
        object.__setattr__(self, "headers", MappingProxyType(dict(headers)))

    @property
    def empty(self) -> bool:
        """Whether these defaults change nothing (a queue with them has none)."""
        return self.retry is None and not self.headers

    def apply(self, timer: Timer) -> Timer:
        """Return `timer` as it fires in a queue with these defaults: the queue's retry policy
        when the timer has the built-in one, the queue's headers under its own."""
        retry = timer.retry
        if self.retry is not None and (retry is DEFAULT_RETRY or retry == DEFAULT_RETRY):
            retry = self.retry
        callback = timer.callback
        if callback is not None and self.headers:
            callback = _merged(callback, self.headers)
        if retry is timer.retry and callback is timer.callback:
            return timer
        values = {name: getattr(timer, name) for name in _TIMER_FIELDS}
        values["retry"], values["callback"] = retry, callback
        return restore(Timer, **values)


def _merged(callback: Callback, headers: Mapping[str, str]) -> Callback:
    """`callback` with `headers` added under its own (its own win, names ignoring case)."""
    own = {name.lower() for name in callback.headers}
    merged = {name: value for name, value in headers.items() if name.lower() not in own}
    if not merged:
        return callback
    merged.update(callback.headers)
    return callback.with_headers(merged)


def encode_defaults(defaults: QueueDefaults) -> dict[str, Any]:
    """Defaults as JSON fields: ``{"retry": [five policy fields] | null, "headers": {...}}``."""
    retry = defaults.retry
    return {
        "retry": None if retry is None else [getattr(retry, name) for name in _RETRY_FIELDS],
        "headers": dict(defaults.headers),
    }


def decode_defaults(fields_: Mapping[str, Any]) -> QueueDefaults:
    retry = fields_.get("retry")
    policy = None if retry is None else dict(zip(_RETRY_FIELDS, retry, strict=True))
    return QueueDefaults(
        retry=None if policy is None else RetryPolicy(**policy),
        headers=fields_.get("headers") or {},
    )


def encode_defaults_text(defaults: QueueDefaults) -> str:
    """Defaults as one JSON text (Redis keeps them in a field of their own)."""
    return json.dumps(encode_defaults(defaults), separators=(",", ":"))


def decode_defaults_text(text: str | bytes) -> QueueDefaults:
    return decode_defaults(json.loads(text))
