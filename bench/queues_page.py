"""Queue table benchmark (issue 23): ``GET /v1/queues?limit=100`` and ``GET /v1/queues/{q}``
with 10,000 queues, before (another source tree: the store counted every queue per request)
and after (a page or a queue read from the store), on SQLite and Redis.

Run ``python bench/queues_page.py --before SRC`` (SRC: the ``src`` of a checkout of the older
version, say ``git worktree add --detach /tmp/base main``; ``--quick`` for a smoke run,
``--queues N``, ``--requests N`` per round and route, ``--rounds N``, ``--markdown [PATH]``).
Each version fills its own store (so each writes its own layout: the older SQLite schema, a
Redis keyspace without the index of queue names) with N queues of one timer each, due in an
hour, and runs ``tickwheel serve --no-worker`` on it; this process then times the routes
against the two servers in turn, the order alternating round by round, one request at a time
on a keep-alive connection. The routes: the first page, a page from the middle (a cursor),
and one queue from the middle. Then, for what the new index of done timers by queue costs the
firing path on SQLite, claim and ack of ``--acks N`` timers (100 queues, due now), each version
in a child process, alternating (``--acks 0`` skips it).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path

import httpx
from harness.machine import OtherLoad, machine_table, sample_other_load
from harness.redis_server import private_redis
from harness.report import Table, emit, finish, fmt, pct, progress
from scenarios.idle.serving import Fill, fill, fill_with
from scenarios.queues_page.acks import run_with
from scenarios.queues_page.api import latencies_ms, serving


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, default=None, help="src dir of the older version")
    parser.add_argument("--queues", type=int, default=10_000, help="queues in each store")
    parser.add_argument("--requests", type=int, default=20, help="per round, route and version")
    parser.add_argument("--rounds", type=int, default=6, help="rounds, the order alternating")
    parser.add_argument("--stores", default="sqlite,redis", help="comma-separated")
    parser.add_argument("--acks", type=int, default=50_000, help="timers claimed and acked")
    parser.add_argument("--quick", action="store_true", help="1,000 queues, 2 rounds of 5")
    parser.add_argument("--markdown", nargs="?", const="-", default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.queues, args.requests, args.rounds, args.acks = 1000, 5, 2, 5000
    return args


def routes(queues: int) -> dict[str, str]:
    middle = f"q{queues // 2:05d}"
    return {
        "GET /v1/queues?limit=100": "/v1/queues?limit=100",
        "GET /v1/queues?limit=100&cursor=(middle)": f"/v1/queues?limit=100&cursor={middle}",
        "GET /v1/queues/{q} (middle)": f"/v1/queues/{middle}",
    }


def measure(backend: str, urls: dict[str, str], args: argparse.Namespace, workdir: Path) -> Table:
    versions = {"after": None, "before": args.before} if args.before else {"after": None}
    case = Fill("queues", args.queues, 0)
    for version, src in versions.items():
        progress(f"{backend}: {version} fills {args.queues:,} queues")
        if src is None:
            asyncio.run(fill(urls[version], case))
        else:
            fill_with(src, urls[version], case)
    took: dict[tuple[str, str], list[float]] = {}
    load = OtherLoad()
    with ExitStack() as stack:
        bases = {
            v: stack.enter_context(serving(urls[v], workdir, src)) for v, src in versions.items()
        }
        clients = {v: stack.enter_context(httpx.Client(base_url=base)) for v, base in bases.items()}
        for client in clients.values():  # warm: first requests load modules and caches
            for path in routes(args.queues).values():
                latencies_ms(client, path, 2)
        order = list(versions)
        for n in range(args.rounds):
            for v in order if n % 2 == 0 else order[::-1]:
                for route, path in routes(args.queues).items():
                    took.setdefault((v, route), []).extend(
                        latencies_ms(clients[v], path, args.requests)
                    )
            progress(f"{backend}: round {n + 1} of {args.rounds}")
    table = Table(
        f"Queue routes on {backend} with {args.queues:,} queues: ms per request",
        ["route", "version", "median", "p90", "before ÷ after (median)"],
    )
    for route in routes(args.queues):
        after = statistics.median(took[("after", route)])
        for v in versions:
            samples = took[(v, route)]
            ratio = f"{statistics.median(samples) / after:.1f}" if v == "before" else ""
            table.rows.append(
                [route, v, fmt(statistics.median(samples), 2), fmt(pct(samples, 0.9), 2), ratio]
            )
    table.notes.append(
        f"{args.rounds} rounds of {args.requests} requests per route and version, the versions' "
        "order alternating; one request at a time on a keep-alive connection; "
        "`serve --no-worker`, each version on a store it filled itself"
    )
    table.notes.append(load.note())
    return table


def acks_table(args: argparse.Namespace) -> Table:
    """Claim and ack on SQLite, before and after, alternating: µs per timer."""
    took: dict[str, list[float]] = {"after": [], "before": []}
    load = OtherLoad()
    for n in range(args.rounds):
        for version in ("after", "before") if n % 2 == 0 else ("before", "after"):
            src = None if version == "after" else args.before
            took[version].append(run_with(src, args.acks) / args.acks * 1e6)
        progress(f"SQLite claim + ack: round {n + 1} of {args.rounds}")
    after, before = statistics.median(took["after"]), statistics.median(took["before"])
    table = Table(
        f"SQLite claim (1,000 a call) + ack_many of {args.acks:,} timers: µs per timer",
        ["version", "median", "rounds", "after ÷ before"],
    )
    for version, median in (("before", before), ("after", after)):
        rounds = ", ".join(f"{x:.1f}" for x in took[version])
        ratio = f"{after / before:.2f}" if version == "after" else ""
        table.rows.append([version, fmt(median, 1), rounds, ratio])
    table.notes.append("each run a fresh file in a child process; the versions alternate")
    table.notes.append(load.note())
    return table


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    tables: list[Table] = []
    start_s = time.monotonic()
    emit(machine_table(sample_other_load()), tables)
    stores = args.stores.split(",")
    with tempfile.TemporaryDirectory(prefix="tickwheel-bench-queues-") as tmp:
        workdir = Path(tmp)
        if "sqlite" in stores:
            urls = {v: f"sqlite:///{workdir}/{v}.db" for v in ("before", "after")}
            emit(measure("SQLite", urls, args, workdir), tables)
        if "redis" in stores:
            with private_redis("tickwheel-bench-queues-") as server:
                urls = {
                    v: f"{server.url}/0?prefix=q{v}{uuid.uuid4().hex[:8]}"
                    for v in ("before", "after")
                }
                emit(measure("Redis", urls, args, workdir), tables)
    if args.acks and args.before is not None:
        emit(acks_table(args), tables)
    finish(tables, start_s, args.markdown, "tickwheel queue table benchmark")


if __name__ == "__main__":
    main()
