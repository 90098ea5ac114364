"""The Redis record of one timer: mutable fields Lua edits as text, then the opaque spec.

::

    <state>,<attempt>,<due_ms>,<created_ms>,<updated_ms>,<seq>,<queue>,<first claimed ms>,
    <error bytes>|<error><spec>

The header is plain decimal text (``lib.lua`` parses and rebuilds it with string operations;
numbers never pass through Lua's ``%.14g``). ``<first claimed ms>`` is empty until a claim sets
it, ``<error bytes>`` when there is no error.
``<spec>`` is `codec.encode_spec`'s JSON, which Lua never decodes: cjson would change numbers.
``<seq>`` is 14 hex digits that order equal due times by insertion (see `SeqSource`); a
scheduled timer's bucket member is ``<seq><id>``. While leased, ``<seq>`` numbers the claim
instead, and the lease member is ``<seq><id>``: expired leases return in claim order.
"""

from __future__ import annotations

import time

from tickwheel.model import Timer, restore
from tickwheel.stores.codec import decode_spec, state_of

SEQ_DIGITS = 14


def pack_new(timer: Timer, now_ms: int, seq: str, spec: str) -> str:
    """Encode a freshly scheduled timer (attempt 0, no error) created at `now_ms`."""
    return f"0,0,{timer.due_ms},{now_ms},{now_ms},{seq},{timer.queue},,|{spec}"


def unpack(timer_id: str, raw: bytes) -> Timer:
    """Rebuild a timer from its record."""
    head, _, rest = raw.partition(b"|")
    state, attempt, due, created, updated, _seq, queue, first, error_bytes = head.split(b",")
    error: str | None = None
    if error_bytes:
        size = int(error_bytes)
        error, rest = rest[:size].decode(), rest[size:]
    callback, payload, retry = decode_spec(rest)
    return restore(
        Timer,
        id=timer_id,
        due_ms=int(due),
        queue=queue.decode(),
        callback=callback,
        payload=payload,
        retry=retry,
        attempt=int(attempt),
        state=state_of(int(state)),
        created_ms=int(created),
        updated_ms=int(updated),
        last_error=error,
        first_claimed_ms=int(first) if first else None,
    )


def seq_of(raw: bytes) -> bytes:
    """Return a record's seq: its insertion order, or while leased its claim order."""
    return raw.split(b",", 6)[5]


class SeqSource:
    """Insertion sequence numbers: increasing in one process, roughly by time across processes.

    A number is the wall clock in microseconds, or one more than the last when several are taken
    within a microsecond, so stores in different processes interleave by when they inserted.
    Numbers stay below 2**53 (year 2255) so Lua adds to them exactly.
    """

    def __init__(self) -> None:
        self._last = 0

    def take(self, count: int = 1) -> int:
        """Reserve `count` consecutive numbers and return the first."""
        first = max(self._last + 1, time.time_ns() // 1000)
        self._last = first + count - 1
        return first

    @staticmethod
    def format(seq: int) -> str:
        return f"{seq:0{SEQ_DIGITS}x}"
