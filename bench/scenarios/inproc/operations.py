"""One measurement of add + cancel, fire or memory on each structure, on one workload.

The same operation is written once per structure (TimingWheel, DelayHeap, asyncio, heapq,
AsyncScheduler, Scheduler), side by side, so that what each row of the table times can be compared.
"""

from __future__ import annotations

import asyncio
import heapq
import tracemalloc
from collections.abc import Callable, Hashable, Sized
from typing import Any

from scenarios.inproc.workload import (
    NS,
    SPAN_MS,
    Callback,
    Workload,
    far_delays,
    fresh,
    make_counter,
)
from tickwheel import AsyncScheduler, DelayHeap, Scheduler, TimerHandle, TimingWheel

Samples = tuple[float, float, float | None]  # add ns/op, cancel ns/op, deferred ns/op


# add + cancel (ns/op)


def wheel_add_cancel(w: Workload, cb: Callback) -> Samples:
    """Time TimingWheel.add of N timers, cancel of all in random order, then the deferred purge.

    Cancel leaves tombstones in the buckets; the advance past the span that reclaims them is
    timed apart, as asyncio's purge is.
    """
    wheel: TimingWheel[Hashable, Callback] = TimingWheel(w.base_ms)
    add, cancel = wheel.add, wheel.cancel
    t0 = NS()
    for key, due in zip(w.keys, w.dues, strict=True):
        add(key, due, cb)
    t1 = NS()
    for key in w.cancel_keys:
        cancel(key)
    t2 = NS()
    assert len(wheel) == 0
    t3 = NS()
    if wheel.advance(w.base_ms + SPAN_MS):
        raise AssertionError("a cancelled timer fired")
    t4 = NS()
    return (t1 - t0) / w.n, (t2 - t1) / w.n, (t4 - t3) / w.n


def heap_add_cancel(w: Workload, cb: Callback) -> Samples:
    """Time DelayHeap.push of N timers, then cancel of all in random order."""
    dheap: DelayHeap[Hashable, Callback] = DelayHeap()
    push, cancel = dheap.push, dheap.cancel
    t0 = NS()
    for key, due in zip(w.keys, w.dues, strict=True):
        push(key, due, cb)
    t1 = NS()
    for key in w.cancel_keys:
        cancel(key)
    t2 = NS()
    assert len(dheap) == 0
    return (t1 - t0) / w.n, (t2 - t1) / w.n, None


def asyncio_add_cancel(w: Workload, cb: Callback) -> Samples:
    """Time call_later, TimerHandle.cancel, then the loop's deferred purge of the cancelled."""
    loop = asyncio.new_event_loop()
    delays = far_delays(w)
    handles: list[asyncio.TimerHandle] = []
    append, call_later = handles.append, loop.call_later
    try:
        t0 = NS()
        for delay in delays:
            append(call_later(delay, cb))
        t1 = NS()
        ordered = [handles[i] for i in w.cancel_index]
        t2 = NS()
        for handle in ordered:
            handle.cancel()
        t3 = NS()
        loop.call_soon(loop.stop)
        t4 = NS()
        loop.run_forever()  # one _run_once: drops the cancelled handles from the heap
        t5 = NS()
        assert not loop._scheduled  # type: ignore[attr-defined]
    finally:
        loop.close()
    return (t1 - t0) / w.n, (t3 - t2) / w.n, (t5 - t4) / w.n


def heapq_add_cancel(w: Workload, cb: Callback) -> Samples:
    """Time heapq pushes of (due, seq, key, value) tuples, then lazy cancels via a live dict."""
    heap: list[tuple[int, int, Hashable, Callback]] = []
    live: dict[Hashable, int] = {}
    push = heapq.heappush
    t0 = NS()
    for seq, (key, due) in enumerate(zip(w.keys, w.dues, strict=True), 1):
        push(heap, (due, seq, key, cb))
        live[key] = seq
    t1 = NS()
    for key in w.cancel_keys:
        del live[key]
    t2 = NS()
    assert not live
    assert len(heap) == w.n
    return (t1 - t0) / w.n, (t2 - t1) / w.n, None


def dict_add_cancel(w: Workload, cb: Callback) -> Samples:
    """Time a plain dict's key -> due set of N keys, then del in random order: the floor of
    any structure that finds a timer by its key."""
    d: dict[Hashable, int] = {}
    t0 = NS()
    for key, due in zip(w.keys, w.dues, strict=True):
        d[key] = due  # noqa: PERF403 - one set per timer, as the structures above make
    t1 = NS()
    for key in w.cancel_keys:
        del d[key]
    t2 = NS()
    assert not d
    return (t1 - t0) / w.n, (t2 - t1) / w.n, None


