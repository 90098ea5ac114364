"""HTTP callbacks through `tickwheel serve` (issue 24): the path a user deploys, beside an
earlier release's code in the same run.

Run ``python bench/serve_path.py --vs PATH`` (PATH: the ``src`` directory of an earlier
checkout, e.g. ``git worktree add /tmp/first 4adfd91`` then ``--vs /tmp/first/src``), or
``--attempts-on-off``: this checkout with its attempt history (``--attempt-history 20``, the
default) beside itself with none recorded (``--attempt-history 0``).

Each run starts `python -m tickwheel serve` (API and worker in one process) on a private
redis-server (or a fresh SQLite file, or a schema on a PostgreSQL server of its own), creates ``rate * span`` timers through
``POST /v1/timers/batch`` due evenly over ``span`` seconds from ``lead`` seconds after the
creates began, and a lean receiver in its own process records each callback's lateness
(arrival minus ``Tickwheel-Due``). The code under test and the earlier code run alternately,
``--runs`` times each per rate, so a change in the machine's load hits both alike.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import uvloop
from harness.machine import OtherLoad, machine_table, sample_other_load
from harness.redis_server import OwnRedis, private_redis
from harness.report import Table, emit, finish, fmt, progress
from scenarios.engine.receivers import LEAN_RECEIVER_SOURCE, ReceiverProcess
from scenarios.serve_path.runs import Code, Result, run_once

HERE = Path(__file__).resolve().parents[1] / "src"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vs", type=Path, help="src directory of the earlier code to run beside")
    parser.add_argument("--rates", default="5000,10000", help="offered rates, timers/s")
    parser.add_argument("--span", type=float, default=4.0, help="seconds the due times span")
    parser.add_argument("--lead", type=float, default=28.0, help="seconds from create to due")
    parser.add_argument("--settle", type=float, default=8.0, help="seconds after the last due")
    parser.add_argument("--runs", type=int, default=3, help="runs of each code at each rate")
    parser.add_argument("--store", choices=("redis", "sqlite", "postgres"), default="redis")
    parser.add_argument(
        "--serves", type=int, default=1,
        help="serve processes on the store at once (creates go through the first's API)",
    )  # fmt: skip
    parser.add_argument(
        "--via", choices=("api", "store"), default="api",
        help="create through serve's API, or add_many straight to the store (this checkout's)",
    )  # fmt: skip
    parser.add_argument(
        "--attempts-on-off", action="store_true",
        help="this checkout recording 20 attempts a timer beside itself recording none",
    )  # fmt: skip
    parser.add_argument("--logs", type=Path, help="keep serve's logs in this directory")
    parser.add_argument("--quick", action="store_true", help="one run at 2,000/s over 2 s")
    parser.add_argument(
        "--markdown", nargs="?", const="-", metavar="PATH",
        help="also print the tables as Markdown (to PATH when given)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.quick:
        args.rates, args.span, args.lead, args.settle, args.runs = "2000", 2.0, 8.0, 4.0, 1
    return args


def spread(values: list[float], digits: int = 0) -> str:
    """Median and range of several runs."""
    if not values:
        return "-"
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{fmt(mid, digits)} ({fmt(low, digits)} to {fmt(high, digits)})"


def summary(results: list[Result]) -> list[str]:
    first = results[0]
    return [
        first.code,
        f"{first.rate:,}",
        str(len(results)),
        spread([r.achieved_per_s for r in results]),
        spread([r.p(0.5) for r in results], 1),
        spread([r.p(0.99) for r in results], 1),
        spread([max(r.late_ms, default=float("nan")) for r in results]),
        " ".join(str(r.lost) for r in results),
        " ".join(str(r.early) for r in results),
        " ".join(str(r.duplicates) for r in results),
        spread([cpu_each_us(r) for r in results]),
    ]


def cpu_each_us(result: Result) -> float:
    return result.serve_cpu_s * 1e6 / max(result.arrived, 1)


def on_off_note(rate: int, on: list[Result], off: list[Result]) -> str:
    """Serve's CPU per callback recording attempts over not, pair by pair (each pair ran back
    to back, so the machine's load hit both alike)."""
    ratios = [cpu_each_us(a) / cpu_each_us(b) for a, b in zip(on, off, strict=True)]
    shown = ", ".join(f"{ratio:.3f}" for ratio in ratios)
    return (
        f"{rate:,}/s: CPU per callback with attempt history ÷ without, pair by pair: {shown}; "
        f"median {statistics.median(ratios):.3f}"
    )


