"""Hierarchical hashed timing wheel over integer milliseconds, cascading ahead of time.

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

A plain hierarchical wheel re-files a whole upper bucket the moment its time comes: with 100k
timers due in the next few seconds that is one call of 100 ms while timers are due. Here the
next block of every level is its own half of the ring, so the upper bucket that feeds it
(the *source*) can be re-filed a slice per `advance` during the whole current block, and is
empty by the time any of its entries is due. While a source is being drained, it stays where
lookups can find it and takes the new entries that belong to it, keeping insertion order.

Per pending entry the wheel holds one slot in a key → due dict and one in its bucket dict: no
per-entry object, so a million pending timers add nothing for the cyclic garbage collector.
A caller that makes an object per timer anyway (a scheduler's handle) can file that object
instead, as a `WheelEntry`: it is its own key and value and carries its due time and whether it
is pending, so filing it touches only its bucket and cancelling it only itself.

`cancel` is lazy: it turns the key's due time in the due dict into a *tombstone*, its bitwise
complement (a negative int), in the slot it has just looked up, and leaves the bucket alone (a
filed entry just stops being pending): at a million timers each other dict or bucket touched
would be one more cache miss, costing more than the rest of the call. A tombstone is
reclaimed when its bucket is re-filed or expires (or heads the bucket `next_due_ms` looks at),
at once when its key is added again, and by a sweep once tombstones outnumber pending entries
by `SPARE_TOMBSTONES`. The sweep visits every bucket, `SWEEP_SLICE` entries per `add` or
`file`, so no call pauses for long; its cost is paid by the adds that made the tombstones, and
the wheel holds no more than about twice its peak of pending entries plus that allowance.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Hashable
from itertools import islice
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")

_BITS = 6
_RING = 128  # two blocks of 64 buckets per level
_SLOT = _RING - 1
_LAST = 63  # the last bucket of a block
_ALL = (1 << _RING) - 1
# a source bucket is drained at least this many entries per advance
_MIN_SLICE = 64


class WheelEntry:
    """A timer that is its own key and value, filed with `TimingWheel.file`.

    One slot says when it is due and whether it is pending: `_due` holds the due time from
    filing until the entry fires or is discarded, its bitwise complement (negative) before and
    after. Only the wheel writes it; `due_ms` reads it.
    """

    __slots__ = ("_due",)

    def __init__(self, due_ms: int) -> None:
        self._due = ~due_ms

    @property
    def due_ms(self) -> int:
        """When the entry is, or was, due (epoch ms)."""
        due = self._due
        return due if due >= 0 else ~due


class TimingWheel(Generic[K, T]):
    """Timers keyed by `K` carrying a `T`, expired by `advance(now_ms)`.

    Pure: the caller supplies the time and receives what expired. Nothing is returned before
    ``now_ms >= due_ms``; with ``tick_ms > 1`` an entry fires at the first advance to a multiple
    of ``tick_ms`` at or after its due time, so it is at most ``tick_ms - 1`` ms late.

    ``add`` and ``cancel`` are O(1). ``advance`` costs O(levels) plus the non-empty buckets it
    passes plus the entries it expires, plus a slice of the upper buckets it re-files ahead of
    time; a driver that advances every tick never re-files more than a slice at once.
    """

    # tombstones allowed beyond the number of pending entries before `add` sweeps them out
    SPARE_TOMBSTONES = 4096
    # entries a sweep looks at per add: a sweep ends within (entries / SWEEP_SLICE) adds
    SWEEP_SLICE = 32

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

    def __len__(self) -> int:
        return self._live + self._filed

    def __contains__(self, key: object) -> bool:
        due: dict[Any, int] = self._due
        return due.get(key, -1) >= 0

    @property
    def now_ms(self) -> int:
        """The time of the last advance, rounded down to a tick."""
        return (self._now + self._origin) * self._tick_ms

    def add(self, key: K, due_ms: int, value: T) -> None:
        """Schedule `value` under `key` for `due_ms`, replacing any entry with that key."""
        due = self._due
        old = due.get(key)
        if old is not None or len(due) > self._live:
            self._unfile(key, old)
        due[key] = due_ms
        self._live += 1
        tick = self._tick_ms
        t = (due_ms if tick == 1 else -(-due_ms // tick)) - self._origin
        now = self._now
        if t <= now:
            self._overdue[key] = value
        else:
            # _level by bisection, inlined here and in `file`: the hot path
            level = bisect_right(self._ends, t)
            if level == len(self._ends):
                level = self._level(t, now)  # a level the wheel does not have yet
            shift = level * _BITS
            buckets = self._buckets
            # while the source of the next block drains, new entries join it, behind older ones;
            # a source has entries only while its level's draining bit is set
            if (
                self._draining
                and (above := t >> (shift + _BITS)) != now >> (shift + _BITS)
                and buckets[(level + 1) << 7 | above & _SLOT]
            ):
                buckets[(level + 1) << 7 | above & _SLOT][key] = value
            else:
                slot = (t >> shift) & _SLOT
                bucket = buckets[level << 7 | slot]
                if not bucket:  # a non-empty bucket has its bit set already
                    self._occupied[level] |= 1 << slot
                bucket[key] = value

    def file(self, entry: T, due_ms: int) -> None:
        """File `entry`, a `WheelEntry` that is not pending, under itself for `due_ms`.

        No key is looked up: the entry is its own key. File each entry once; `move` it to
        change its due time and `discard` it to cancel it.
        """
        item: Any = entry  # a WheelEntry, and the key it is filed under
        if item._due >= 0:
            raise ValueError(f"entry: already filed, {entry!r}")
        item._due = due_ms
        self._filed += 1
        # _crowded, inlined: timers that are cancelled soon leave tombstones most of the time
        dead = self._filed_dead
        if dead and (
            self._sweep_bucket >= 0
            or dead + len(self._due) > 2 * self._live + self._filed + self.SPARE_TOMBSTONES
        ):
            self._sweep_slice()
        tick = self._tick_ms
        t = (due_ms if tick == 1 else -(-due_ms // tick)) - self._origin
        now = self._now
        if t <= now:
            self._overdue[item] = entry
        else:
            # as in `add`
            level = bisect_right(self._ends, t)
            if level == len(self._ends):
                level = self._level(t, now)  # a level the wheel does not have yet
            shift = level * _BITS
            buckets = self._buckets
            # while the source of the next block drains, new entries join it, behind older ones;
            # a source has entries only while its level's draining bit is set
            if (
                self._draining
                and (above := t >> (shift + _BITS)) != now >> (shift + _BITS)
                and buckets[(level + 1) << 7 | above & _SLOT]
            ):
                buckets[(level + 1) << 7 | above & _SLOT][item] = entry
            else:
                slot = (t >> shift) & _SLOT
                bucket = buckets[level << 7 | slot]
                if not bucket:  # a non-empty bucket has its bit set already
                    self._occupied[level] |= 1 << slot
                bucket[item] = entry

    def discard(self, entry: T) -> bool:
        """Cancel a filed `entry`; return whether it was pending. Left in its bucket, it is a
        tombstone until the bucket goes or a sweep takes it."""
        item: Any = entry
        due_ms = item._due
        if due_ms < 0:
            return False
        item._due = ~due_ms
        self._filed -= 1
        overdue = self._overdue
        if overdue and item in overdue:
            del overdue[item]
        else:
            self._filed_dead += 1
        return True

    def move(self, entry: T, due_ms: int) -> bool:
        """Make a filed `entry` due at `due_ms`, as if filed now; return whether it was pending."""
        item: Any = entry
        old = item._due
        if old < 0:
            return False
        del self._bucket_of(item, old)[item]
        item._due = ~old
        self._filed -= 1
        self.file(entry, due_ms)
        return True

    def clear(self) -> None:
        """Drop every entry, keeping the time; filed entries stop being pending."""
        for bucket in (*self._buckets, self._overdue):
            for key in bucket:
                if key not in self._due:
                    entry: Any = key
                    if entry._due >= 0:
                        entry._due = ~entry._due
            bucket.clear()
        self._due.clear()
        self._live = 0
        self._occupied = [0] * len(self._occupied)
        self._draining = 0
        self._sweep_bucket, self._sweep_keys, self._sweep_pos = -1, [], 0
        self._filed = self._filed_dead = 0

    def cancel(self, key: K) -> bool:
        """Remove the entry under `key`; return whether there was one."""
        due = self._due
        due_ms = due.get(key)
        if due_ms is None or due_ms < 0:
            return False
        self._live -= 1
        overdue = self._overdue
        if overdue and key in overdue:
            del overdue[key]
            del due[key]
        else:
            # the bucket keeps the entry as a tombstone: touching it would cost a cache miss
            due[key] = ~due_ms
        return True

    def get(self, key: K) -> T | None:
        """Return the value pending under `key`, or None."""
        due_ms = self._due.get(key)
        return None if due_ms is None or due_ms < 0 else self._bucket_of(key, due_ms)[key]

    def due_ms(self, key: K) -> int | None:
        """Return when the entry under `key` is due, or None."""
        due_ms = self._due.get(key)
        return None if due_ms is None or due_ms < 0 else due_ms

    def next_due_ms(self) -> int | None:
        """Return when the wheel next needs an `advance`, or None when it is empty.

        A driver may sleep until then: nothing is due sooner. It is the exact due tick of the
        earliest entry at level 0; for an upper bucket, the moment it starts draining into the
        level below; the next tick while a source is draining; now if something is overdue.
        """
        now = self._now
        if self._overdue:
            return self.now_ms
        if not self._live and not self._filed:
            return None  # tombstones at most
        wake = None
        for level, bits in enumerate(self._occupied):
            low = self._lowest(level, bits) if bits else None
            if low is None:
                continue
            # an upper bucket drains during the block before its own
            start = low if level == 0 else max((low - 1) << (level * _BITS), now + 1)
            if wake is None or start < wake:
                wake = start
        return None if wake is None else (wake + self._origin) * self._tick_ms

    def advance(self, now_ms: int) -> list[tuple[K, T]]:
        """Move time to `now_ms`; remove and return every entry due by then.

        Entries come in ``(due_ms, insertion)`` order. Time never moves back: an earlier
        `now_ms` only returns what was added overdue.
        """
        new = now_ms // self._tick_ms - self._origin
        old = self._now
        # (bucket, ordered) pairs, already in due order between them; `ordered` is False when
        # the bucket mixes due times and needs a stable sort of its own
        expired: list[tuple[dict[K, T], bool]] = []
        if self._overdue:
            expired.append((self._overdue, False))
            self._overdue = {}
        if new > old:
            # the highest level whose bucket number changes; blocks change below it
            top = ((old ^ new).bit_length() - 1) // _BITS
            if self._draining:
                self._finish_sources(old, new, top)
            self._now = new
            if (old ^ new) >> _BITS:
                self._set_ends()
            levels = self._occupied
            # idle ticks skip this: no bucket at or below the highest changed level
            refile = self._expire(old, new, top, expired) if any(levels[: top + 1]) else None
            late = self._refile(refile, new) if refile else None
            if late:
                # time jumped past a block: re-filed entries interleave with level 0's
                merged: dict[K, T] = {}
                for bucket, _ in expired:
                    merged.update(bucket)
                merged.update(late)
                expired = [(merged, False)]
            for level in range(min(top, len(levels) - 1)):
                if self._source(level, new):
                    self._draining |= 1 << level
            if self._draining:
                self._drain_sources(new)
        if not expired:
            return []
        return self._flatten(expired)

    def _unfile(self, key: K, old: int | None) -> None:
        """Before `key` is added: remove its entry or its tombstone (`old` is its value in the
        due dict); sweep if tombstones pile up.

        A key has at most one entry in the buckets, so a tombstone goes before its key returns;
        the caller overwrites its slot in the due dict.
        """
        if old is not None:
            if old >= 0:
                self._live -= 1
                del self._bucket_of(key, old)[key]
            else:
                del self._bucket_of(key, ~old)[key]
        if self._sweep_bucket >= 0 or self._crowded():
            self._sweep_slice()

    def _crowded(self) -> bool:
        """Whether tombstones outnumber pending entries by more than the allowance."""
        dead = len(self._due) - self._live + self._filed_dead
        return dead > self._live + self._filed + self.SPARE_TOMBSTONES

    def _is_dead(self, key: K) -> bool:
        """Whether a bucket's `key` is a tombstone: cancelled, or a filed entry discarded."""
        due_ms = self._due.get(key)
        if due_ms is not None:
            return due_ms < 0
        entry: WheelEntry = key  # type: ignore[assignment]
        return entry._due < 0

    def _reclaim(self, key: K) -> None:
        """Forget the tombstone `key` once it has left its bucket."""
        if self._due.pop(key, None) is None:
            self._filed_dead -= 1

    def _level(self, t: int, now: int) -> int:
        """Return the lowest level whose current or next block holds tick `t` (> now)."""
        level = ((t ^ now).bit_length() - 1) // _BITS
        # one level lower still works when t is in the next block there (a carry)
        while level and (t >> (level * _BITS)) - (now >> (level * _BITS)) <= 1:
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
        shift = level * _BITS
        bucket = self._buckets[level << 7 | (t >> shift) & _SLOT]
        if key in bucket:
            return bucket
        return self._buckets[(level + 1) << 7 | (t >> (shift + _BITS)) & _SLOT]

    def _lowest(self, level: int, bits: int) -> int | None:
        """Return the lowest bucket number (``t >> 6L``) of a non-empty bucket at `level`."""
        now = self._now
        buckets = self._buckets
        # bucket numbers at this level run from `first` for 128 in ring order
        first = (now >> (level * _BITS)) + 1
        turn = first & _SLOT
        ring = ((bits >> turn) | (bits << (_RING - turn))) & _ALL
        base = level << 7
        tombstones = len(self._due) > self._live or self._filed_dead
        while ring:
            low = ring & -ring
            offset = low.bit_length() - 1
            bucket = buckets[base | (first + offset) & _SLOT]
            if bucket and tombstones:
                self._drop_leading_tombstones(bucket)
            if bucket:
                return first + offset
            ring ^= low
            self._occupied[level] &= ~(1 << ((first + offset) & _SLOT))
        return None

    def _drop_leading_tombstones(self, bucket: dict[K, T]) -> None:
        """Reclaim the tombstones at the head of `bucket`, so that it is known to be live."""
        gone: list[K] = []
        for key in bucket:
            if not self._is_dead(key):
                break
            gone.append(key)
        for key in gone:
            del bucket[key]
            self._reclaim(key)

    def _sweep_slice(self) -> None:
        """Drop the tombstones among the next `SWEEP_SLICE` entries of a sweep of every bucket.

        Tombstones never move, and a key has at most one entry in the buckets, so a key that is
        a tombstone and is in the bucket being swept is that tombstone, however the bucket has
        changed since the sweep took its keys.
        """
        buckets = self._buckets
        budget = self.SWEEP_SLICE
        while budget > 0 and (len(self._due) > self._live or self._filed_dead):
            keys, pos = self._sweep_keys, self._sweep_pos
            if pos >= len(keys):
                index = self._sweep_bucket + 1
                while index < len(buckets) and not buckets[index]:
                    index += 1
                if index == len(buckets):
                    break
                keys, pos = list(buckets[index]), 0
                self._sweep_bucket, self._sweep_keys = index, keys
            bucket = buckets[self._sweep_bucket]
            end = min(pos + budget, len(keys))
            due = self._due
            for key in keys[pos:end]:
                if key not in bucket:
                    continue
                due_ms = due.get(key)
                if due_ms is not None:
                    if due_ms < 0:
                        del bucket[key]
                        del due[key]
                else:
                    entry: Any = key
                    if entry._due < 0:
                        del bucket[key]
                        self._filed_dead -= 1
            budget -= end - pos
            self._sweep_pos = end
        if budget > 0:  # every bucket swept, or no tombstone left
            self._sweep_bucket, self._sweep_keys, self._sweep_pos = -1, [], 0

    def _finish_sources(self, old: int, new: int, top: int) -> None:
        """Drain at once every source whose block ends, or whose deadline passes, by `new`."""
        for level in reversed(range(len(self._occupied) - 1)):
            if self._draining >> level & 1 and (level < top or self._deadline(level, old) <= new):
                source = self._source(level, old)
                self._place_all(list(source.items()), source, old)
                self._draining &= ~(1 << level)

    def _drain_sources(self, now: int) -> None:
        """Re-file a slice of every draining source, enough to finish before its deadline."""
        for level in reversed(range(len(self._occupied) - 1)):
            if not self._draining >> level & 1:
                continue
            source = self._source(level, now)
            left = max(self._deadline(level, now) - now, 1)
            size = max(-(-len(source) // left), _MIN_SLICE)
            self._place_all(list(islice(source.items(), size)), source, now)
            if not source:
                self._draining &= ~(1 << level)

    def _source(self, level: int, now: int) -> dict[K, T]:
        """Return the upper bucket that feeds the next block of `level`."""
        shift = (level + 1) * _BITS
        return self._buckets[(level + 1) << 7 | ((now >> shift) + 1) & _SLOT]

    @staticmethod
    def _deadline(level: int, now: int) -> int:
        """Return the tick by which the source of `level` must be drained.

        That is the start of the last bucket of the current block at `level`: from there on
        the next block of the level below starts to be fed from it.
        """
        shift = level * _BITS
        return (((now >> (shift + _BITS)) << _BITS) | _LAST) << shift

    def _place_all(self, items: list[tuple[K, T]], source: dict[K, T], now: int) -> None:
        """Move `items` out of `source` into the buckets they belong in at `now`."""
        for key, value in items:
            del source[key]
            self._file(key, value, now)

    def _file(self, key: K, value: T, now: int) -> None:
        """Put a pending entry (due after `now`) into its own bucket; reclaim a tombstone."""
        due_ms = self._due.get(key)
        if due_ms is None or due_ms < 0:
            if self._is_dead(key):
                self._reclaim(key)
                return
            entry: Any = key
            due_ms = entry._due
        tick = self._tick_ms
        t = (due_ms if tick == 1 else -(-due_ms // tick)) - self._origin
        level = self._level(t, now)
        slot = (t >> (level * _BITS)) & _SLOT
        bucket = self._buckets[level << 7 | slot]
        if not bucket:
            self._occupied[level] |= 1 << slot
        bucket[key] = value

    def _expire(
        self, old: int, new: int, top: int, expired: list[tuple[dict[K, T], bool]]
    ) -> list[dict[K, T]]:
        """Detach the level-0 buckets due at `new`; return upper buckets the move leaves behind.

        An upper bucket is left behind when its number falls below its level's new range;
        that happens only when time jumps past a block before the bucket could drain.
        """
        buckets = self._buckets
        occupied = self._occupied
        ordered = self._tick_ms == 1
        refile: list[dict[K, T]] = []
        for level in range(min(top + 1, len(occupied))):
            bits = occupied[level]
            if not bits:
                continue
            shift = level * _BITS
            # bucket numbers (t >> shift) that leave this level: lo .. hi
            lo, hi = (old >> shift) + 1, new >> shift
            if hi < lo:
                continue
            base = level << 7
            # the level holds numbers from lo on, at most a ring's worth
            for number in range(lo, min(hi, lo + _SLOT) + 1):
                slot = number & _SLOT
                if not bits >> slot & 1:
                    continue
                occupied[level] &= ~(1 << slot)
                bucket = buckets[base | slot]
                if bucket:
                    buckets[base | slot] = {}
                    if level == 0:
                        expired.append((bucket, ordered))
                    else:
                        refile.append(bucket)
        return refile

    def _refile(self, refile: list[dict[K, T]], now: int) -> dict[K, T]:
        """File entries of left-behind upper buckets again; return those due at `now`."""
        due = self._due
        tick = self._tick_ms
        now_due: dict[K, T] = {}
        for bucket in refile:
            for key, value in bucket.items():
                due_ms = due.get(key)
                if due_ms is None or due_ms < 0:
                    if self._is_dead(key):
                        self._reclaim(key)
                        continue
                    entry: Any = key
                    due_ms = entry._due
                if (due_ms if tick == 1 else -(-due_ms // tick)) - self._origin <= now:
                    now_due[key] = value
                else:
                    self._file(key, value, now)
        return now_due

    def _flatten(self, expired: list[tuple[dict[K, T], bool]]) -> list[tuple[K, T]]:
        """Flatten detached buckets, already in due order between them, and forget them."""
        due = self._due
        # whether buckets may hold filed entries, which are not in `due`
        mixed = self._filed or self._filed_dead
        out: list[tuple[K, T]] = []
        for bucket, ordered in expired:
            if len(due) > self._live:  # tombstones, somewhere
                gone = [key for key in bucket if due.get(key, 0) < 0]
                for key in gone:
                    del bucket[key]
                    del due[key]
            if mixed:
                self._fire_filed(bucket)
            if not bucket:
                continue
            if ordered or len(bucket) == 1:
                out.extend(bucket.items())
            else:
                out.extend(sorted(bucket.items(), key=self._due_of))
            if mixed:
                for key in bucket:
                    if due.pop(key, None) is not None:
                        self._live -= 1
            else:
                for key in bucket:
                    del due[key]
                self._live -= len(bucket)
        return out

    def _fire_filed(self, bucket: dict[K, T]) -> None:
        """Take the discarded filed entries out of an expired `bucket`; mark the others fired."""
        due = self._due
        gone: list[K] = []
        for key in bucket:
            if key in due:
                continue
            entry: Any = key
            due_ms = entry._due
            if due_ms >= 0:
                entry._due = ~due_ms
                self._filed -= 1
            else:
                gone.append(key)
        for key in gone:
            del bucket[key]
        self._filed_dead -= len(gone)

    def _due_of(self, item: tuple[K, T]) -> int:
        """The due time of an expired bucket's (key, value): a keyed entry's or a filed one's."""
        due_ms = self._due.get(item[0])
        entry: Any = item[0]
        return entry.due_ms if due_ms is None else due_ms  # a filed entry has just fired

    def _grow(self, level: int) -> None:
        if len(self._occupied) > level:
            return
        while len(self._occupied) <= level:
            self._occupied.append(0)
            self._buckets.extend({} for _ in range(_RING))
        self._set_ends()

    def _set_ends(self) -> None:
        """Recompute `_ends` after time moves to another block or a level is added."""
        now = self._now
        self._ends = [
            ((now >> s) + 2) << s for s in range(_BITS, _BITS * len(self._occupied), _BITS)
        ]
