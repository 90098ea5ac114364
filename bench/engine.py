"""Engine benchmark (issue 4): `consume` and `Worker` on RedisStore beside a raw Redis floor.

Run ``python bench/engine.py`` (``--quick`` for a smoke run under 30 s, ``--markdown`` to also
print the tables as Markdown, ``--markdown PATH`` to write them to a file, ``--profile`` to add
cProfile tables of a burst and of the HTTP phase, ``--loop asyncio`` to leave uvloop out).
``tickwheel bench`` runs this script with the same arguments.

It starts its own ``redis-server`` on a free loopback port in a temp dir (no persistence),
FLUSHALLs only that server between phases and stops it by pid at the end. Parts:

a. burst: N timers due at one instant, added beforehand, consumed by ``consume()`` (acks
   awaited one by one, as a natural consumer writes it, and acks left to batch), against the
   floor (pipelined ZADD, a Lua claim loop, pipelined ZREM acks) from the due instant on;
b. spread: N timers spread evenly over a span, fired by a `Worker` through a recording
   in-process Target, and through ``consume()`` (its store's clock synced on an idle connection,
   and again first synced by one of 128 single adds in flight): lateness by the store clock
   and by this host's (the server's, on this host), early firings;
c. HTTP: a `Worker` with `HttpTarget` calling a lean httptools receiver in a separate process
   (uvloop; tickwheel's own aiohttp Receiver for one info row), which
   measures lateness (arrival minus ``Tickwheel-Due``) and reports it back over a pipe.

The event loop is uvloop's, as in ``tickwheel serve`` and ``tickwheel worker``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import time
from collections.abc import Coroutine, Sequence
from typing import Any

from harness.machine import OtherLoad, machine_table, sample_other_load, version_of
from harness.profiling import profile_table
from harness.redis_server import OwnRedis, private_redis
from harness.report import Table, emit, markdown, progress, write_markdown
from scenarios.engine.burst import consume_burst, floor_burst
from scenarios.engine.context import EngineBench
from scenarios.engine.http_callbacks import http_part, http_run
from scenarios.engine.receivers import LEAN_RECEIVER_SOURCE, receiving
from scenarios.engine.runs import FULL, QUICK, Run
from scenarios.engine.spread import consume_spread, floor_spread, worker_spread
from scenarios.engine.tables import burst_table, http_table, spread_table, targets_table

from tickwheel.engine import WorkerSettings
from tickwheel.runtime import steady_gc


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small counts: a smoke run (< 30 s)")
    parser.add_argument(
        "--markdown", nargs="?", const="-", metavar="PATH",
        help="also print the tables as Markdown (to PATH when given)",
    )  # fmt: skip
    parser.add_argument(
        "--profile", action="store_true",
        help="add cProfile tables of a burst (ack tasks) and of the HTTP phase",
    )  # fmt: skip
    parser.add_argument(
        "--loop", choices=("uvloop", "asyncio"), default="uvloop",
        help="event loop of this process (default uvloop, as tickwheel serve/worker use)",
    )  # fmt: skip
    parser.add_argument(
        "--parts", default="abc", help="which parts to run (default abc; targets need all three)"
    )
    return parser.parse_args(argv)


def loop_rows(loop: str) -> list[list[str]]:
    """Describe the HTTP and event-loop libraries and the loop in use, as machine-table rows."""
    return [
        ["aiohttp / uvloop", f"{version_of('aiohttp')} / {version_of('uvloop')}"],
        ["event loop", loop],
    ]


async def run(
    args: argparse.Namespace, server: OwnRedis, tables: list[Table], whole: OtherLoad
) -> None:
    """Run the parts asked for, printing each part's table, then the profiles and targets."""
    sizes = QUICK if args.quick else FULL
    settings = WorkerSettings()
    bench = EngineBench(server, sizes, settings)
    burst_main: Run | None = None
    spread: list[Run] = []
    http_runs: list[Run] = []
    profiles: list[Table] = []
    try:
        if "a" in args.parts:
            meter = OtherLoad(server.pid)
            progress(f"(a) burst of {sizes.burst:,}: raw floor")
            floor = await floor_burst(bench, variadic=False)
            floor_variadic = await floor_burst(bench, variadic=True)
            progress("(a) burst: consume(), ack tasks")
            batched = await consume_burst(bench, batched=True)
            progress("(a) burst: consume(), await each ack")
            natural = await consume_burst(bench, batched=False)
            progress("(a) burst: consume() that has run before, await each ack")
            warm = await consume_burst(bench, batched=False, warm=True)
            batched.extra["ratio"] = batched.seconds / floor.seconds
            burst_main = batched
            table = burst_table([floor_variadic, batched, natural, warm], floor, meter.other())
            emit(table, tables)
            if args.profile:
                progress("(a) burst, profiled")
                profiler = cProfile.Profile()
                await consume_burst(bench, batched=True, profiler=profiler)
                profiles.append(
                    profile_table("Profile: burst, consume() with ack tasks", profiler, 18)
                )
        if "b" in args.parts:
            meter = OtherLoad(server.pid)
            progress(f"(b) spread of {sizes.spread:,} over {sizes.spread_s:g} s: raw floor")
            spread.append(await floor_spread(bench))
            progress("(b) spread: Worker")
            spread.append(await worker_spread(bench))
            progress("(b) spread: consume()")
            spread.append(await consume_spread(bench))
            progress("(b) spread: consume(), clock first synced under load")
            spread.append(await consume_spread(bench, busy_sync=True))
            emit(spread_table(spread, sizes, meter.other()), tables)
        if "c" in args.parts:
            meter = OtherLoad(server.pid)
            http_runs = await http_part(bench, sizes, meter, whole)
            emit(http_table(http_runs, meter.other()), tables)
            if args.profile:
                progress("(c) HTTP, profiled")
                profiler = cProfile.Profile()
                with receiving(LEAN_RECEIVER_SOURCE, meter, whole) as receiver:
                    await http_run(
                        bench, receiver, sizes.http, sizes.http_s, "profiled", profiler=profiler
                    )
                profiles.append(profile_table("Profile: HTTP, Worker + HttpTarget", profiler, 18))
        for table in profiles:
            emit(table, tables)
        if burst_main is not None and spread and http_runs:
            targets = targets_table(burst_main, spread, http_runs[0])
            if args.quick:
                targets.notes.append(
                    "--quick: smoke-run counts (HTTP offered 2,000/s); the limits are set for a "
                    "full run"
                )
            emit(targets, tables)
    finally:
        await bench.close()


