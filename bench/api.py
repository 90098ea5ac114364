"""API benchmark (issue 15): `POST /v1/timers` from 64 concurrent clients, `tickwheel serve
--no-worker` on Redis beside a bare FastAPI + uvicorn endpoint parsing the same body.

Run ``python bench/api.py`` (``--requests N``, default 12,800; ``--markdown PATH``). It starts
its own ``redis-server`` and both servers on free loopback ports, and stops them at the end.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from harness.machine import OtherLoad, machine_table, sample_other_load
from harness.redis_server import private_redis
from harness.report import Table, emit, fmt, verdict, write_markdown
from scenarios.api.posting import CLIENTS, Rate, rates

TARGET = 0.6


def table(rows: list[Rate], other: OtherLoad) -> Table:
    floor = rows[0].per_s
    out = Table(
        f"POST /v1/timers, {CLIENTS} concurrent keep-alive clients",
        ["server", "requests /s", "server CPU µs each", "statuses", "x bare", "target", "result"],
    )
    for n, row in enumerate(rows):
        ratio = row.per_s / floor
        out.rows.append(
            [
                row.label,
                fmt(row.per_s),
                fmt(row.server_cpu_us),
                " ".join(f"{code}:{count}" for code, count in sorted(row.statuses.items())),
                f"{ratio:.2f}",
                "—" if n == 0 else f"≥ {TARGET}",
                "floor" if n == 0 else verdict(ratio >= TARGET),
            ]
        )
    out.notes = [
        "body {'delay': 3600, 'callback': {'url': 'https://example.com/hook', 'body': 'hi'}}; "
        "the clients (aiohttp, this process) and each server run in their own processes on the "
        "same 2 vCPUs; both servers run uvicorn with h11 on uvloop",
        other.note(),
    ]
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=12_800)
    parser.add_argument("--markdown", metavar="PATH")
    args = parser.parse_args(argv)
    tables: list[Table] = []
    emit(machine_table(sample_other_load()), tables)
    with private_redis("tickwheel-bench-api-") as redis_server:
        tables[0].rows += redis_server.rows()
        other = OtherLoad(redis_server.pid)
        emit(table(rates(redis_server.url, args.requests), other), tables)
    if args.markdown:
        write_markdown(args.markdown, tables, "API benchmark")


if __name__ == "__main__":
    main()
