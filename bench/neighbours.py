"""Noisy-neighbour benchmark (issue 23): one tenant's flood at ports that never answer against
another tenant's timers to a prompt receiver, on Redis with two workers and on SQLite.

Run ``python bench/neighbours.py`` (``--quick`` for a smoke run, ``--rounds N`` to read the
target on the median of N alone/beside pairs, ``--markdown [PATH]`` for the tables as Markdown).

Tenant A puts N timers due at one instant, spread over Q queues, to P loopback ports that accept
and never answer (a callback timeout of 120 s); tenant B meanwhile has M timers spread over S
seconds to a prompt receiver (httptools, in a child process), its first ``--b-ahead`` seconds
before A's instant: a tenant already running when the flood lands (0: both start on a cold
worker at the same instant). A's timers are added 2 s before their instant, while B's fire.
Each store runs B alone, then B
beside A, in the same run; the workers are real `tickwheel serve` / `tickwheel worker`
processes. Target: B's p99 lateness beside A at most twice alone, none of B's lost, early or dead.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import uvloop
from harness.machine import machine_table, sample_other_load
from harness.redis_server import OwnRedis, private_redis
from harness.report import Table, emit, finish, fmt, progress
from scenarios.engine.receivers import LEAN_RECEIVER_SOURCE, ReceiverProcess
from scenarios.neighbours.hanging import hanging_ports
from scenarios.neighbours.runs import Load, Result, run_once

TARGET_RATIO = 2.0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small counts: a smoke run")
    parser.add_argument("--stores", default="redis,sqlite", help="redis, sqlite or both")
    parser.add_argument("--a-timers", type=int, default=20_000)
    parser.add_argument("--a-queues", type=int, default=1_000)
    parser.add_argument("--a-ports", type=int, default=64)
    parser.add_argument("--b-timers", type=int, default=1_000)
    parser.add_argument("--b-span", type=float, default=10.0, help="seconds B's timers span")
    parser.add_argument(
        "--rounds", type=int, default=1,
        help="B alone then beside A this many times per store; the target is read on the median",
    )  # fmt: skip
    parser.add_argument(
        "--b-ahead", type=float, default=2.0,
        help="seconds from B's first due time to A's instant (0: both at once, on a cold worker)",
    )  # fmt: skip
    parser.add_argument(
        "--logs",
        metavar="DIR",
        help="keep the workers' logs and B's lateness in arrival order in DIR",
    )
    parser.add_argument(
        "--markdown", nargs="?", const="-", metavar="PATH",
        help="also print the tables as Markdown (to PATH when given)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.quick:
        args.a_timers, args.a_queues, args.b_timers, args.b_span = 2000, 100, 200, 4.0
    return args


def row(store: str, label: str, result: Result) -> list[str]:
    return [
        store,
        label,
        f"{result.arrived:,} of {result.sent:,}",
        fmt(result.p(0.5), 1),
        fmt(result.p(0.99), 1),
        fmt(max(result.late_ms, default=float("nan")), 1),
        str(result.lost),
        str(result.early),
        str(result.dead),
        str(result.duplicates),
    ]


async def run(args: argparse.Namespace, server: OwnRedis | None, tables: list[Table]) -> None:
    load = Load(
        a_timers=args.a_timers,
        a_queues=args.a_queues,
        a_timeout_s=120.0,
        b_timers=args.b_timers,
        b_span_s=args.b_span,
        lead_s=4.0,
        b_ahead_s=args.b_ahead,
    )
    table = Table(
        f"Tenant B ({load.b_timers:,} timers over {load.b_span_s:g} s to a prompt receiver, "
        f"the first {load.b_ahead_s:g} s before A's instant) "
        f"alone and beside tenant A ({load.a_timers:,} timers at one instant over "
        f"{load.a_queues:,} queues to {args.a_ports} ports that never answer)",
        ["store", "run", "B arrived", "p50 ms", "p99 ms", "max ms", "lost", "early", "dead",
         "duplicates"],
    )  # fmt: skip
    receiver = ReceiverProcess(LEAN_RECEIVER_SOURCE)
    try:
        with hanging_ports(args.a_ports) as hanging, tempfile.TemporaryDirectory() as tmp:
            directory = Path(args.logs or tmp)
            for store in args.stores.split(","):
                workers = 2 if store == "redis" else 1
                ratios: list[float] = []
                clean = True
                for round_no in range(1, args.rounds + 1):
                    results: list[Result] = []
                    for label, flood in (("B alone", None), ("B beside A", hanging)):
                        if store == "redis":
                            assert server is not None
                            url = f"{server.url}?prefix=nb{uuid.uuid4().hex[:8]}"
                        else:
                            url = f"sqlite:///{directory}/{uuid.uuid4().hex[:8]}.db"
                        if args.rounds > 1:
                            label = f"{label}, round {round_no}"
                        progress(f"{store}: {label}, {workers} worker process(es)")
                        result = await run_once(url, workers, load, receiver, flood, directory)
                        table.rows.append(row(f"{store} ({workers} workers)", label, result))
                        results.append(result)
                    alone, beside = results
                    ratios.append(beside.p(0.99) / max(alone.p(0.99), 1.0))
                    clean = clean and beside.lost == beside.early == beside.dead == 0
                ratio = statistics.median(ratios)
                ok = ratio <= TARGET_RATIO and clean
                each = (
                    f" (rounds: {', '.join(f'{r:.2f}' for r in ratios)})" if len(ratios) > 1 else ""
                )
                table.notes.append(
                    f"{store}: p99 beside A / alone = {ratio:.2f}{each} (target ≤ "
                    f"{TARGET_RATIO:g}{', the median' if each else ''}); {'PASS' if ok else 'FAIL'}"
                )
    finally:
        receiver.stop()
    table.notes.append(
        "lateness: arrival at the receiver minus the timer's due time (Tickwheel-Due), epoch ms; "
        "lost: not arrived 10 s after B's last due time; the floor of each ratio is 1 ms"
    )
    emit(table, tables)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    if args.logs:
        Path(args.logs).mkdir(parents=True, exist_ok=True)
    tables: list[Table] = []
    start_s = time.monotonic()
    with private_redis("tickwheel-bench-neighbours-") as server:
        machine = machine_table(sample_other_load())
        machine.rows += server.rows()
        emit(machine, tables)
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(run(args, server, tables))
    finish(tables, start_s, args.markdown, "tickwheel noisy-neighbour benchmark")


if __name__ == "__main__":
    main()
