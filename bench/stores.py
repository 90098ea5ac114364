"""Store benchmarks: RedisStore, SqliteStore and MemoryStore against the raw Redis floor.

Run ``python bench/stores.py`` (``--quick`` for a shorter run, ``--markdown PATH`` to also write
the tables as Markdown, ``--profile`` to add cProfile tables of RedisStore's client side). It
starts its own ``redis-server`` on a free loopback port in a temp dir, without persistence,
FLUSHALLs only that server between phases and stops it by pid at the end; it never talks to
another Redis. Timers are built before any timing starts (their construction validates, so it is
reported on its own), then the input objects are frozen out of the garbage collector's view.

Phases, each store side by side with the raw floor (plain redis-py commands on the same server):

1. schedule rate with one producer (batched adds, and one by one for information);
2. claim + ack rate: claim 1,000 at a time, ack every lease (64 at once), until none is due;
3. Redis memory per pending timer at N timers (``INFO memory`` used_memory delta);
4. claim latency (one ``claim(limit=100)``) at 10k and at N pending timers, nothing or 100 due;
5. where the time goes (client CPU, Redis CPU, ``INFO commandstats``) and the targets.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import sqlite3
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from harness.machine import OtherLoad, machine_table, sample_other_load
from harness.redis_server import OwnRedis, private_redis
from harness.report import Table, emit, progress, write_markdown
from scenarios.stores.context import StoreBench
from scenarios.stores.inputs import SMALL, Sizes, build_inputs
from scenarios.stores.memory_store import memory_phases
from scenarios.stores.profiled import profile
from scenarios.stores.redis_pending import redis_pending
from scenarios.stores.redis_rates import redis_claim, redis_schedule
from scenarios.stores.sqlite_store import sqlite_phases
from scenarios.stores.tables import (
    claim_table,
    kinds_table,
    latency_table,
    memory_table,
    schedule_table,
    server_table,
)
from scenarios.stores.targets import targets_table


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--timers", type=lambda s: int(s.replace("_", "").replace(",", "")), default=None,
        help="N pending timers for memory and latency (default 1,000,000; --quick 100,000)",
    )  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="smaller sizes (about a minute)")
    parser.add_argument("--markdown", metavar="PATH", help="also write the tables as Markdown")
    parser.add_argument(
        "--profile", action="store_true", help="add cProfile tables of RedisStore (client side)"
    )
    parser.add_argument(
        "--shards", type=int, default=1,
        help="RedisStore shards (default 1: a new prefix's on a standalone server)",
    )  # fmt: skip
    parser.add_argument(
        "--spread-hours", type=float, default=1.0,
        help="pending due times are random over this many hours (default 1)",
    )  # fmt: skip
    return parser.parse_args(argv)


def sizes_for(args: argparse.Namespace) -> Sizes:
    """Return the run's sizes: full, --quick, and N from --timers."""
    if args.quick:
        sizes = Sizes(pending=100_000, schedule=20_000, single=2_000, claim=5_000, calls=100)
    else:
        sizes = Sizes(pending=1_000_000, schedule=100_000, single=5_000, claim=20_000, calls=200)
    if args.timers is not None:
        if args.timers <= SMALL:
            raise SystemExit(f"--timers must be more than {SMALL:,} (the small latency point)")
        sizes.pending = args.timers
    return sizes


def sqlite_row(tmp: Path) -> list[str]:
    """Describe SQLite and the file system its files go to, as a row of the machine table."""
    fs = "?"
    with contextlib.suppress(OSError, ValueError):
        best = ""
        with open("/proc/mounts", encoding="utf-8") as f:
            for line in f:
                _, point, kind, *_ = line.split()
                if str(tmp).startswith(point) and len(point) > len(best):
                    best, fs = point, f"{kind} at {point}"
    return ["sqlite", f"{sqlite3.sqlite_version} (files in {tmp}, {fs})"]


async def run(args: argparse.Namespace, server: OwnRedis, tables: list[Table]) -> None:
    """Build the inputs, run every scenario, then print the tables."""
    sizes = sizes_for(args)
    spread_ms = max(60_000, int(args.spread_hours * 3_600_000))
    inputs = build_inputs(sizes, spread_ms)
    gc.collect()
    gc.freeze()  # the inputs are the producer's data, not the store's garbage
    bench = StoreBench(server.url, sizes, inputs, args.shards)
    try:
        meters = {}
        for name, phase in (
            ("redis schedule", redis_schedule),
            ("redis claim+ack", redis_claim),
            ("redis memory, latency", redis_pending),
            ("sqlite", sqlite_phases),
            ("memory", memory_phases),
        ):
            meter = OtherLoad(server.pid)
            await phase(bench)
            meters[name] = meter.other()
        r = bench.results
        load = ", ".join(f"{name} {busy:.2f}" for name, busy in meters.items())
        r.load_note = f"CPUs other processes (not this one nor its redis-server) kept busy: {load}"
        emit(schedule_table(r, inputs), tables)
        emit(claim_table(r), tables)
        emit(memory_table(r, inputs, sizes.pending, spread_ms, args.shards), tables)
        if r.kinds:
            emit(kinds_table(r, sizes.pending), tables)
        emit(latency_table(r, sizes.pending, sizes.calls), tables)
        emit(server_table(r), tables)
        if args.profile:
            for table in await profile(bench):
                emit(table, tables)
        emit(targets_table(r, inputs, sizes), tables)
    finally:
        await bench.close()


def main(argv: Sequence[str] | None = None) -> None:
    """Run the benchmark on a private redis-server and print the tables."""
    args = parse_args(argv)
    tables: list[Table] = []
    start_s = time.monotonic()
    with private_redis("tickwheel-bench-redis-") as server:
        whole = OtherLoad(server.pid)
        machine = machine_table(sample_other_load())
        machine.rows += [*server.rows(), sqlite_row(Path(tempfile.gettempdir()))]
        emit(machine, tables)
        asyncio.run(run(args, server, tables))
        busy = whole.other()
    elapsed = time.monotonic() - start_s
    summary = (
        f"run took {elapsed:.0f} s; other processes (not this one nor its redis-server) kept "
        f"{busy:.2f} of {os.cpu_count()} CPUs busy on average: timings are inflated when "
        "this is not ~0"
    )
    print(summary, flush=True)
    tables[-1].notes.append(summary)
    progress("done")
    if args.markdown:
        write_markdown(args.markdown, tables, "tickwheel store benchmark")


if __name__ == "__main__":
    main()
