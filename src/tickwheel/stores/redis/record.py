"""The Redis record of one timer, both ways: mutable fields Lua edits as text, then the spec.

::

    <state>,<attempt>,<due_ms>,<created>,<updated_ms>,<seq>,<queue>,<first claimed ms>,
    <error bytes>[.<deferrals>]|<error><spec>

The header is plain text Lua parses and rebuilds with string operations (``lib.lua``); numbers
Lua writes are decimal and never pass through Lua's ``%.14g``. Every pending timer stores a
header, so each byte saved there is a megabyte saved at a million pending timers:

- ``<due_ms>`` and ``<created>`` are base 36: only Python writes them; Lua reads the due time
  with ``tonumber(text, 36)`` (exact below 2**53) and passes both through;
- ``<updated_ms>`` is empty while it equals the creation time (a timer never touched since);
- ``<queue>`` is empty for the default queue;
- ``<seq>`` is `SEQ_DIGITS` base-62 digits whose byte order is their numeric order.

``<first claimed ms>`` is empty until a claim sets it, ``<error bytes>`` when there is no error;
``.<deferrals>`` (claims handed back unsent) is absent until defer.lua adds it: a suffix of the
error field, so the scripts that match a header up to that field need not know of it.
``<spec>`` is `codec.encode_spec`'s JSON, which Lua never decodes: cjson would change numbers.
``<seq>`` orders equal due times by insertion (see `SeqSource`); a scheduled timer's bucket
member is ``<seq><id>``. While leased, ``<seq>`` numbers the claim instead, and the lease member
is ``<seq><id>``: expired leases return in claim order.

add.lua takes new records as one ARGV string of ``<id>\\n<record>\\n`` lines
(`RecordCodec.lines`): one argument instead of two per timer halves the client's encoding work.
"""

from __future__ import annotations

import string
import time
from collections.abc import Sequence

from tickwheel.model import State, Timer
from tickwheel.stores.codec import SpecCache, SpecCodec, state_code
from tickwheel.stores.rebuild import SETTERS

SEQ_DIGITS = 9  # 62**9 > 2**53: every seq SeqSource hands out fits
# where the id starts in a near-set member, <length of the due><due, base 36><seq><id>, by its
# first byte (lib.lua near_member: the due has 8 to 11 digits below 2**53)
NEAR_ID_AT = {ord(length): int(length, 36) + 1 + SEQ_DIGITS for length in "89ab"}
DEFAULT_QUEUE = "default"  # stored as an empty field
_DIGITS = string.digits + string.ascii_uppercase + string.ascii_lowercase  # ascending bytes
_PAIRS = [a + b for a in _DIGITS for b in _DIGITS]
_B36 = string.digits + string.ascii_lowercase
_PAIRS36 = [a + b for a in _B36 for b in _B36]  # 36**2 = 1,296 two-digit strings
_B36_FAST = 36**8
_STATES = {str(state_code(state)).encode(): state for state in State}  # the header's <state>
_new_timer = object.__new__
(
    _set_id, _set_due_ms, _set_queue, _set_callback, _set_payload, _set_retry, _set_attempt,
    _set_state, _set_created_ms, _set_updated_ms, _set_last_error, _set_first_claimed_ms,
    _set_deferrals, _set_trace_parent, _set_trace_state,
) = (SETTERS[name] for name in (
    "id", "due_ms", "queue", "callback", "payload", "retry", "attempt", "state", "created_ms",
    "updated_ms", "last_error", "first_claimed_ms", "deferrals", "trace_parent", "trace_state",
))  # fmt: skip


def base36(n: int) -> str:
    """Write a non-negative integer in base 36 (``int(text, 36)`` reads it back).

    Below 36**8 (epoch ms until 2059) it is 8 digits, leading zeros kept: four table lookups.
    """
    if n < _B36_FAST:
        high, low = divmod(n, 1_679_616)
        return (
            _PAIRS36[high // 1296]
            + _PAIRS36[high % 1296]
            + _PAIRS36[low // 1296]
            + _PAIRS36[low % 1296]
        )
    if n < 0:
        return "-" + base36(-n)
    out = ""
    while True:
        n, digit = divmod(n, 36)
        out = _B36[digit] + out
        if not n:
            return out


def pack_new(timer: Timer, created: str, seq: str, spec: str) -> str:
    """Encode a freshly scheduled timer (attempt 0, no error); `created` is `base36(now_ms)`."""
    queue = "" if timer.queue == DEFAULT_QUEUE else timer.queue
    return f"0,0,{base36(timer.due_ms)},{created},,{seq},{queue},,|{spec}"


class RecordCodec:
    """Writes and reads the records of one store; it keeps the decoded specs its timers share."""

    def __init__(self) -> None:
        self._spec_parts = SpecCodec().parts

    @staticmethod
    def lines(timers: Sequence[Timer], now_ms: int, seqs: Sequence[str]) -> list[str]:
        """Encode freshly scheduled timers as add.lua reads them, one ``<id>\\n<record>\\n``
        each; `seqs` are their formatted insertion seqs."""
        specs = SpecCache()
        created = base36(now_ms)
        return [
            f"{timer.id}\n{pack_new(timer, created, seq, specs.encode(timer))}\n"
            for timer, seq in zip(timers, seqs, strict=True)
        ]

    def unpack(self, timer_id: str, raw: bytes) -> Timer:
        """Rebuild a timer from its record (`stored_timer`'s slot sets, inlined: a claim
        decodes one record per timer)."""
        head, _, rest = raw.partition(b"|")
        state, attempt, due, created, updated, _seq, queue, first, error_field = head.split(b",")
        error: str | None = None
        deferrals = 0
        if error_field:
            error_bytes, _, more = error_field.partition(b".")
            if more:
                deferrals = int(more)
            if error_bytes:
                size = int(error_bytes)
                error, rest = rest[:size].decode(), rest[size:]
        callback, payload, retry, trace_parent, trace_state = self._spec_parts(rest)
        created_ms = int(created, 36)
        timer = _new_timer(Timer)
        _set_id(timer, timer_id)
        _set_due_ms(timer, int(due, 36))
        _set_queue(timer, queue.decode() if queue else DEFAULT_QUEUE)
        _set_callback(timer, callback)
        _set_payload(timer, payload)
        _set_retry(timer, retry)
        _set_attempt(timer, int(attempt))
        _set_state(timer, _STATES[state])
        _set_created_ms(timer, created_ms)
        _set_updated_ms(timer, int(updated) if updated else created_ms)
        _set_last_error(timer, error)
        _set_first_claimed_ms(timer, int(first) if first else None)
        _set_deferrals(timer, deferrals)
        _set_trace_parent(timer, trace_parent)
        _set_trace_state(timer, trace_state)
        return timer


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
        """`SEQ_DIGITS` base-62 digits: fixed width, so byte order is numeric order."""
        high, low = divmod(seq, 62**8)
        b, a = divmod(low, 62**4)
        pairs = _PAIRS
        return (
            _DIGITS[high] + pairs[b // 3844] + pairs[b % 3844] + pairs[a // 3844] + pairs[a % 3844]
        )

    @staticmethod
    def formats(first: int, count: int) -> list[str]:
        """`format` of `count` consecutive numbers from `first`: the last two digits vary."""
        out: list[str] = []
        n, end = first, first + count
        while n < end:
            low = n % 3844
            stop = min(end, n - low + 3844)
            prefix = SeqSource.format(n)[:-2]
            out += [prefix + pair for pair in _PAIRS[low : low + stop - n]]
            n = stop
        return out
