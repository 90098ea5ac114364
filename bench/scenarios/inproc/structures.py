"""Phase 1: add, cancel, fire and memory of every structure at every N, repeats interleaved."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from harness.report import Table, fmt, progress

from scenarios.inproc.operations import (
    Samples,
    asyncio_add_cancel,
    asyncio_fire,
    asyncio_memory,
    dict_add_cancel,
    dict_memory,
    heap_add_cancel,
    heap_fire,
    heap_memory,
    heapq_add_cancel,
    heapq_fire,
    heapq_memory,
    sched_add_cancel,
    sched_memory,
    threads_add_cancel,
    threads_memory,
    wheel_add_cancel,
    wheel_fire,
    wheel_memory,
)
from scenarios.inproc.workload import (
    SPAN_MS,
    Callback,
    Workload,
    aligned_base_ms,
    best,
    fresh,
    make_counter,
    make_workload,
    with_int_keys,
)

LARGE = 100_000  # above this N, the slow non-target cells are skipped unless --complete


@dataclass(frozen=True)
class Structure:
    """How to measure one structure; `fire` None means no fire column applies."""

    add_cancel: Callable[[Workload, Callback], Samples]
    memory: Callable[[Workload, Callback], float]
    fire: Callable[[Workload, bool], float] | None
    steps: bool  # whether the 1 ms-steps fire applies
    target: bool  # a project target reads it: more repeats at large N
    large: frozenset[str]  # cells still run at N > LARGE: add, steps, all, memory


def _cells(*names: str) -> frozenset[str]:
    """Name the cells a structure keeps at large N."""
    return frozenset(names)


STRUCTURES: dict[str, Structure] = {
    "TimingWheel": Structure(
        wheel_add_cancel,
        wheel_memory,
        wheel_fire,
        True,
        True,
        _cells("add", "steps", "all", "memory"),
    ),
    "DelayHeap": Structure(heap_add_cancel, heap_memory, heap_fire, True, False, _cells("add")),
    "asyncio": Structure(
        asyncio_add_cancel,
        asyncio_memory,
        asyncio_fire,
        False,
        True,
        _cells("add", "all", "memory"),
    ),
    "heapq": Structure(
        heapq_add_cancel, heapq_memory, heapq_fire, True, False, _cells("add", "steps", "memory")
    ),
    "TimingWheel, int keys (info)": Structure(
        lambda w, cb: wheel_add_cancel(with_int_keys(w), cb),
        lambda w, cb: wheel_memory(with_int_keys(w), cb),
        None,
        False,
        False,
        _cells("add"),
    ),
    "dict set + del (floor, info)": Structure(
        dict_add_cancel, dict_memory, None, False, False, _cells("add")
    ),
    "AsyncScheduler": Structure(
        sched_add_cancel, sched_memory, None, False, True, _cells("add", "memory")
    ),
    "Scheduler": Structure(
        threads_add_cancel, threads_memory, None, False, True, _cells("add", "memory")
    ),
}


@dataclass
class Cell:
    """The samples gathered for one structure at one N."""

    add: list[float] = field(default_factory=list)
    cancel: list[float] = field(default_factory=list)
    deferred: list[float] = field(default_factory=list)
    fire_steps: list[float] = field(default_factory=list)
    fire_all: list[float] = field(default_factory=list)
    memory: float | None = None

    @property
    def add_cancel(self) -> float | None:
        """Best add plus best cancel, ns per timer."""
        return None if not self.add else min(self.add) + min(self.cancel)


@dataclass(frozen=True)
class Plan:
    """What to run for one structure at one N."""

    reps: int
    fire_reps: int
    fire_steps: bool
    fire_all: bool
    memory: bool


def plan_for(name: str, n: int, complete: bool) -> Plan | None:
    """Decide the repeats and cells for a structure at N; None skips the row."""
    s = STRUCTURES[name]
    cells = {"add", "steps", "all", "memory"} if n <= LARGE or complete else s.large
    if "add" not in cells:
        return None
    reps = 5 if n <= 10_000 else 3 if n <= LARGE else 2 if s.target else 1
    fire_reps = 3 if n <= 10_000 else 2 if n <= LARGE else 1
    has_fire = s.fire is not None
    return Plan(
        reps,
        fire_reps,
        has_fire and s.steps and "steps" in cells,
        has_fire and "all" in cells,
        "memory" in cells,
    )


def measure_n(w: Workload, complete: bool) -> dict[str, Cell]:
    """Measure every planned structure at one N, interleaving structures between repeats."""
    cb, _ = make_counter()
    plans = {name: plan_for(name, w.n, complete) for name in STRUCTURES}
    active = {name: plan for name, plan in plans.items() if plan is not None}
    cells = {name: Cell() for name in active}
    for rep in range(max(p.reps for p in active.values())):
        for name, plan in active.items():
            if rep < plan.reps:
                progress(f"add/cancel: {name} N={w.n:,} ({rep + 1}/{plan.reps})")
                fresh()
                add, cancel, deferred = STRUCTURES[name].add_cancel(w, cb)
                cells[name].add.append(add)
                cells[name].cancel.append(cancel)
                if deferred is not None:
                    cells[name].deferred.append(deferred)
    for rep in range(max(p.fire_reps for p in active.values())):
        for name, plan in active.items():
            fire = STRUCTURES[name].fire
            if fire is None or rep >= plan.fire_reps:
                continue
            progress(f"fire: {name} N={w.n:,} ({rep + 1}/{plan.fire_reps})")
            if plan.fire_steps:
                cells[name].fire_steps.append(fire(w, True))
            if plan.fire_all:
                cells[name].fire_all.append(fire(w, False))
    for name, plan in active.items():
        if plan.memory:
            progress(f"memory: {name} N={w.n:,}")
            cells[name].memory = STRUCTURES[name].memory(w, cb)
    return cells


def warm_up() -> None:
    """Run every measurement once at a small size."""
    w = make_workload(2_000, aligned_base_ms())
    cb, _ = make_counter()
    for s in STRUCTURES.values():
        s.add_cancel(w, cb)
        s.memory(w, cb)
        if s.fire is not None:
            s.fire(w, False)
            if s.steps:
                s.fire(w, True)


def phase_structures(sizes: list[int], complete: bool) -> dict[tuple[str, int], Cell]:
    """Measure every structure at every N."""
    results: dict[tuple[str, int], Cell] = {}
    base = aligned_base_ms()
    for n in sizes:
        progress(f"workload N={n:,}")
        w = make_workload(n, base)
        for name, cell in measure_n(w, complete).items():
            results[name, n] = cell
        del w
        fresh()
    return results


def structures_table(sizes: list[int], results: dict[tuple[str, int], Cell]) -> Table:
    """Tabulate phase 1."""
    headers = ["N", "structure", "add ns/op", "cancel ns/op", "add+cancel", "fire 1ms-steps"]
    headers += ["fire all-due", "bytes/timer"]
    table = Table("1. Timers: add, cancel, fire (ns per timer), memory (bytes per timer)", headers)
    purge = []
    for n in sizes:
        for name in STRUCTURES:
            cell = results.get((name, n))
            if cell is None:
                continue
            table.rows.append(
                [
                    f"{n:,}",
                    name,
                    fmt(best(cell.add)),
                    fmt(best(cell.cancel)),
                    fmt(cell.add_cancel),
                    fmt(best(cell.fire_steps)),
                    fmt(best(cell.fire_all)),
                    fmt(cell.memory, 1),
                ]
            )
            if cell.deferred:
                purge.append(f"{name} N={n:,}: {fmt(best(cell.deferred))} ns")
    table.notes = [
        f"due times uniform over {SPAN_MS // 1000} s after a base epoch ms aligned 1 s past a "
        "64**4 ms boundary (repeatable cascades); asyncio/AsyncScheduler use call_later one hour "
        "out; keys are pre-made strings 'order-<uuid hex>' (a user's), the int-key row keys "
        "the wheel by 0..N-1; callback = a closure incrementing a counter",
        "each time is the best (minimum) of interleaved repeats: add/cancel 5 at N<=10k, 3 at "
        "<=100k, 2 above (1 for non-target rows); fire 3, 2, 1; GC on throughout",
        "fire 1ms-steps: advance / pop_due / heappop-while-due at every ms across the span, so it "
        f"includes {SPAN_MS:,} idle ticks (heavy per timer at small N); the wheel's queued adds "
        "are filed before the firing is timed, as the schedulers' drivers file them while they "
        "wait (what filing costs a timer: the idle-tick table's notes)",
        "fire all-due: one advance / pop_due / heappop loop to the span's end; asyncio: N call_at "
        "handles all already due + call_soon(stop), timed loop.run_forever() (one _run_once)",
        "heapq: (due, seq, key, value) tuples + dict key->seq; cancel deletes the key (lazy): "
        "stale tuples stay in the heap, and in memory, until popped",
        "asyncio's and TimingWheel's cancels are lazy: asyncio's next _run_once purges the "
        "cancelled handles, and the wheel's advance past their due times drops its tombstones "
        "(one advance to the span's end here); neither is in 'cancel' above; measured "
        f"separately per timer: {'; '.join(purge)}",
        "memory: tracemalloc from before the structure is created; keys and callback not "
        "counted, due ints / asyncio 'when' floats / contexts are; asyncio and AsyncScheduler "
        "handles are kept in a preallocated list whose 8 B/slot is not counted; the asyncio "
        "loop itself is created before tracing",
        "dict set + del (floor, info): the same keys set in a dict (key -> due) and deleted in "
        "the cancel order, the least any structure that finds a timer by its key can do",
        "AsyncScheduler / Scheduler: tickwheel's user-facing call_later + handle.cancel() (the "
        "handle is filed in the wheel as its own entry; no lock on the loop's thread, the thread "
        "Scheduler's lock taken per call), the like-for-like peers of loop.call_later + cancel; "
        "memory through the same call_later, the Scheduler created before tracing",
        f"— = not applicable, or skipped at N > {LARGE:,} to fit the time budget "
        "(run with --complete to fill them)",
    ]
    return table
