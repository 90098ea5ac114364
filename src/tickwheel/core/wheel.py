"""Hierarchical hashed timing wheel over integer milliseconds.

The wheel has levels of 64 buckets; level ``L`` spans ``64**(L+1)`` ticks. An entry due at tick
``t`` lives at the level of the highest 6-bit digit in which ``t`` differs from the current tick,
in the bucket named by ``t``'s digit there (Varghese & Lauck's scheme 6, with the level chosen by
``t XOR now`` rather than by the remaining delay). Two facts follow and everything else rests on
them:

* every entry of level ``L`` is due before every entry of level ``L + 1``, so the earliest
  non-empty bucket of the lowest non-empty level holds the next due entry;
* entries with the same due tick always share one bucket, and buckets keep insertion order, so a
  stable sort by due time yields ``(due_ms, insertion)`` order without a sequence number.

Per pending entry the wheel holds one slot in a key → due dict and one in its bucket dict: no
per-entry object, so a million pending timers add nothing for the cyclic garbage collector to walk.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")

_BITS = 6
_SLOTS = 1 << _BITS
_DIGIT = _SLOTS - 1


class TimingWheel(Generic[K, T]):
    """Timers keyed by `K` carrying a `T`, expired by `advance(now_ms)`.

    Pure: the caller supplies the time and receives what expired. Nothing is returned before
    ``now_ms >= due_ms``; with ``tick_ms > 1`` an entry fires at the first advance to a multiple
    of ``tick_ms`` at or after its due time, so it is at most ``tick_ms - 1`` ms late.

    ``add`` and ``cancel`` are O(1). ``advance`` costs O(levels) plus the non-empty buckets it
    passes plus the entries it expires or cascades, however far time jumps.
    """

    __slots__ = ("_buckets", "_due", "_now", "_occupied", "_overdue", "_tick_ms")

    def __init__(self, now_ms: int = 0, tick_ms: int = 1) -> None:
        if tick_ms < 1:
            raise ValueError(f"tick_ms: must be at least 1, got {tick_ms!r}")
        if now_ms < 0:
            raise ValueError(f"now_ms: must not be negative, got {now_ms!r}")
        self._tick_ms = tick_ms
        self._now = now_ms // tick_ms
        self._due: dict[K, int] = {}
        self._overdue: dict[K, T] = {}
        # bucket (level, digit) is self._buckets[level << _BITS | digit]
        self._buckets: list[dict[K, T]] = []
        # one bit per bucket that may be non-empty; cancel leaves bits set, scans clear them
        self._occupied: list[int] = []

    def __len__(self) -> int:
        return len(self._due)

    def __contains__(self, key: object) -> bool:
        return key in self._due

    @property
    def now_ms(self) -> int:
        """The time of the last advance, rounded down to a tick."""
        return self._now * self._tick_ms

    def add(self, key: K, due_ms: int, value: T) -> None:
        """Schedule `value` under `key` for `due_ms`, replacing any entry with that key."""
        due = self._due
        if key in due:
            self._bucket_of(due[key]).pop(key)
        tick = self._tick_ms
        t = due_ms if tick == 1 else -(-due_ms // tick)
        now = self._now
        if t <= now:
            self._overdue[key] = value
        else:
            level = ((t ^ now).bit_length() - 1) // _BITS
            if level >= len(self._occupied):
                self._grow(level)
            digit = (t >> (level * _BITS)) & _DIGIT
            self._buckets[level << _BITS | digit][key] = value
            self._occupied[level] |= 1 << digit
        due[key] = due_ms

    def cancel(self, key: K) -> bool:
        """Remove the entry under `key`; return whether there was one."""
        due_ms = self._due.pop(key, None)
        if due_ms is None:
            return False
        # _bucket_of, inlined: cancel is half of the add+cancel hot path
        tick = self._tick_ms
        t = due_ms if tick == 1 else -(-due_ms // tick)
        now = self._now
        if t <= now:
            del self._overdue[key]
        else:
            level = ((t ^ now).bit_length() - 1) // _BITS
            del self._buckets[level << _BITS | (t >> (level * _BITS)) & _DIGIT][key]
        return True

    def get(self, key: K) -> T | None:
        """Return the value pending under `key`, or None."""
        due_ms = self._due.get(key)
        return None if due_ms is None else self._bucket_of(due_ms)[key]

    def due_ms(self, key: K) -> int | None:
        """Return when the entry under `key` is due, or None."""
        return self._due.get(key)

    def next_due_ms(self) -> int | None:
        """Return the start of the earliest non-empty bucket, or None when the wheel is empty.

        A driver may sleep until then: nothing is due sooner. At level 0 that is the exact due
        tick; higher up it is when the bucket cascades. A value at or before `now_ms` means
        something is overdue.
        """
        if self._overdue:
            return self._now * self._tick_ms
        buckets = self._buckets
        occupied = self._occupied
        for level, bits in enumerate(occupied):
            base = level << _BITS
            while bits:
                low = bits & -bits
                digit = low.bit_length() - 1
                if buckets[base | digit]:
                    shift = level * _BITS
                    start = (self._now >> (shift + _BITS) << (shift + _BITS)) | (digit << shift)
                    return start * self._tick_ms
                bits ^= low
                occupied[level] &= ~low
        return None

    def advance(self, now_ms: int) -> list[tuple[K, T]]:
        """Move time to `now_ms`; remove and return every entry due by then.

        Entries come in ``(due_ms, insertion)`` order. Time never moves back: an earlier
        `now_ms` only returns what was added overdue.
        """
        new = now_ms // self._tick_ms
        old = self._now
        # (bucket, ordered) pairs, already in due order between them; `ordered` is False when
        # the bucket mixes due times and needs a stable sort of its own
        expired: list[tuple[dict[K, T], bool]] = []
        if self._overdue:
            expired.append((self._overdue, False))
            self._overdue = {}
        if new > old:
            self._now = new
            top = ((old ^ new).bit_length() - 1) // _BITS
            levels = self._occupied
            # idle ticks end here: no bucket at or below the highest changed level
            if any(levels[: top + 1]) if top else levels and levels[0]:
                cascade = self._expire_levels(old, new, top, expired)
                if cascade:
                    expired.extend(self._replace(cascade, new))
        if not expired:
            return []
        return self._drain(expired)

    def _expire_levels(
        self, old: int, new: int, top: int, expired: list[tuple[dict[K, T], bool]]
    ) -> dict[K, T] | None:
        """Detach the buckets wholly due at `new`; return the bucket that must cascade.

        `top` is the highest level whose digit differs between `old` and `new`.
        """
        buckets = self._buckets
        occupied = self._occupied
        single_due_level0 = self._tick_ms == 1
        cascade = None
        for level in range(min(top + 1, len(occupied))):
            bits = occupied[level]
            if not bits:
                continue
            base = level << _BITS
            if level < top:
                # the current tick left this level's whole span: all of it is due
                hit = bits
                occupied[level] = 0
            elif level == 0:
                # a level-0 bucket holds one tick, so the one at the new digit is due too
                lo = old & _DIGIT
                hit = bits & ((2 << (new & _DIGIT)) - (2 << lo))  # digits lo+1 .. hi
                occupied[0] = bits & ~hit
            else:
                shift = level * _BITS
                lo = (old >> shift) & _DIGIT
                hi = (new >> shift) & _DIGIT
                hit = bits & ((1 << hi) - (2 << lo))  # digits lo+1 .. hi-1
                occupied[level] = bits & ~hit & ~(1 << hi)
                if bits >> hi & 1:
                    cascade = buckets[base | hi]
                    buckets[base | hi] = {}
            ordered = level == 0 and single_due_level0
            while hit:
                low = hit & -hit
                digit = low.bit_length() - 1
                bucket = buckets[base | digit]
                if bucket:
                    expired.append((bucket, ordered))
                    buckets[base | digit] = {}
                hit ^= low
        return cascade or None

    def _replace(self, cascade: dict[K, T], now: int) -> list[tuple[dict[K, T], bool]]:
        """Re-file a cascading bucket's entries one level down or lower; return those due."""
        due = self._due
        tick = self._tick_ms
        buckets = self._buckets
        occupied = self._occupied
        now_due: dict[K, T] = {}
        for key, value in cascade.items():
            due_ms = due[key]
            t = due_ms if tick == 1 else -(-due_ms // tick)
            if t <= now:
                now_due[key] = value
                continue
            level = ((t ^ now).bit_length() - 1) // _BITS
            digit = (t >> (level * _BITS)) & _DIGIT
            buckets[level << _BITS | digit][key] = value
            occupied[level] |= 1 << digit
        return [(now_due, False)] if now_due else []

    def _drain(self, expired: list[tuple[dict[K, T], bool]]) -> list[tuple[K, T]]:
        """Flatten detached buckets into (key, value) pairs in due order and forget them."""
        due = self._due
        out: list[tuple[K, T]] = []
        for bucket, ordered in expired:
            if ordered or len(bucket) == 1:
                out.extend(bucket.items())
            else:
                out.extend(sorted(bucket.items(), key=lambda kv: due[kv[0]]))
            for key in bucket:
                del due[key]
        return out

    def _bucket_of(self, due_ms: int) -> dict[K, T]:
        """Return the bucket an entry due at `due_ms` sits in now."""
        tick = self._tick_ms
        t = due_ms if tick == 1 else -(-due_ms // tick)
        now = self._now
        if t <= now:
            return self._overdue
        level = ((t ^ now).bit_length() - 1) // _BITS
        return self._buckets[level << _BITS | (t >> (level * _BITS)) & _DIGIT]

    def _grow(self, level: int) -> None:
        while len(self._occupied) <= level:
            self._occupied.append(0)
            self._buckets.extend({} for _ in range(_SLOTS))
