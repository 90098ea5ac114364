"""API benchmark (issues 15, 24): `POST /v1/timers` from 64 keep-alive connections,
`tickwheel serve --no-worker` on Redis with 1 and 2 API processes beside a FastAPI endpoint
parsing the same body under plain `uvicorn` (httptools, uvloop).

Run ``python bench/api.py`` (``--requests N``, default 12,800 a measurement; ``--rounds R``,
default 3, the servers alternating within each round; ``--markdown PATH``). ``--candidates
DIR`` adds the tickwheel app under other servers (uvicorn h11 and httptools, granian,
hypercorn; the last two installed with ``pip install --target DIR granian hypercorn``).
``--before SRC`` adds ``tickwheel serve`` run from another tree's ``src`` (say ``git archive
f81f7bc src | tar -x -C /tmp/before`` and ``--before /tmp/before/src``). It starts its own
``redis-server``, the servers and a load-generator process per measurement on free loopback
ports, and stops them at the end. Last, the route stack alone: each app called in process
(``--batches B`` alternating batches of 1,000, default 15).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence

from harness.machine import OtherLoad, machine_table, sample_other_load
from harness.redis_server import private_redis
from harness.report import Table, emit, finish, fmt, verdict
from scenarios.api import inprocess
from scenarios.api.candidates import candidates, probe_head
from scenarios.api.posting import (
    BODY,
    CONNECTIONS,
    Running,
    alternate,
    before_server,
    floor_server,
    serve_server,
    started,
)

TARGET = 0.6


def ratios(run: Running, floor: Running) -> list[float]:
    """Each round's rate over the floor's in the same round."""
    return [s.per_s / f.per_s for s, f in zip(run.samples, floor.samples, strict=True)]


def table(running: list[Running], probes: dict[str, str], other: OtherLoad) -> Table:
    floor = next(run for run in running if run.server.floor)
    out = Table(
        f"POST /v1/timers, {CONNECTIONS} keep-alive connections, {len(floor.samples)} "
        "alternating rounds",
        ["server", "requests /s (median, range)", "server CPU µs each", "client CPU µs each",
         "statuses", "2 MiB of headers", "x floor (median, range)", "target", "result"],
    )  # fmt: skip
    for run in running:
        rates = [s.per_s for s in run.samples]
        each = ratios(run, floor)
        statuses: dict[int, int] = {}
        for sample in run.samples:
            for code, count in sample.statuses.items():
                statuses[code] = statuses.get(code, 0) + count
        # the default is graded; a second API process pays only where a core is free
        graded = run.server.label.startswith("`tickwheel serve --no-worker --api-workers 1`")
        ratio = statistics.median(each)
        out.rows.append(
            [
                run.server.label,
                f"{fmt(statistics.median(rates))} ({fmt(min(rates))} to {fmt(max(rates))})",
                fmt(statistics.median(s.server_cpu_us for s in run.samples)),
                fmt(statistics.median(s.client_cpu_us for s in run.samples)),
                " ".join(f"{code}:{count}" for code, count in sorted(statuses.items())),
                probes[run.server.label],
                "1.00" if run.server.floor else f"{ratio:.2f} ({min(each):.2f} to {max(each):.2f})",
                f"≥ {TARGET}" if graded else "—",
                "floor" if run.server.floor else verdict(ratio >= TARGET) if graded else "info",
            ]
        )
    out.notes = [
        f"body {BODY}; the load generator is a process of its own (asyncio protocols on uvloop, "
        "one request in flight per connection), its CPU in its own column; servers and client "
        "share the same 2 vCPUs with the redis-server",
        "server CPU counts every process of the server (the API processes of `--api-workers 2`) "
        "over warm-up and timed requests; '2 MiB of headers': one header sent 64 KiB at a time, "
        "what the server answered and how much it had taken by then",
        other.note(),
    ]
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=12_800)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--candidates", metavar="DIR")
    parser.add_argument("--before", metavar="SRC")
    parser.add_argument("--batches", type=int, default=15)
    parser.add_argument("--markdown", metavar="PATH")
    args = parser.parse_args(argv)
    start_s = time.monotonic()
    tables: list[Table] = []
    emit(machine_table(sample_other_load()), tables)
    with private_redis("tickwheel-bench-api-") as redis_server:
        tables[0].rows += redis_server.rows()
        servers = [
            floor_server(),
            serve_server(redis_server.url, 1),
            serve_server(redis_server.url, 2),
        ]
        if args.before:
            servers.append(before_server(redis_server.url, args.before))
        if args.candidates:
            servers += candidates(redis_server.url, args.candidates)
        with started(servers) as running:
            other = OtherLoad(redis_server.pid, *(run.process.pid for run in running))
            alternate(running, args.requests, args.rounds)
            probes = {run.server.label: probe_head(run.port) for run in running}
            emit(table(running, probes, other), tables)
    emit(inprocess.rows(args.batches, 1000, args.before), tables)
    finish(tables, start_s, args.markdown, "API benchmark")


if __name__ == "__main__":
    main()