def serves_text(serves: int) -> str:
    return "one `tickwheel serve`" if serves == 1 else f"{serves} `tickwheel serve` processes"


def store_url(args: argparse.Namespace, server: OwnRedis | None, directory: Path) -> str:
    if args.store == "redis":
        assert server is not None
        return f"{server.url}?prefix=sp{uuid.uuid4().hex[:8]}"
    if args.store == "postgres":
        return f"{args.postgres_url}?schema=sp{uuid.uuid4().hex[:8]}"
    return f"sqlite:///{directory}/{uuid.uuid4().hex[:8]}.db"


async def run(args: argparse.Namespace, server: OwnRedis | None, tables: list[Table]) -> None:
    codes = [Code("this checkout", HERE)]
    if args.attempts_on_off:
        codes = [
            Code("attempt history 20", HERE, ("--attempt-history", "20")),
            Code("attempt history off", HERE, ("--attempt-history", "0")),
        ]
    if args.vs:
        codes.append(Code(f"earlier ({args.vs})", args.vs.resolve()))
    table = Table(
        f"HTTP callbacks through {serves_text(args.serves)} on {args.store}: timers created through "
        f"the {'API' if args.via == 'api' else 'store'} {args.lead:g} s ahead, due evenly over {args.span:g} s; median (range) of "
        f"{args.runs} runs, the codes alternating",
        ["code", "offered /s", "runs", "achieved /s", "p50 ms", "p99 ms", "max ms", "lost",
         "early", "duplicates", "serve CPU µs each"],
    )  # fmt: skip
    meter = OtherLoad(server.pid if server else None)
    receiver = ReceiverProcess(LEAN_RECEIVER_SOURCE)
    meter.track(receiver.pid)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            logs = args.logs or Path(tmp)
            for rate in (int(r) for r in args.rates.split(",")):
                results: dict[str, list[Result]] = {code.label: [] for code in codes}
                for n in range(args.runs):
                    for code in codes if n % 2 == 0 else codes[::-1]:
                        progress(f"{rate:,}/s, run {n + 1} of {args.runs}: {code.label}")
                        result = await run_once(
                            code, store_url(args, server, Path(tmp)), receiver, rate=rate,
                            span_s=args.span, lead_s=args.lead, settle_s=args.settle, meter=meter,
                            via_api=args.via == "api", serves=args.serves,
                            log=logs / f"serve-{rate}-{n}-{len(results[code.label])}-"
                            f"{codes.index(code)}.log",
                        )  # fmt: skip
                        progress(
                            f"   {result.arrived:,} of {result.sent:,} arrived, "
                            f"{result.achieved_per_s:,.0f}/s, p99 {result.p(0.99):,.1f} ms"
                        )
                        results[code.label].append(result)
                table.rows += [summary(runs) for runs in results.values()]
                if args.attempts_on_off:
                    table.notes.append(on_off_note(rate, *results.values()))
    finally:
        receiver.stop()
    table.notes += [
        "achieved: arrived ÷ (last arrival - first due time), at least the span; lateness: "
        "arrival minus Tickwheel-Due; lost: not arrived `--settle` s after the last due time",
        "serve: `python -m tickwheel serve --allow-private-targets` with its defaults (one "
        "process: API and worker, uvloop); receiver: httptools + uvloop in its own process",
        meter.note(),
    ]
    emit(table, tables)


@contextlib.contextmanager
def own_postgres(args: argparse.Namespace) -> Iterator[Any]:
    """A PostgreSQL server of the bench's own (tests/pg_server.py) when the store is postgres."""
    if args.store != "postgres":
        yield None
        return
    sys.path.insert(0, str(HERE.parent / "tests"))
    from pg_server import PostgresServer

    server = PostgresServer(durable=True)
    try:
        server.start()
        args.postgres_url = server.url
        yield server
    finally:
        server.remove()


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    if args.logs:
        args.logs.mkdir(parents=True, exist_ok=True)
    tables: list[Table] = []
    start_s = time.monotonic()
    with private_redis("tickwheel-bench-serve-") as server, own_postgres(args) as postgres:
        machine = machine_table(sample_other_load())
        machine.rows += server.rows()
        if postgres is not None:
            machine.rows.append(["postgresql", f"{postgres.url} (own, durable commits)"])
        emit(machine, tables)
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(run(args, server if args.store == "redis" else None, tables))
    finish(tables, start_s, args.markdown, "tickwheel serve-path benchmark")


if __name__ == "__main__":
    main()
