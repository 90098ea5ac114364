"""The in-process add+cancel rows of issue 24 alone: tickwheel beside asyncio, alternated.

Run ``python bench/inproc_pairs.py`` (``--n`` timers, default 1,000,000; ``--rounds``, default
3). Each round times `TimingWheel` add + cancel (string keys), asyncio ``call_later`` +
``cancel``, `AsyncScheduler` and `Scheduler` ``call_later`` + ``handle.cancel()`` one after
another on the same workload, as `bench/inproc.py` does at its largest N, so that load which
comes and goes on a shared host falls on all of them; the table keeps the best round of each.
To compare two versions, run it against each (``PYTHONPATH=<other checkout>/src``) in turn.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from harness.machine import OtherLoad, machine_table, sample_other_load
from harness.report import Table, emit, fmt, progress
from scenarios.inproc.operations import (
    Samples,
    asyncio_add_cancel,
    sched_add_cancel,
    threads_add_cancel,
    wheel_add_cancel,
)
from scenarios.inproc.workload import aligned_base_ms, fresh, make_counter, make_workload

ROWS = {
    "asyncio call_later + cancel (floor)": asyncio_add_cancel,
    "TimingWheel add + cancel, string keys": wheel_add_cancel,
    "AsyncScheduler call_later + handle.cancel()": sched_add_cancel,
    "Scheduler call_later + handle.cancel()": threads_add_cancel,
}
LIMITS = {"TimingWheel": 0.35, "AsyncScheduler": 0.5, "Scheduler": 0.5}


def main(argv: Sequence[str] | None = None) -> None:
    """Time every row in alternating rounds and print the best of each beside asyncio."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    tables: list[Table] = []
    emit(machine_table(sample_other_load()), tables)
    meter = OtherLoad()
    workload = make_workload(args.n, aligned_base_ms())
    callback, _ = make_counter()
    best: dict[str, tuple[float, float]] = {}
    for round_ in range(args.rounds):
        for label, measure in ROWS.items():
            progress(f"round {round_ + 1}/{args.rounds}: {label}")
            fresh()
            samples: Samples = measure(workload, callback)
            add, cancel = samples[0], samples[1]
            old = best.get(label, (add, cancel))
            best[label] = (min(old[0], add), min(old[1], cancel))
    floor = sum(best["asyncio call_later + cancel (floor)"])
    table = Table(
        f"add + cancel at N={args.n:,}, ns per timer, best of {args.rounds} alternating rounds",
        ["structure", "add", "cancel", "add + cancel", "x asyncio", "limit"],
    )
    for label, (add, cancel) in best.items():
        limit = next((f"≤ {v}" for k, v in LIMITS.items() if label.startswith(k)), "floor")
        table.rows.append(
            [
                label,
                fmt(add),
                fmt(cancel),
                fmt(add + cancel),
                f"{(add + cancel) / floor:.3f}",
                limit,
            ]
        )
    table.notes = [
        "the workload and each measurement are bench/inproc.py's (keys 'order-<uuid hex>', due "
        "times over 60 s, the schedulers' and asyncio's an hour out, GC on)",
        meter.note(),
    ]
    emit(table, tables)


if __name__ == "__main__":
    main()
