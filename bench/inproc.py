"""In-process benchmarks: TimingWheel, DelayHeap, asyncio and heapq side by side, plus drivers.

Run ``python bench/inproc.py`` (``--quick`` for a shorter run, ``--markdown PATH`` to also write
the tables as Markdown). The garbage collector stays on, as users run; ``--gc-off`` turns it
off (collecting only between measurements), to tell its cost from the structures' own.
"""

from __future__ import annotations

import argparse
import gc
import os
import time
from collections.abc import Sequence

from harness.machine import OtherLoad, machine_table, sample_other_load
from harness.report import Table, emit, progress, write_markdown
from scenarios.inproc.delay_queue import phase_queue
from scenarios.inproc.idle import phase_idle
from scenarios.inproc.lateness import phase_lateness
from scenarios.inproc.structures import LARGE, phase_structures, structures_table, warm_up
from scenarios.inproc.targets import targets_table
from scenarios.inproc.workload import fresh

QUEUE_OPS = 200_000


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", help="comma-separated N (default 10000,100000,1000000)")
    parser.add_argument("--quick", action="store_true", help="N=10k,100k and 20k lateness timers")
    parser.add_argument("--markdown", metavar="PATH", help="also write the tables as Markdown")
    parser.add_argument(
        "--complete", action="store_true", help=f"also run the cells skipped at N > {LARGE:,}"
    )
    parser.add_argument(
        "--gc-off", action="store_true", help="the garbage collector off while timing"
    )
    args = parser.parse_args(argv)
    default = "10000,100000" if args.quick else "10000,100000,1000000"
    args.size_list = sorted({int(s.replace("_", "")) for s in (args.sizes or default).split(",")})
    return args


def main(argv: Sequence[str] | None = None) -> None:
    """Run every phase and print the tables."""
    args = parse_args(argv)
    if args.gc_off:
        gc.disable()  # `fresh` still collects between measurements
    sizes: list[int] = args.size_list
    tables: list[Table] = []
    emit(machine_table(sample_other_load()), tables)
    whole, start_s = OtherLoad(), time.monotonic()

    progress("warm-up")
    warm_up()
    fresh()
    meter = OtherLoad()
    results = phase_structures(sizes, args.complete)
    structures = structures_table(sizes, results)
    structures.notes.append(meter.note())
    emit(structures, tables)
    fresh()
    meter = OtherLoad()
    idle_table, idle_growth = phase_idle(sizes)
    idle_table.notes.append(meter.note())
    emit(idle_table, tables)
    fresh()
    meter = OtherLoad()
    queue_table, queue_pair = phase_queue(QUEUE_OPS)
    queue_table.notes.append(meter.note())
    emit(queue_table, tables)
    fresh()
    late_table, late = phase_lateness(20_000 if args.quick else 100_000)
    emit(late_table, tables)
    fresh()

    targets = targets_table(sizes, results, idle_growth, late, queue_pair)
    elapsed = time.monotonic() - start_s
    busy = whole.other()
    targets.notes.append(
        f"other processes kept {busy:.2f} of {os.cpu_count()} CPUs busy on average during the "
        f"{elapsed:.0f} s run; timings above are inflated when this is not ~0"
    )
    emit(targets, tables)
    progress("done")
    if args.markdown:
        write_markdown(args.markdown, tables, "tickwheel in-process benchmark")


if __name__ == "__main__":
    main()
