"""Single-add benchmark (issue 15): `store.add` one timer a call, beside raw redis-py `ZADD` on
Redis and beside `add_many` on SQLite.

Run ``python bench/adds.py`` (``--timers N``, default 5,000; ``--markdown PATH``). It starts its
own ``redis-server`` on a free loopback port in a temp dir and stops it at the end.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import uvloop
from harness.machine import OtherLoad, machine_table, sample_other_load
from harness.redis_server import private_redis
from harness.report import Table, emit, fmt, verdict, write_markdown
from scenarios.adds.single import CONCURRENCY, Rate, rates, sqlite_rates

TARGETS = {"sequential": 0.7, f"{CONCURRENCY} at once": 1.5}


def table(rows: list[Rate], other: OtherLoad) -> Table:
    out = Table(
        "Single adds on Redis: one timer a call",
        ["run", "per s", "client µs each", "x raw, same way", "target", "result"],
    )
    raw = {row.label.split(", ")[1]: row.per_s for row in rows if row.label.startswith("raw")}
    for row in rows:
        how = row.label.split(", ")[1]
        ratio = row.per_s / raw[how]
        is_store = row.label.startswith("RedisStore")
        target = TARGETS[how] if is_store else None
        out.rows.append(
            [
                row.label,
                fmt(row.per_s),
                fmt(row.client_us, 1),
                f"{ratio:.2f}",
                "—" if target is None else f"≥ {target}",
                "floor" if target is None else verdict(ratio >= target),
            ]
        )
    out.notes = [
        "each call adds one timer (payload {'n': i}, due an hour ahead, id 'order-<uuid hex>'); "
        "the raw rows ZADD one member per call into one zset; raw and store calls alternate "
        "in 10 rounds, so load that comes and goes falls on both",
        f"'{CONCURRENCY} at once': {CONCURRENCY} callers on one event loop (uvloop); "
        "RedisStore.add coalesces the calls made while one batch is in flight",
        other.note(),
    ]
    return out


def sqlite_table(rows: list[Rate], other: OtherLoad) -> Table:
    out = Table(
        "Single adds on SQLite: one timer a call, beside add_many",
        ["run", "per s", "client µs each", "x add_many", "target", "result"],
    )
    floor = rows[0].per_s
    for n, row in enumerate(rows):
        ratio = row.per_s / floor
        out.rows.append(
            [
                row.label,
                fmt(row.per_s),
                fmt(row.client_us, 1),
                f"{ratio:.2f}",
                "—" if n == 0 else "≥ 0.5",
                "floor" if n == 0 else verdict(ratio >= 0.5),
            ]
        )
    out.notes = [
        "a fresh file in the server's temp dir for each row (WAL, synchronous=NORMAL), "
        "the rows alternating 1,000 timers at a time; "
        "SqliteStore.add writes the adds of one loop pass (up to 64) on the caller's thread "
        "when the connection is free, and groups the adds made while a transaction is being "
        "written",
        "'64 at once': a task per add, 64 at a time (a semaphore), as the Redis rows run; "
        "'64 callers': 64 tasks that each add in turn, the same concurrency without a task "
        "and a semaphore per add (about 6 µs of the caller's own an add here)",
        other.note(),
    ]
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timers", type=int, default=5_000)
    parser.add_argument("--markdown", metavar="PATH")
    args = parser.parse_args(argv)
    tables: list[Table] = []
    emit(machine_table(sample_other_load()), tables)
    with private_redis("tickwheel-bench-adds-") as server:
        tables[0].rows += server.rows()
        other = OtherLoad(server.pid)
        rows = uvloop.run(rates(server.url, args.timers))
        emit(table(rows, other), tables)
        sqlite_rows = uvloop.run(sqlite_rates(server.directory, args.timers))
        emit(sqlite_table(sqlite_rows, other), tables)
    if args.markdown:
        write_markdown(args.markdown, tables, "Single-add benchmark")


if __name__ == "__main__":
    main()
