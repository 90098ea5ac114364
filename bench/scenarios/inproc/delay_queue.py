"""Phase 3: DelayQueue put + get in one thread, beside the stdlib's queue.Queue."""

from __future__ import annotations

import heapq
import queue
import random
import threading
import time
from collections.abc import Callable

from harness.report import Table, fmt, progress

from scenarios.inproc.workload import NS, SEED, fresh
from tickwheel import DelayQueue

GO_DELAYQUEUE_NS = 477.0  # reported by the Go heap DelayQueue; a reference constant, not measured


def queue_alternating(ops: int, blocking: bool) -> float:
    """Time put(item) (due now) then get_nowait() or get(), one thread, ns per put+get pair."""
    q: DelayQueue[int] = DelayQueue()
    return alternate(q.put, q.get if blocking else q.get_nowait, ops)


def queue_batch(ops: int, now_s: float) -> float:
    """Time N puts with random already-past due times, then N get_nowait, ns per pair."""
    rng = random.Random(SEED)
    whens = [now_s - 60 + rng.random() * 59 for _ in range(ops)]
    q: DelayQueue[int] = DelayQueue()
    put, get = q.put, q.get_nowait
    t0 = NS()
    for i, when in enumerate(whens):
        put(i, when=when)
    for _ in range(ops):
        get()
    t1 = NS()
    return (t1 - t0) / ops


def queue_stdlib(ops: int) -> float:
    """Time queue.Queue put then get_nowait (no delay), ns per pair: a floor for locking."""
    q: queue.Queue[int] = queue.Queue()
    return alternate(q.put, q.get_nowait, ops)


def alternate(put: Callable[[int], object], get: Callable[[], object], ops: int) -> float:
    """Time `ops` put-then-get pairs in one thread, ns per pair."""
    t0 = NS()
    for i in range(ops):
        put(i)
        get()
    t1 = NS()
    return (t1 - t0) / ops


class HeapLockQueue:
    """The floor issue 15 names: a `heapq` of (due ms, seq, item) under a `threading.Lock`,
    with the clock read on each put (due now) and each get, as a delay queue must."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, int]] = []
        self._lock = threading.Lock()
        self._seq = 0

    def put(self, item: int) -> None:
        due = time.time_ns() // 1_000_000
        with self._lock:
            self._seq += 1
            heapq.heappush(self._heap, (due, self._seq, item))

    def get_nowait(self) -> int:
        now = time.time_ns() // 1_000_000
        with self._lock:
            if not self._heap or self._heap[0][0] > now:
                raise queue.Empty
            return heapq.heappop(self._heap)[2]


def queue_heap_lock(ops: int) -> float:
    """Time `HeapLockQueue` put then get_nowait, ns per pair: the floor of the target."""
    q = HeapLockQueue()
    return alternate(q.put, q.get_nowait, ops)


def phase_queue(ops: int) -> tuple[Table, tuple[float, float]]:
    """Measure DelayQueue put+get; return the table and (DelayQueue, heapq + Lock) ns a pair."""
    now_s = time.time()
    table = Table(f"3. DelayQueue put+get, one thread ({ops:,} ops)", ["case", "ns/op"])
    cases: list[tuple[str, Callable[[int], float]]] = [
        ("put(i) + get_nowait(), alternating", lambda k: queue_alternating(k, blocking=False)),
        ("put(i) + get(), alternating", lambda k: queue_alternating(k, blocking=True)),
        ("put all (random past whens), then get_nowait all", lambda k: queue_batch(k, now_s)),
        ("heapq + threading.Lock put + get_nowait (the floor)", queue_heap_lock),
        ("queue.Queue put + get_nowait (stdlib, no delay)", queue_stdlib),
    ]
    measured: dict[str, float] = {}
    for label, run in cases:
        progress(f"delay queue: {label}")
        fresh()
        run(ops // 20)  # warm-up
        fresh()
        measured[label] = run(ops)
        table.rows.append([label, fmt(measured[label])])
    table.rows.append(
        ["Go heap DelayQueue (reference constant, not measured)", fmt(GO_DELAYQUEUE_NS)]
    )
    table.notes = [
        "per op = one put plus one get",
    ]
    return table, (measured[cases[0][0]], measured[cases[3][0]])
