"""Binary min-heap of keyed entries ordered by ``(due_ms, insertion)``, sifted by `heapq`'s C code.

Each entry is a small list ``[due_ms, seq, key, value]``: ``seq`` counts insertions, so two
entries compare by due time, then insertion, in C, and never get to compare keys or values.
A dict maps each key to its entry. `cancel` and `reschedule` are lazy: the old entry is marked
dead where it lies (its value replaced by `DEAD`) and skipped when it surfaces, so no entry
needs to know its position. Dead entries at the top are dropped at once, so the top is
always pending; once dead entries outnumber pending ones by `SPARE_DEAD`, the heap is rebuilt
without them (O(n), at most once per that many cancels).
"""

from __future__ import annotations

from collections.abc import Hashable
from heapq import heapify, heappop, heappush
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")

# the value of a cancelled entry still in the heap; the delay queues' heaps use it too
DEAD: Any = object()


def drop_dead_top(heap: list[list[Any]]) -> int:
    """Pop the dead entries at the top of `heap`; return how many."""
    dropped = 0
    while heap and heap[0][3] is DEAD:
        heappop(heap)
        dropped += 1
    return dropped


def drop_all_dead(heap: list[list[Any]]) -> None:
    """Rebuild `heap` in place without its dead entries: O(n)."""
    heap[:] = [entry for entry in heap if entry[3] is not DEAD]
    heapify(heap)


class DelayHeap(Generic[K, T]):
    """A priority queue of keyed timers supporting cancel and reschedule in O(log n)."""

    # dead entries allowed beyond the number of pending ones before the heap is rebuilt
    SPARE_DEAD = 1024

    __slots__ = ("_dead", "_entries", "_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[list[Any]] = []
        self._entries: dict[K, list[Any]] = {}
        self._seq = 0
        self._dead = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def push(self, key: K, due_ms: int, value: T) -> bool:
        """Schedule `value` under `key` for `due_ms`, replacing any entry with that key.

        Returns whether the entry is now the earliest, so a waiting consumer needs waking.
        """
        self._seq = seq = self._seq + 1
        entry = [due_ms, seq, key, value]
        entries = self._entries
        old = entries.get(key)
        entries[key] = entry
        heap = self._heap
        heappush(heap, entry)
        if old is not None:
            self._bury(old)
        return heap[0] is entry

    def cancel(self, key: K) -> bool:
        """Remove the entry under `key`; return whether there was one."""
        entry = self._entries.pop(key, None)
        if entry is None:
            return False
        self._bury(entry)
        return True

    def reschedule(self, key: K, due_ms: int) -> bool:
        """Move the entry under `key` to `due_ms` (ordered as if inserted now); False if absent."""
        entry = self._entries.get(key)
        if entry is None:
            return False
        self.push(key, due_ms, entry[3])
        return True

    def get(self, key: K) -> T | None:
        """Return the value pending under `key`, or None."""
        entry = self._entries.get(key)
        return None if entry is None else entry[3]

    def due_ms(self, key: K) -> int | None:
        """Return when the entry under `key` is due, or None."""
        entry = self._entries.get(key)
        return None if entry is None else entry[0]

    def peek(self) -> tuple[K, T] | None:
        """Return the earliest ``(key, value)`` without removing it, or None when empty."""
        if not self._heap:
            return None
        top = self._heap[0]
        return top[2], top[3]

    def next_due_ms(self) -> int | None:
        """Return the earliest due time, or None when empty."""
        return self._heap[0][0] if self._heap else None

    def pop_one(self, now_ms: int) -> tuple[K, T] | None:
        """Remove and return the earliest ``(key, value)`` if it is due by `now_ms`, else None."""
        heap = self._heap
        if not heap or heap[0][0] > now_ms:
            return None
        _, _, key, value = heappop(heap)
        del self._entries[key]
        if heap and heap[0][3] is DEAD:
            self._trim()
        return key, value

    def pop_due(self, now_ms: int, limit: int | None = None) -> list[tuple[K, T]]:
        """Remove and return up to `limit` entries due by `now_ms`, earliest first."""
        heap = self._heap
        entries = self._entries
        out: list[tuple[K, T]] = []
        while heap and heap[0][0] <= now_ms and (limit is None or len(out) < limit):
            _, _, key, value = heappop(heap)
            del entries[key]
            out.append((key, value))
            if heap and heap[0][3] is DEAD:
                self._trim()
        return out

    def _bury(self, entry: list[Any]) -> None:
        """Mark a replaced or cancelled entry dead where it lies; keep the top pending."""
        entry[3] = DEAD
        self._dead += 1
        heap = self._heap
        if heap[0] is entry:
            self._trim()
        elif self._dead > len(self._entries) + self.SPARE_DEAD:
            drop_all_dead(heap)
            self._dead = 0

    def _trim(self) -> None:
        """Drop the dead entries at the top."""
        self._dead -= drop_dead_top(self._heap)
