"""Idle benchmark (issue 23): the CPU an idle `tickwheel serve` uses with many host limits and
queues in its store, against the same with none.

Run ``python bench/idle.py`` (``--quick`` for a smoke run, ``--window S`` seconds measured per
run, ``--rounds N``, ``--markdown [PATH]``). For each store (SQLite in a temp dir, and a
private ``redis-server`` on a free loopback port), it fills one store per case: nothing;
20,000 host limits; 10,000 queues (one timer each, due in an hour) and 20,000 host limits. Then
it starts ``tickwheel serve`` (API and worker) on each in turn, rounds alternating the cases,
and counts the server process's CPU seconds (user + system, from /proc) over the window after
a warm-up. Nothing fires meanwhile: what is measured is what idling costs.

Target: with 10,000 queues and 20,000 host limits, at most 1.2 x the CPU with none.
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

from harness.machine import OtherLoad, machine_table, sample_other_load
from harness.redis_server import private_redis
from harness.report import Table, emit, finish, fmt, progress
from scenarios.idle.serving import Fill, fill, fill_with, serve_cpu_s

TARGET_RATIO = 1.2
CASES = (
    Fill("none", 0, 0),
    Fill("20,000 host limits", 0, 20_000),
    Fill("10,000 queues + 20,000 host limits", 10_000, 20_000),
)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=float, default=20.0, help="seconds measured per run")
    parser.add_argument("--warm", type=float, default=6.0, help="seconds before measuring")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each case per store")
    parser.add_argument("--stores", default="sqlite,redis", help="comma-separated")
    parser.add_argument("--quick", action="store_true", help="a 5 s window, one round")
    parser.add_argument(
        "--src",
        type=Path,
        default=None,
        help="fill the stores and run serve from this src dir (another checkout's, for a before)",
    )
    parser.add_argument("--markdown", nargs="?", const="-", default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.window, args.rounds, args.warm = 5.0, 1, 4.0
    return args


def measure(backend: str, urls: dict[str, str], args: argparse.Namespace, workdir: Path) -> Table:
    for case in CASES:
        progress(f"{backend}: filling '{case.name}'")
        if args.src is None:
            asyncio.run(fill(urls[case.name], case))
        else:
            fill_with(args.src, urls[case.name], case)
    cpu: dict[str, list[float]] = {case.name: [] for case in CASES}
    load = OtherLoad()
    for n in range(args.rounds):
        for case in CASES:
            used = serve_cpu_s(urls[case.name], args.warm, args.window, workdir, args.src)
            progress(f"{backend} round {n + 1}: {case.name}: {used:.2f} CPU s")
            cpu[case.name].append(used)
    origin = "" if args.src is None else f" (serve from {args.src})"
    table = Table(
        f"Idle `serve` on {backend}{origin}: CPU over {args.window:g} s",
        ["store holds", "CPU s (median)", "CPU % of a core", "x none", "target", "runs"],
    )
    none = statistics.median(cpu["none"])
    for case in CASES:
        used = statistics.median(cpu[case.name])
        ratio = used / none if none else float("nan")
        target = "" if case.name == "none" else f"≤ {TARGET_RATIO} x"
        verdict = "" if case.name == "none" else ("PASS" if ratio <= TARGET_RATIO else "FAIL")
        table.rows.append(
            [
                case.name,
                fmt(used, 2),
                fmt(used / args.window * 100, 1),
                f"{ratio:.2f}",
                f"{target} {verdict}".strip(),
                ", ".join(f"{x:.2f}" for x in cpu[case.name]),
            ]
        )
    table.notes.append(
        f"{args.rounds} rounds, cases alternating; {args.warm:g} s warm-up after start; "
        "the queues' timers are due in an hour; CPU of the serve process alone"
    )
    table.notes.append(load.note())
    return table


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    tables: list[Table] = []
    start_s = time.monotonic()
    emit(machine_table(sample_other_load()), tables)
    stores = args.stores.split(",")
    with tempfile.TemporaryDirectory(prefix="tickwheel-bench-idle-") as tmp:
        workdir = Path(tmp)
        if "sqlite" in stores:
            urls = {case.name: f"sqlite:///{workdir}/idle{n}.db" for n, case in enumerate(CASES)}
            emit(measure("SQLite", urls, args, workdir), tables)
        if "redis" in stores:
            with private_redis("tickwheel-bench-idle-") as server:
                urls = {
                    case.name: f"{server.url}/0?prefix=idle{uuid.uuid4().hex[:8]}" for case in CASES
                }
                emit(measure("Redis", urls, args, workdir), tables)
    finish(tables, start_s, args.markdown, "tickwheel idle benchmark")


if __name__ == "__main__":
    main()