async def _sched_add_cancel(w: Workload, cb: Callback) -> Samples:
    """Time AsyncScheduler.call_later and TimerHandle.cancel on a running loop."""
    sched = AsyncScheduler()
    delays = far_delays(w)
    handles: list[TimerHandle] = []
    append, call_later = handles.append, sched.call_later
    t0 = NS()
    for delay in delays:
        append(call_later(delay, cb))
    t1 = NS()
    ordered = [handles[i] for i in w.cancel_index]
    t2 = NS()
    for handle in ordered:
        handle.cancel()
    t3 = NS()
    assert len(sched) == 0
    await sched.aclose()
    return (t1 - t0) / w.n, (t3 - t2) / w.n, None


def sched_add_cancel(w: Workload, cb: Callback) -> Samples:
    """Run the AsyncScheduler add/cancel timing on a fresh loop."""
    return asyncio.run(_sched_add_cancel(w, cb))


def threads_add_cancel(w: Workload, cb: Callback) -> Samples:
    """Time the thread Scheduler's call_later and TimerHandle.cancel, from the caller's thread."""
    delays = far_delays(w)
    handles: list[TimerHandle] = []
    append = handles.append
    with Scheduler() as sched:
        call_later = sched.call_later
        t0 = NS()
        for delay in delays:
            append(call_later(delay, cb))
        t1 = NS()
        ordered = [handles[i] for i in w.cancel_index]
        t2 = NS()
        for handle in ordered:
            handle.cancel()
        t3 = NS()
        assert len(sched) == 0
    return (t1 - t0) / w.n, (t3 - t2) / w.n, None


# fire (ns per fired timer)


def wheel_fire(w: Workload, steps: bool) -> float:
    """Fire N timers by advancing a TimingWheel in 1 ms steps (or in one jump)."""
    cb, box = make_counter()
    wheel: TimingWheel[Hashable, Callback] = TimingWheel(w.base_ms)
    for key, due in zip(w.keys, w.dues, strict=True):
        wheel.add(key, due, cb)
    wheel.next_due_ms()  # files what `add` queued, as a scheduler's driver does while it waits
    return timed_fire(w, steps, wheel.advance, box, wheel)


def heap_fire(w: Workload, steps: bool) -> float:
    """Fire N timers with DelayHeap.pop_due in 1 ms steps (or in one call)."""
    cb, box = make_counter()
    dheap: DelayHeap[Hashable, Callback] = DelayHeap()
    for key, due in zip(w.keys, w.dues, strict=True):
        dheap.push(key, due, cb)
    return timed_fire(w, steps, dheap.pop_due, box, dheap)


def timed_fire(
    w: Workload,
    steps: bool,
    expire: Callable[[int], list[tuple[int, Callback]]],
    box: list[int],
    held: Sized,
) -> float:
    """Time `expire` over the span (every ms, or once) calling what it returns; ns per timer."""
    base = w.base_ms
    fresh()
    t0 = NS()
    if steps:
        for now in range(base + 1, base + SPAN_MS + 1):
            for _, fn in expire(now):
                fn()
    else:
        for _, fn in expire(base + SPAN_MS):
            fn()
    t1 = NS()
    assert box[0] == w.n
    assert len(held) == 0
    return (t1 - t0) / w.n


def heapq_fire(w: Workload, steps: bool) -> float:
    """Fire N timers from a heapq list (heappop while due, skipping stale) in 1 ms steps or once."""
    cb, box = make_counter()
    heap: list[tuple[int, int, Hashable, Callback]] = []
    live: dict[Hashable, int] = {}
    for seq, (key, due) in enumerate(zip(w.keys, w.dues, strict=True)):
        heapq.heappush(heap, (due, seq, key, cb))
        live[key] = seq
    pop, base = heapq.heappop, w.base_ms
    ends = range(base + 1, base + SPAN_MS + 1) if steps else [base + SPAN_MS]
    fresh()
    t0 = NS()
    for now in ends:
        while heap and heap[0][0] <= now:
            _, seq, key, fn = pop(heap)
            if live.get(key) == seq:
                del live[key]
                fn()
    t1 = NS()
    assert box[0] == w.n
    assert not live
    return (t1 - t0) / w.n