def run_loop(main: Coroutine[Any, Any, None], loop: str) -> None:
    """Run `main` on a new event loop, uvloop's or asyncio's."""
    factory = None
    if loop == "uvloop":
        import uvloop

        factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(main)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the benchmark on a private redis-server and print the tables."""
    args = parse_args(argv)
    tables: list[Table] = []
    start_s = time.monotonic()
    with private_redis("tickwheel-bench-engine-") as server:
        whole = OtherLoad(server.pid)
        steady_gc()  # as `tickwheel serve` and `tickwheel worker` do
        machine = machine_table(sample_other_load())
        machine.rows += [*server.rows(), *loop_rows(args.loop)]
        emit(machine, tables)
        run_loop(run(args, server, tables, whole), args.loop)
        busy = whole.other()
    elapsed = time.monotonic() - start_s
    summary = (
        f"run took {elapsed:.0f} s; other processes (not this one, its redis-server nor, in "
        f"part c, its receiver) kept {busy:.2f} of {os.cpu_count()} CPUs busy on average; "
        f"load average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print(summary, flush=True)
    tables[-1].notes.append(summary)
    progress("done")
    if args.markdown:
        if args.markdown == "-":
            print("\n<!-- markdown for docs/benchmarks.md -->\n\n" + markdown(tables), flush=True)
        else:
            write_markdown(args.markdown, tables, "tickwheel engine benchmark")


if __name__ == "__main__":
    main()
