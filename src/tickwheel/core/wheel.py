"""Hierarchical hashed timing wheel over integer milliseconds, cascading ahead of time.

`TimingWheel` is assembled from one module per concept: `wheel_layout` (levels, buckets and
where an entry belongs), `wheel_tombstones` (lazy cancel and the sweep), `wheel_cascade`
(upper buckets re-filed ahead of time); this module holds the operations and expiry.

Per pending entry the wheel holds one slot in a key → due dict and one in its bucket dict (or,
from `add` until the next call that reads buckets, in a queue: `wheel_layout`): no per-entry
object, so a million pending timers add nothing for the cyclic garbage collector.
A caller that makes an object per timer anyway (a scheduler's handle) can file that object
instead, as a `WheelEntry`: it is its own key and value and carries its due time and whether it
is pending, so filing it looks nothing up (it is queued too) and cancelling it touches only it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tickwheel.core.wheel_cascade import WheelCascade
from tickwheel.core.wheel_layout import ALL, BITS, FILED, RING, SLOT, K, T, WheelEntry

__all__ = ["TimingWheel", "WheelEntry"]


class TimingWheel(WheelCascade[K, T]):
    """Timers keyed by `K` carrying a `T`, expired by `advance(now_ms)`.

    Pure: the caller supplies the time and receives what expired. Nothing is returned before
    ``now_ms >= due_ms``; with ``tick_ms > 1`` an entry fires at the first advance to a multiple
    of ``tick_ms`` at or after its due time, so it is at most ``tick_ms - 1`` ms late.

    ``add`` and ``cancel`` are O(1). ``advance`` costs O(levels) plus the non-empty buckets it
    passes plus the entries it expires, plus a slice of the upper buckets it re-files ahead of
    time; a driver that advances every tick never re-files more than a slice at once. It
    first files the entries added since the last call that read buckets (so does any such
    call), skipping those cancelled since.
    """

    __slots__ = ()

    def add(self, key: K, due_ms: int, value: T) -> None:
        """Schedule `value` under `key` for `due_ms`, replacing any entry with that key."""
        due = self._due
        old = due.get(key)
        if old is not None or len(due) > self._live:
            self._unfile(key, old)
        due[key] = due_ms
        self._live += 1
        # filed into its bucket by the next call that reads buckets (`_file_queued`)
        self._queued_keys.append(key)
        self._queued_values.append(value)

    def file(self, entry: T, due_ms: int) -> None:
        """File `entry`, a `WheelEntry` that is not pending, under itself for `due_ms`.

        No key is looked up: the entry is its own key. It is queued as `add` queues, and an
        entry cancelled before the next call that reads buckets is never put in one. File
        each entry once; `move` it to change its due time and cancel it to drop it.
        """
        item: Any = entry  # a WheelEntry, and the key it is filed under
        if item._wheel is not None:
            raise ValueError(f"entry: already filed, {entry!r}")
        item._due = due_ms
        item._wheel = self
        self._filed += 1
        # _crowded, inlined: timers that are cancelled soon leave tombstones most of the time
        dead = self._filed_dead
        if dead and (
            self._sweep_bucket >= 0
            or dead + len(self._due) > 2 * self._live + self._filed + self.SPARE_TOMBSTONES
        ):
            self._sweep_slice()
        self._queued_keys.append(item)
        self._queued_values.append(FILED)  # not the entry: one reference less for the collector

    def discard(self, entry: T) -> bool:
        """Cancel a filed `entry`; return whether it was pending (`WheelEntry.cancel`)."""
        item: WheelEntry = entry  # type: ignore[assignment]
        return item._wheel is self and item.cancel()

    def move(self, entry: T, due_ms: int) -> bool:
        """Make a filed `entry` due at `due_ms`, as if filed now; return whether it was pending."""
        item: Any = entry
        if item._wheel is not self:
            return False
        if self._queued_keys:
            self._file_queued()
        del self._bucket_of(item, item._due)[item]
        item._wheel = None
        self._filed -= 1
        self.file(entry, due_ms)
        return True

    def clear(self) -> None:
        """Drop every entry, keeping the time; filed entries stop being pending."""
        held: tuple[Iterable[K], ...] = (*self._buckets, self._overdue, self._queued_keys)
        for keys in held:
            for key in keys:
                if key not in self._due:
                    entry: Any = key
                    entry._wheel = None
        for bucket in (*self._buckets, self._overdue):
            bucket.clear()
        self._due.clear()
        self._live = 0
        self._occupied = [0] * len(self._occupied)
        self._draining = 0
        self._sweep_bucket, self._sweep_keys, self._sweep_pos = -1, [], 0
        self._filed = self._filed_dead = 0
        self._queued_keys, self._queued_values = [], []

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
        if due_ms is None or due_ms < 0:
            return None
        if self._queued_keys:
            self._file_queued()
        return self._bucket_of(key, due_ms)[key]

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
        if self._queued_keys:
            self._file_queued()
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
            start = low if level == 0 else max((low - 1) << (level * BITS), now + 1)
            if wake is None or start < wake:
                wake = start
        return None if wake is None else (wake + self._origin) * self._tick_ms

    def advance(self, now_ms: int) -> list[tuple[K, T]]:
        """Move time to `now_ms`; remove and return every entry due by then.

        Entries come in ``(due_ms, insertion)`` order. Time never moves back: an earlier
        `now_ms` only returns what was added overdue.
        """
        if self._queued_keys:
            self._file_queued()
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
            top = ((old ^ new).bit_length() - 1) // BITS
            if self._draining:
                self._finish_sources(old, new, top)
            self._now = new
            if (old ^ new) >> BITS:
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

    def _lowest(self, level: int, bits: int) -> int | None:
        """Return the lowest bucket number (``t >> 6L``) of a non-empty bucket at `level`."""
        now = self._now
        buckets = self._buckets
        # bucket numbers at this level run from `first` for 128 in ring order
        first = (now >> (level * BITS)) + 1
        turn = first & SLOT
        ring = ((bits >> turn) | (bits << (RING - turn))) & ALL
        base = level << 7
        tombstones = len(self._due) > self._live or self._filed_dead
        while ring:
            low = ring & -ring
            offset = low.bit_length() - 1
            bucket = buckets[base | (first + offset) & SLOT]
            if bucket and tombstones:
                self._drop_leading_tombstones(bucket)
            if bucket:
                return first + offset
            ring ^= low
            self._occupied[level] &= ~(1 << ((first + offset) & SLOT))
        return None

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
            shift = level * BITS
            # bucket numbers (t >> shift) that leave this level: lo .. hi
            lo, hi = (old >> shift) + 1, new >> shift
            if hi < lo:
                continue
            base = level << 7
            # the level holds numbers from lo on, at most a ring's worth
            for number in range(lo, min(hi, lo + SLOT) + 1):
                slot = number & SLOT
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
            if entry._wheel is not None:
                entry._wheel = None
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