def asyncio_fire(w: Workload, steps: bool) -> float:
    """Time loop.run_forever popping and running N handles that are all already due."""
    assert not steps
    cb, box = make_counter()
    loop = asyncio.new_event_loop()
    try:
        start = loop.time() - SPAN_MS / 1000 - 1.0
        for off in w.offsets:
            loop.call_at(start + off / 1000, cb)
        loop.call_soon(loop.stop)
        fresh()
        t0 = NS()
        loop.run_forever()
        t1 = NS()
    finally:
        loop.close()
    assert box[0] == w.n
    return (t1 - t0) / w.n


# memory (bytes per pending timer)


def traced(build: Callable[[], object]) -> float:
    """Return the bytes tracemalloc sees allocated and still held by `build()`."""
    fresh()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = build()
        used = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    del kept
    return float(used)


def wheel_memory(w: Workload, cb: Callback) -> float:
    """Bytes per timer for a TimingWheel holding N timers, filed (due ints counted)."""
    keys, offsets, base = w.keys, w.offsets, w.base_ms

    def build() -> object:
        wheel: TimingWheel[Hashable, Callback] = TimingWheel(base)
        add = wheel.add
        for key, off in zip(keys, offsets, strict=True):
            add(key, base + off, cb)
        wheel.next_due_ms()  # files what `add` queued: the wheel as a driver holds it
        return wheel

    return traced(build) / w.n


def heap_memory(w: Workload, cb: Callback) -> float:
    """Bytes per timer for a DelayHeap holding N timers (due ints counted)."""
    keys, offsets, base = w.keys, w.offsets, w.base_ms

    def build() -> object:
        dheap: DelayHeap[Hashable, Callback] = DelayHeap()
        push = dheap.push
        for key, off in zip(keys, offsets, strict=True):
            push(key, base + off, cb)
        return dheap

    return traced(build) / w.n


def dict_memory(w: Workload, cb: Callback) -> float:
    """Bytes per timer for a dict of key -> due (due ints counted)."""
    keys, offsets, base = w.keys, w.offsets, w.base_ms

    def build() -> object:
        d: dict[Hashable, int] = {}
        for key, off in zip(keys, offsets, strict=True):
            d[key] = base + off
        return d

    return traced(build) / w.n


def heapq_memory(w: Workload, cb: Callback) -> float:
    """Bytes per timer for a heapq list of tuples plus its live-key dict."""
    keys, offsets, base = w.keys, w.offsets, w.base_ms

    def build() -> object:
        heap: list[tuple[int, int, Hashable, Callback]] = []
        live: dict[Hashable, int] = {}
        push = heapq.heappush
        for seq, (key, off) in enumerate(zip(keys, offsets, strict=True), 1):
            push(heap, (base + off, seq, key, cb))
            live[key] = seq
        return heap, live

    return traced(build) / w.n


def asyncio_memory(w: Workload, cb: Callback) -> float:
    """Bytes per timer for N asyncio TimerHandles, their contexts and the loop's heap."""
    loop = asyncio.new_event_loop()
    delays = far_delays(w)
    handles: list[Any] = [None] * w.n  # preallocated: its 8 B/slot is not counted

    def build() -> object:
        call_later = loop.call_later
        for i, delay in enumerate(delays):
            handles[i] = call_later(delay, cb)
        return None

    try:
        return traced(build) / w.n
    finally:
        handles.clear()
        loop.close()


async def _sched_memory(w: Workload, cb: Callback) -> float:
    """Bytes per timer for AsyncScheduler.call_later (handles + wheel + loop alarm)."""
    delays = far_delays(w)
    handles: list[Any] = [None] * w.n  # preallocated: its 8 B/slot is not counted
    holder: list[AsyncScheduler] = []

    def build() -> object:
        sched = AsyncScheduler()
        holder.append(sched)
        call_later = sched.call_later
        for i, delay in enumerate(delays):
            handles[i] = call_later(delay, cb)
        return None

    used = traced(build) / w.n
    handles.clear()
    await holder[0].aclose()
    return used


def sched_memory(w: Workload, cb: Callback) -> float:
    """Run the AsyncScheduler memory measurement on a fresh loop."""
    return asyncio.run(_sched_memory(w, cb))


def threads_memory(w: Workload, cb: Callback) -> float:
    """Bytes per timer for the thread Scheduler's call_later (handles + wheel)."""
    delays = far_delays(w)
    handles: list[Any] = [None] * w.n  # preallocated: its 8 B/slot is not counted
    with Scheduler() as sched:

        def build() -> object:
            call_later = sched.call_later
            for i, delay in enumerate(delays):
                handles[i] = call_later(delay, cb)
            return None

        used = traced(build) / w.n
        handles.clear()
    return used
