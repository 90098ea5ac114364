"""The layout of `TimingWheel`: levels of two-block rings of buckets, and `WheelEntry`.

Time is counted in ticks. Level ``L`` has a ring of 128 buckets, each spanning ``64**L`` ticks:
two *blocks* of 64 buckets, the block the current tick is in and the next one. An entry due at
tick ``t`` lives at the lowest level whose block of ``t`` is the current or the next, in bucket
``(t >> 6L) & 127``. Three facts follow and everything rests on them:

* every entry of level ``L`` is due after every entry of level ``L - 1``, so the lowest
  non-empty bucket of the lowest non-empty level holds the next due entry;
* entries with the same due tick share one bucket, and buckets keep insertion order, so a stable
  sort by due time yields ``(due_ms, insertion)`` order without a sequence number;
* the bucket an entry sits in is a function of its due tick and the current tick, so `cancel`
  finds it without a stored pointer.

`add` and `file` put nothing in a bucket: they queue the entry, and the queue is filed in order by
the next call that reads buckets (`advance`, `next_due_ms`, `get`, `move`, a re-add, a sweep). At
a million timers a bucket's table is one more cache miss per add: a timer cancelled before that
call never pays it, and the others are filed in one loop.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Hashable
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")

BITS = 6
RING = 128  # two blocks of 64 buckets per level
SLOT = RING - 1
LAST = 63  # the last bucket of a block
ALL = (1 << RING) - 1
# the value queued beside a filed entry: it is its own value, and its due time is its own
FILED: Any = object()


class WheelEntry:
    """A timer that is its own key and value, filed with `TimingWheel.file`.

    `_due` holds its due time once filed, and keeps it after; `_wheel` holds the wheel while it
    is pending, None before and after. Only the wheel writes them. Pending is told by identity,
    not by the due time: at a million timers that int is one more cache miss per cancel.
    """

    __slots__ = ("_due", "_wheel")

    def __init__(self, due_ms: int) -> None:
        self._due = due_ms
        self._wheel: WheelLayout[Any, Any] | None = None

    @property
    def due_ms(self) -> int:
        """When the entry is, or was, due (epoch ms)."""
        return self._due

    def cancel(self) -> bool:
        """Stop the entry; return whether it was still pending.

        Left in its bucket, it is a tombstone until the bucket goes or a sweep takes it. One
        call, no lookup: a scheduler's handle is this entry, and its `cancel` is this method.
        """
        wheel = self._wheel
        if wheel is None:
            return False
        self._wheel = None
        wheel._filed -= 1
        overdue = wheel._overdue
        if overdue and self in overdue:
            del overdue[self]
        else:
            wheel._filed_dead += 1
        return True


class WheelLayout(Generic[K, T]):
    """The wheel's state and where an entry belongs in it: levels, buckets and their bits."""

    __slots__ = (
        "_buckets",
        "_draining",
        "_due",
        "_ends",
        "_filed",
        "_filed_dead",
        "_live",
        "_now",
        "_occupied",
        "_origin",
        "_overdue",
        "_queued_keys",
        "_queued_values",
        "_sweep_bucket",
        "_sweep_keys",
        "_sweep_pos",
        "_tick_ms",
    )

    def __init__(self, now_ms: int = 0, tick_ms: int = 1) -> None:
        if tick_ms < 1:
            raise ValueError(f"tick_ms: must be at least 1, got {tick_ms!r}")
        if now_ms < 0:
            raise ValueError(f"now_ms: must not be negative, got {now_ms!r}")
        self._tick_ms = tick_ms
        # ticks count from the first one, so that for days they stay one-digit Python ints
        self._origin = now_ms // tick_ms
        self._now = 0
        # key -> due_ms while pending; -> ~due_ms (negative) while a tombstone in its bucket
        self._due: dict[K, int] = {}
        # keys pending in `_due`; the rest there are tombstones
        self._live = 0
        self._overdue: dict[K, T] = {}
        # bucket (level, slot) is self._buckets[level << 7 | slot]
        self._buckets: list[dict[K, T]] = []
        # one bit per bucket that may be non-empty; removals leave bits set, scans clear them
        self._occupied: list[int] = []
        # for each level below the top one, the first tick past its next block: a tick t > now
        # belongs at the first level whose end is past t
        self._ends: list[int] = []
        # one bit per level whose source (the upper bucket feeding its next block) is draining
        self._draining = 0
        # a sweep in progress: the bucket index it is in (-1: none), that bucket's keys when
        # the sweep reached it, and how many of them it has looked at
        self._sweep_bucket = -1
        self._sweep_keys: list[K] = []
        self._sweep_pos = 0
        # filed entries (`WheelEntry`) pending, and discarded but still in a bucket
        self._filed = 0
        self._filed_dead = 0
        # keys `add` has queued, in order, and their values: in `_due`, in no bucket yet
        self._queued_keys: list[K] = []
        self._queued_values: list[T] = []

    def __len__(self) -> int:
        return self._live + self._filed

    def __contains__(self, key: object) -> bool:
        due: dict[Any, int] = self._due
        return due.get(key, -1) >= 0

    @property
    def now_ms(self) -> int:
        """The time of the last advance, rounded down to a tick."""
        return (self._now + self._origin) * self._tick_ms

    def _level(self, t: int, now: int) -> int:
        """Return the lowest level whose current or next block holds tick `t` (> now)."""
        level = ((t ^ now).bit_length() - 1) // BITS
        # one level lower still works when t is in the next block there (a carry)
        while level and (t >> (level * BITS)) - (now >> (level * BITS)) <= 1:
            level -= 1
        if level + 1 >= len(self._occupied):
            self._grow(level + 1)  # the level above holds this one's draining source
        return level

    def _bucket_of(self, key: K, due_ms: int) -> dict[K, T]:
        """Return the bucket holding `key`, due at `due_ms`: its own, or its draining source."""
        tick = self._tick_ms
        t = (due_ms if tick == 1 else -(-due_ms // tick)) - self._origin
        now = self._now
        if t <= now:
            return self._overdue
        level = self._level(t, now)
        shift = level * BITS
        bucket = self._buckets[level << 7 | (t >> shift) & SLOT]
        if key in bucket:
            return bucket
        return self._buckets[(level + 1) << 7 | (t >> (shift + BITS)) & SLOT]

    def _file_queued(self) -> None:
        """File the entries `add` and `file` queued, in the order they came; forget those
        cancelled since.

        Nothing but `add`, `file` and cancels change the wheel while entries are queued, so
        each goes where it would have gone at once: its own bucket, the source of the next
        block while that drains, or overdue.
        """
        keys, values = self._queued_keys, self._queued_values
        self._queued_keys, self._queued_values = [], []
        due = self._due
        tick, origin, now = self._tick_ms, self._origin, self._now
        buckets, occupied, overdue = self._buckets, self._occupied, self._overdue
        draining, filed = self._draining, FILED
        for key, value in zip(keys, values, strict=True):
            if value is filed:  # a filed entry: its own key and value, carrying its due time
                entry: Any = key
                value = entry
                if entry._wheel is None:
                    self._filed_dead -= 1  # cancelled while queued: it was never in a bucket
                    continue
                due_ms = entry._due
            else:
                due_ms = due[key]
                if due_ms < 0:
                    del due[key]  # cancelled while queued: it was never in a bucket
                    continue
            t = (due_ms if tick == 1 else -(-due_ms // tick)) - origin
            if t <= now:
                overdue[key] = value
                continue
            # _level by bisection, inlined: the hot path
            ends = self._ends
            level = bisect_right(ends, t)
            if level == len(ends):
                level = self._level(t, now)  # a level the wheel does not have yet
            shift = level * BITS
            # while the source of the next block drains, new entries join it, behind older
            # ones; a source has entries only while its level's draining bit is set
            if (
                draining
                and (above := t >> (shift + BITS)) != now >> (shift + BITS)
                and buckets[(level + 1) << 7 | above & SLOT]
            ):
                buckets[(level + 1) << 7 | above & SLOT][key] = value
            else:
                slot = (t >> shift) & SLOT
                bucket = buckets[level << 7 | slot]
                if not bucket:  # a non-empty bucket has its bit set already
                    occupied[level] |= 1 << slot
                bucket[key] = value

    def _grow(self, level: int) -> None:
        """Add levels up to `level`, each with its ring of empty buckets."""
        if len(self._occupied) > level:
            return
        while len(self._occupied) <= level:
            self._occupied.append(0)
            self._buckets.extend({} for _ in range(RING))
        self._set_ends()

    def _set_ends(self) -> None:
        """Recompute `_ends` after time moves to another block or a level is added."""
        now = self._now
        self._ends = [((now >> s) + 2) << s for s in range(BITS, BITS * len(self._occupied), BITS)]
