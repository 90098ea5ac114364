"""Indexed binary min-heap of keyed entries ordered by ``(due_ms, insertion)``.

Each entry is a small list ``[order, key, value, position]``: ``order`` folds the due time and an
insertion counter into one int so a comparison is a single int compare, and ``position`` lets
`cancel` and `reschedule` find the entry in O(1) and repair the heap in O(log n).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")

# insertion counters stay below this, so `due_ms * _SEQ_SPAN + seq` orders by due, then insertion
_SEQ_SPAN = 1 << 64

_ORDER, _KEY, _VALUE, _POS = 0, 1, 2, 3


class DelayHeap(Generic[K, T]):
    """A priority queue of keyed timers supporting cancel and reschedule in O(log n)."""

    __slots__ = ("_entries", "_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[list[Any]] = []
        self._entries: dict[K, list[Any]] = {}
        self._seq = 0

    def __len__(self) -> int:
        return len(self._heap)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def push(self, key: K, due_ms: int, value: T) -> None:
        """Schedule `value` under `key` for `due_ms`, replacing any entry with that key."""
        self._seq += 1
        order = due_ms * _SEQ_SPAN + self._seq
        entry = self._entries.get(key)
        if entry is not None:
            entry[_VALUE] = value
            self._move(entry, order)
            return
        heap = self._heap
        entry = [order, key, value, len(heap)]
        heap.append(entry)
        self._entries[key] = entry
        self._sift_up(entry)

    def cancel(self, key: K) -> bool:
        """Remove the entry under `key`; return whether there was one."""
        entry = self._entries.pop(key, None)
        if entry is None:
            return False
        heap = self._heap
        last = heap.pop()
        if last is not entry:
            last[_POS] = entry[_POS]
            heap[entry[_POS]] = last
            if last[_ORDER] < entry[_ORDER]:
                self._sift_up(last)
            else:
                self._sift_down(last)
        return True

    def reschedule(self, key: K, due_ms: int) -> bool:
        """Move the entry under `key` to `due_ms` (ordered as if inserted now); False if absent."""
        entry = self._entries.get(key)
        if entry is None:
            return False
        self._seq += 1
        self._move(entry, due_ms * _SEQ_SPAN + self._seq)
        return True

    def get(self, key: K) -> T | None:
        """Return the value pending under `key`, or None."""
        entry = self._entries.get(key)
        return None if entry is None else entry[_VALUE]

    def due_ms(self, key: K) -> int | None:
        """Return when the entry under `key` is due, or None."""
        entry = self._entries.get(key)
        return None if entry is None else entry[_ORDER] // _SEQ_SPAN

    def peek(self) -> tuple[K, T] | None:
        """Return the earliest ``(key, value)`` without removing it, or None when empty."""
        if not self._heap:
            return None
        top = self._heap[0]
        return top[_KEY], top[_VALUE]

    def next_due_ms(self) -> int | None:
        """Return the earliest due time, or None when empty."""
        return self._heap[0][_ORDER] // _SEQ_SPAN if self._heap else None

    def pop_due(self, now_ms: int, limit: int | None = None) -> list[tuple[K, T]]:
        """Remove and return up to `limit` entries due by `now_ms`, earliest first."""
        heap = self._heap
        entries = self._entries
        bound = (now_ms + 1) * _SEQ_SPAN
        out: list[tuple[K, T]] = []
        while heap and heap[0][_ORDER] < bound and (limit is None or len(out) < limit):
            top = heap[0]
            last = heap.pop()
            if heap:
                last[_POS] = 0
                heap[0] = last
                self._sift_down(last)
            del entries[top[_KEY]]
            out.append((top[_KEY], top[_VALUE]))
        return out

    def _move(self, entry: list[Any], order: int) -> None:
        earlier = order < entry[_ORDER]
        entry[_ORDER] = order
        if earlier:
            self._sift_up(entry)
        else:
            self._sift_down(entry)

    def _sift_up(self, entry: list[Any]) -> None:
        heap = self._heap
        order = entry[_ORDER]
        pos = entry[_POS]
        while pos:
            parent_pos = (pos - 1) >> 1
            parent = heap[parent_pos]
            if parent[_ORDER] < order:
                break
            heap[pos] = parent
            parent[_POS] = pos
            pos = parent_pos
        heap[pos] = entry
        entry[_POS] = pos

    def _sift_down(self, entry: list[Any]) -> None:
        heap = self._heap
        size = len(heap)
        order = entry[_ORDER]
        pos = entry[_POS]
        child_pos = 2 * pos + 1
        while child_pos < size:
            child = heap[child_pos]
            right_pos = child_pos + 1
            if right_pos < size and heap[right_pos][_ORDER] < child[_ORDER]:
                child_pos = right_pos
                child = heap[right_pos]
            if order < child[_ORDER]:
                break
            heap[pos] = child
            child[_POS] = pos
            pos = child_pos
            child_pos = 2 * pos + 1
        heap[pos] = entry
        entry[_POS] = pos
