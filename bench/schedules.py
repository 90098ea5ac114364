"""Schedule benchmark (issue 14): N schedules firing every minute on Redis beside one-shot timers.

Run ``python bench/schedules.py`` (``--quick`` for 10,000 schedules every 20 s, ``--markdown
PATH`` to write the tables as Markdown). It starts its own ``redis-server`` on a free loopback
port in a temp dir (no persistence) and a lean HTTP receiver in another process, and reports:

- memory: Redis bytes per pending one-shot timer and per schedule with its pending occurrence
  (same callback), so what a schedule costs beyond its target;
- firing: one period of N callbacks spread evenly, fired by a `Worker` with `HttpTarget`, as
  one-shot timers added beforehand (the floor) and as the successors of N schedules: sustained
  rate, lateness at the receiver, CPU per callback of the worker and of redis-server, and the
  ratio of the two (the target: an occurrence costs at most 1.5 x a one-shot timer).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import uvloop
from harness.machine import OtherLoad, machine_table, sample_other_load
from harness.redis_server import private_redis
from harness.report import Table, emit, fmt, progress, verdict, write_markdown
from scenarios.engine.receivers import LEAN_RECEIVER_SOURCE, receiving
from scenarios.schedules.firing import Period, ScheduleBench

from tickwheel.runtime import steady_gc

TARGET_RATIO = 1.5


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schedules", type=int, default=100_000, help="N (default 100,000)")
    parser.add_argument("--every", type=float, default=60.0, help="period in s (default 60)")
    parser.add_argument("--quick", action="store_true", help="10,000 schedules every 20 s")
    parser.add_argument("--markdown", metavar="PATH", help="also write the tables as Markdown")
    args = parser.parse_args(argv)
    if args.quick:
        args.schedules, args.every = 10_000, 20.0
    return args


def firing_table(periods: list[Period], every_s: float, other: OtherLoad) -> Table:
    floor, scheduled = periods
    table = Table(
        f"Firing: {floor.count:,} callbacks over {every_s:g} s on Redis, one-shot vs schedules",
        [
            "run",
            "offered /s",
            "arrived /s",
            "dups",
            "p50 late ms",
            "p99 late ms",
            "worker µs",
            "redis µs",
            "µs / callback",
            "x one-shot",
        ],
    )
    for period in periods:
        table.rows.append(
            [
                period.label,
                fmt(period.count / every_s),
                fmt(period.arrived / period.seconds),
                str(period.duplicates),
                fmt(period.p50, 1),
                fmt(period.p99, 1),
                fmt(period.worker_cpu_s / max(period.arrived, 1) * 1e6),
                fmt(period.redis_cpu_s / max(period.arrived, 1) * 1e6),
                fmt(period.cost_us),
                f"{period.cost_us / floor.cost_us:.2f}",
            ]
        )
    fire_ratio = scheduled.cost_us / floor.cost_us
    whole_ratio = scheduled.cost_us / (floor.cost_us + floor.add_us)
    table.notes = [
        f"one-shot: {floor.setup}; schedules: {scheduled.setup}",
        "µs are CPU seconds of the worker (this process: claim, advance, HTTP, ack) and of "
        "redis-server over the measured period, per callback that arrived in it",
        f"target: an occurrence ≤ {TARGET_RATIO} x a one-shot timer's firing cost: "
        f"{fire_ratio:.2f} x {verdict(fire_ratio <= TARGET_RATIO)}; counting the one-shot "
        f"timer's add ({floor.add_us:.0f} µs, which an occurrence does not need): "
        f"{whole_ratio:.2f} x",
        other.note(),
    ]
    return table


def memory_table(count: int, one_shot: float, scheduled: float) -> Table:
    table = Table(
        f"Redis memory: {count:,} pending, same callback",
        ["what", "bytes each"],
        [
            ["one-shot timer", fmt(one_shot)],
            ["schedule with its pending occurrence", fmt(scheduled)],
            ["a schedule beyond its target (the difference)", fmt(scheduled - one_shot)],
        ],
    )
    table.notes = ["used_memory (INFO memory) after adding, minus before, on an empty server"]
    return table


async def run(args: argparse.Namespace, bench: ScheduleBench, tables: list[Table]) -> None:
    progress(f"memory: {args.schedules:,} one-shot timers, then {args.schedules:,} schedules")
    one_shot, scheduled = await bench.memory(args.schedules, args.every)
    emit(memory_table(args.schedules, one_shot, scheduled), tables)
    other = OtherLoad(bench.server.pid, bench.receiver.pid)
    progress(f"firing: {args.schedules:,} one-shot timers over {args.every:g} s")
    floor = await bench.one_shot(args.schedules, args.every)
    progress(f"firing: {args.schedules:,} schedules every {args.every:g} s")
    periods = [floor, await bench.scheduled(args.schedules, args.every)]
    emit(firing_table(periods, args.every, other), tables)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    tables: list[Table] = []
    emit(machine_table(sample_other_load()), tables)
    steady_gc()
    with private_redis("tickwheel-bench-schedules-") as server:
        tables[0].rows += server.rows()
        meter = whole = OtherLoad(server.pid)
        with receiving(LEAN_RECEIVER_SOURCE, meter, whole) as receiver:
            bench = ScheduleBench(server, receiver)

            async def go() -> None:
                try:
                    await run(args, bench, tables)
                finally:
                    await bench.close()

            uvloop.run(go())  # the loop `tickwheel worker` runs on
    if args.markdown:
        write_markdown(args.markdown, tables, "Schedule benchmark")


if __name__ == "__main__":
    main()
