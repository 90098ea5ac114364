"""Cascading ahead of time for `TimingWheel`: upper buckets re-filed a slice per `advance`.

A plain hierarchical wheel re-files a whole upper bucket the moment its time comes: with 100k
timers due in the next few seconds that is one call of 100 ms while timers are due. Here the
next block of every level is its own half of the ring, so the upper bucket that feeds it
(the *source*) can be re-filed a slice per `advance` during the whole current block, and is
empty by the time any of its entries is due. While a source is being drained, it stays where
lookups can find it and takes the new entries that belong to it, keeping insertion order.
"""

from __future__ import annotations

from itertools import islice
from typing import Any

from tickwheel.core.wheel_layout import BITS, LAST, SLOT, K, T
from tickwheel.core.wheel_tombstones import WheelTombstones

# a source bucket is drained at least this many entries per advance
MIN_SLICE = 64


class WheelCascade(WheelTombstones[K, T]):
    """Moving entries down the levels: draining sources, and re-filing after a jump in time."""

    __slots__ = ()

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
            size = max(-(-len(source) // left), MIN_SLICE)
            self._place_all(list(islice(source.items(), size)), source, now)
            if not source:
                self._draining &= ~(1 << level)

    def _source(self, level: int, now: int) -> dict[K, T]:
        """Return the upper bucket that feeds the next block of `level`."""
        shift = (level + 1) * BITS
        return self._buckets[(level + 1) << 7 | ((now >> shift) + 1) & SLOT]

    @staticmethod
    def _deadline(level: int, now: int) -> int:
        """Return the tick by which the source of `level` must be drained.

        That is the start of the last bucket of the current block at `level`: from there on
        the next block of the level below starts to be fed from it.
        """
        shift = level * BITS
        return (((now >> (shift + BITS)) << BITS) | LAST) << shift

    def _place_all(self, items: list[tuple[K, T]], source: dict[K, T], now: int) -> None:
        """Move `items` out of `source` into the buckets they belong in at `now`."""
        for key, value in items:
            del source[key]
            self._file(key, value, now)

    def _file(self, key: K, value: T, now: int) -> None:
        """Put a pending entry (due after `now`) into its own bucket; reclaim a tombstone."""
        # _is_dead and _reclaim, inlined: every tombstone a cascade meets passes here
        due = self._due
        due_ms = due.get(key)
        if due_ms is None:  # a filed entry
            entry: Any = key
            if entry._wheel is None:
                self._filed_dead -= 1
                return
            due_ms = entry._due
        elif due_ms < 0:
            del due[key]
            return
        tick = self._tick_ms
        t = (due_ms if tick == 1 else -(-due_ms // tick)) - self._origin
        level = self._level(t, now)
        slot = (t >> (level * BITS)) & SLOT
        bucket = self._buckets[level << 7 | slot]
        if not bucket:
            self._occupied[level] |= 1 << slot
        bucket[key] = value

    def _refile(self, refile: list[dict[K, T]], now: int) -> dict[K, T]:
        """File entries of left-behind upper buckets again; return those due at `now`."""
        due = self._due
        tick = self._tick_ms
        now_due: dict[K, T] = {}
        for bucket in refile:
            for key, value in bucket.items():
                due_ms = due.get(key)
                if due_ms is None:  # a filed entry
                    entry: Any = key
                    if entry._wheel is None:
                        self._filed_dead -= 1
                        continue
                    due_ms = entry._due
                elif due_ms < 0:
                    del due[key]
                    continue
                if (due_ms if tick == 1 else -(-due_ms // tick)) - self._origin <= now:
                    now_due[key] = value
                else:
                    self._file(key, value, now)
        return now_due
