"""Limits benchmark (issue 16): a limited callback's CPU against an unlimited one, and how
closely a shared limit holds its rate over a minute.

Run ``python bench/limits.py`` (``--quick`` for a smoke run under a minute, ``--markdown`` to
also print the tables as Markdown, ``--markdown PATH`` to write them to a file).

It starts its own ``redis-server`` on a free loopback port in a temp dir (no persistence) and a
lean HTTP receiver (httptools on uvloop) in a child process, both stopped by pid at the end.

a. CPU: N timers due evenly over a few seconds, fired by one `Worker` to the receiver, without
   a limit and with a limit on the receiver's host that never binds (so the difference is what
   asking for grants costs), alternately, in rounds; on MemoryStore (grants kept in the
   process) and RedisStore (grants shared in Redis: one script call per batch). CPU of this
   process per callback, and of redis-server.
b. Accuracy: a rate limit on the host, timers offered faster than it for a minute, two workers
   (two store clients) on one Redis: what went through against what the limit allows, the
   busiest one-second window, each second's count, early arrivals (none is allowed).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections.abc import Sequence

import uvloop
from harness.machine import machine_table, sample_other_load
from harness.redis_server import OwnRedis, private_redis
from harness.report import Table, emit, finish, fmt, progress
from scenarios.limits.accuracy import accuracy_table
from scenarios.limits.receiver import arrivals_receiver
from scenarios.limits.runs import fire, store_maker

from tickwheel.runtime import steady_gc
from tickwheel.stores.base import Limit
from tickwheel.stores.redis import RedisStore

NEVER_BINDS = Limit(rate=100_000, burst=100_000)
TARGET_RATIO = 1.2


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small counts: a smoke run")
    parser.add_argument("--timers", type=int, default=10_000, help="timers per CPU run")
    parser.add_argument("--rounds", type=int, default=7, help="CPU runs of each kind")
    parser.add_argument("--span", type=float, default=60.0, help="seconds of part b")
    parser.add_argument("--rate", type=float, default=200.0, help="part b's limit a second")
    parser.add_argument("--parts", default="ab", help="which parts to run (a: CPU, b: accuracy)")
    parser.add_argument(
        "--markdown", nargs="?", const="-", metavar="PATH",
        help="also print the tables as Markdown (to PATH when given)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.quick:
        args.timers, args.rounds, args.span = 2000, 1, 10.0
    return args


async def cpu_part(args: argparse.Namespace, server: OwnRedis, tables: list[Table]) -> None:
    receiver = arrivals_receiver()
    spread_s = max(1.0, args.timers / 5000)
    table = Table(
        f"CPU per callback: {args.timers:,} timers due over {spread_s:g} s, one Worker, "
        f"a limit that never binds against none (median of {args.rounds} rounds)",
        ["store", "no limit µs", "limited µs", "ratio", f"target ≤ {TARGET_RATIO}",
         "ratio of the least of the rounds",
         "redis µs (no limit / limited)", "arrived, early"],
    )  # fmt: skip
    try:
        for backend in ("memory", "redis"):
            open_store = store_maker(backend, server.url)
            cpu: dict[bool, list[float]] = {False: [], True: []}
            redis_cpu: dict[bool, list[float]] = {False: [], True: []}
            arrived, early = 0, 0
            for round_ in range(args.rounds):
                for limited in (round_ % 2 == 1, round_ % 2 == 0):
                    progress(f"(a) {backend}, round {round_ + 1}, limited={limited}")
                    store = open_store()
                    try:
                        fired = await fire(
                            [store],
                            receiver,
                            count=args.timers,
                            spread_s=spread_s,
                            limit=NEVER_BINDS if limited else None,
                            redis_pid=server.pid,
                        )
                    finally:
                        await store.close()
                    cpu[limited].append(fired.cpu_s / fired.count * 1e6)
                    redis_cpu[limited].append(fired.redis_cpu_s / fired.count * 1e6)
                    arrived += len(fired.arrivals)
                    early += fired.early
            table.notes.append(
                f"{backend} rounds, µs without / with the limit: "
                + ", ".join(
                    f"{a:.0f} / {b:.0f}" for a, b in zip(cpu[False], cpu[True], strict=True)
                )
            )
            plain, limited_us = statistics.median(cpu[False]), statistics.median(cpu[True])
            ratio = limited_us / plain
            table.rows.append(
                [
                    backend,
                    fmt(plain, 1),
                    fmt(limited_us, 1),
                    f"{ratio:.2f}",
                    "PASS" if ratio <= TARGET_RATIO else "FAIL",
                    f"{min(cpu[True]) / min(cpu[False]):.2f}",
                    f"{fmt(statistics.median(redis_cpu[False]), 1)} / "
                    f"{fmt(statistics.median(redis_cpu[True]), 1)}"
                    if backend == "redis"
                    else "—",
                    f"{arrived:,} of {2 * args.rounds * args.timers:,}, {early}",
                ]
            )
        table.notes.append(
            "CPU is this process's (worker, store client, HTTP client) from the worker's start "
            "until the receiver had every callback; the receiver runs in its own process"
        )
    finally:
        receiver.stop()
    emit(table, tables)


async def accuracy_part(args: argparse.Namespace, server: OwnRedis, tables: list[Table]) -> None:
    receiver = arrivals_receiver()
    rate, burst = args.rate, 20
    offered = rate * 1.25
    count = int(offered * args.span)
    # two clients on one prefix: two workers of one store, as two processes would be
    prefix = f"acc{uuid.uuid4().hex[:8]}"
    first, second = (RedisStore.from_url(server.url, prefix=prefix) for _ in range(2))
    progress(f"(b) {count:,} timers offered at {offered:g}/s for {args.span:g} s, limit {rate:g}/s")
    try:
        fired = await fire(
            [first, second],
            receiver,
            count=count,
            spread_s=args.span,
            limit=Limit(rate=rate, burst=burst),
            redis_pid=server.pid,
            settle_s=args.span,
            timed=True,
        )
    finally:
        await first.close()
        await second.close()
        receiver.stop()
    emit(accuracy_table(fired, rate, burst, offered, args.span), tables)


async def run(args: argparse.Namespace, server: OwnRedis, tables: list[Table]) -> None:
    if "a" in args.parts:
        await cpu_part(args, server, tables)
    if "b" in args.parts:
        await accuracy_part(args, server, tables)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    tables: list[Table] = []
    start_s = time.monotonic()
    with private_redis("tickwheel-bench-limits-") as server:
        steady_gc()
        machine = machine_table(sample_other_load())
        machine.rows += server.rows()
        emit(machine, tables)
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(run(args, server, tables))
    finish(tables, start_s, args.markdown, "tickwheel limits benchmark")


if __name__ == "__main__":
    main()
