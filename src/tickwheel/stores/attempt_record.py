"""`Attempt`: one callback attempt as a store keeps it in a timer's history, its JSON form, and
the rule every store reads a history by."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, NamedTuple, Protocol

from tickwheel.model import Timer

ATTEMPT_BODY_BYTES = 1024
"""How much of a response body an attempt keeps."""
DEFAULT_ATTEMPT_HISTORY = 20
"""Attempts a store keeps per timer unless told otherwise (0: none are recorded)."""
MAX_ATTEMPT_HISTORY = 1000
DEFAULT_ATTEMPT_RETENTION_MS = 7 * 86_400_000
"""How long a store keeps an attempt unless told otherwise."""
MAX_ATTEMPT_RETENTION_S = 3650 * 86_400
"""The longest attempt retention the service takes: ten years, a timer's horizon."""


# a string as `json.dumps(..., ensure_ascii=False)` writes it (the C function json uses)
_STRING = json.encoder.encode_basestring


class Attempt(NamedTuple):
    """One attempt at a timer's callback and what it came to (a named tuple: a worker makes
    one per callback, and a tuple costs a fifth of a frozen dataclass to build).

    `attempt` is the attempt's number (its ``Tickwheel-Attempt``), `at_ms` when it was sent
    (the store's clock), `worker` who sent it, `outcome` what the store did with the timer
    (``ack``, ``retry`` or ``dead``), `status` the HTTP status or else `error` the kind of
    failure (``timeout``, ``connect``, ...), `latency_ms` how long the call took, `body` the
    first KiB of the response body with control characters replaced, and `next_due_ms` when a
    retry is due.
    """

    attempt: int
    at_ms: int
    worker: str
    outcome: str
    status: int | None = None
    error: str | None = None
    latency_ms: float = 0.0
    body: str | None = None
    next_due_ms: int | None = None

    def to_json(self) -> str:
        """The compact JSON a store keeps (SQLite, PostgreSQL and Redis alike): an array of the
        fields in order (no keys to build and write per attempt); fields added later go last.

        Written field by field, as `json.dumps` with compact separators and
        ``ensure_ascii=False`` writes it, at a fraction of its cost (a worker writes one per
        callback; a test compares the two): numbers as their repr (json's own, and a latency
        is never NaN or infinite), strings by json's C encoder."""
        status, error, body, next_due = self.status, self.error, self.body, self.next_due_ms
        return (
            f"[{self.attempt!r},{self.at_ms!r},{_STRING(self.worker)},{_STRING(self.outcome)},"
            f"{'null' if status is None else repr(status)},"
            f"{'null' if error is None else _STRING(error)},{self.latency_ms!r},"
            f"{'null' if body is None else _STRING(body)},"
            f"{'null' if next_due is None else repr(next_due)}]"
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> Attempt:
        """Read back what `to_json` wrote; trailing fields it does not know are ignored."""
        fields: list[Any] = json.loads(text)
        return cls(*fields[: len(cls._fields)])


class AttemptHistory(Protocol):
    """The read side of attempt history; `ack`, `ack_many`, `retry` and `kill` write it, in the
    same atomic step as the settle itself (a settle that does not land records nothing)."""

    async def attempts(self, timer_id: str) -> list[Attempt]:
        """The recorded attempts of the timer `timer_id`, newest first: at most the store's
        `attempt_history`, none older than its `attempt_retention_ms` nor made before the timer
        was created (an earlier timer of the same id); [] for a timer the store does not hold."""
        ...


CLOCK_SKEW_MS = 10_000
"""How far the clock of the worker that sent an attempt may be behind the one that created its
timer (another host's, or a Redis clock estimate) for the attempt still to count as the timer's."""


def kept_attempts(
    attempts: Iterable[Attempt], timer: Timer | None, now_ms: int, retention_ms: int, most: int
) -> list[Attempt]:
    """Of `attempts` (newest first), those the timer `timer` may show at `now_ms`: none sent
    before it was created (by an earlier timer of its id whose row or record it took over)."""
    if timer is None or most == 0:
        return []
    since = max(timer.created_ms - CLOCK_SKEW_MS, now_ms - retention_ms)
    return [attempt for attempt in attempts if attempt.at_ms >= since][:most]
