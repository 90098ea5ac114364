"""Lazy cancel for `TimingWheel`: tombstones in place, reclaimed as buckets go or by a sweep.

`cancel` turns the key's due time in the due dict into a *tombstone*, its bitwise complement
(a negative int), in the slot it has just looked up, and leaves the bucket alone (a filed entry
just stops being pending): at a million timers each other dict or bucket touched would be one
more cache miss, costing more than the rest of the call. A tombstone is reclaimed when its
bucket is re-filed or expires (or heads the bucket `next_due_ms` looks at), at once when its
key is added again, when the queue of `add` it is still in is filed, and by a sweep once
tombstones outnumber pending entries by `SPARE_TOMBSTONES`. The sweep visits every bucket,
`SWEEP_SLICE` entries per `add` or `file`, so no call pauses for long; its cost is paid by the
adds that made the tombstones, and the wheel holds no more than about twice its peak of
pending entries plus that allowance.
"""

from __future__ import annotations

from typing import Any

from tickwheel.core.wheel_layout import K, T, WheelEntry, WheelLayout


class WheelTombstones(WheelLayout[K, T]):
    """Telling tombstones from pending entries, and reclaiming them."""

    # tombstones allowed beyond the number of pending entries before `add` sweeps them out
    SPARE_TOMBSTONES = 4096
    # entries a sweep looks at per add: a sweep ends within (entries / SWEEP_SLICE) adds
    SWEEP_SLICE = 32

    __slots__ = ()

    def _unfile(self, key: K, old: int | None) -> None:
        """Before `key` is added: remove its entry or its tombstone (`old` is its value in the
        due dict); sweep if tombstones pile up.

        A key has at most one entry in the buckets, so a tombstone goes before its key returns;
        the caller overwrites its slot in the due dict.
        """
        if old is not None and self._queued_keys:
            self._file_queued()  # which forgets `key` if it was cancelled while queued
            old = self._due.get(key)
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
        return entry._wheel is None

    def _reclaim(self, key: K) -> None:
        """Forget the tombstone `key` once it has left its bucket."""
        if self._due.pop(key, None) is None:
            self._filed_dead -= 1

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
        if self._queued_keys:  # keys cancelled while queued go here, not in a bucket
            self._file_queued()
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
                    if entry._wheel is None:
                        del bucket[key]
                        self._filed_dead -= 1
            budget -= end - pos
            self._sweep_pos = end
        if budget > 0:  # every bucket swept, or no tombstone left
            self._sweep_bucket, self._sweep_keys, self._sweep_pos = -1, [], 0
