"""Tenants benchmark (issue 23): what checking a token and its quotas adds to `POST /v1/timers`.

Two ``tickwheel serve --no-worker`` processes on SQLite files: one with ``--token`` (one token,
compared as before), one with ``--tokens FILE`` whose tenant has every quota (``max_pending``,
``max_queues``, ``creates_per_second`` set high enough never to refuse). Rounds alternate
between them; each row is the median of its rounds. Target: ≤ 10 % more server CPU per request.

Run ``python bench/tenants.py`` (``--rounds N``, ``--requests N`` per round, ``--markdown PATH``).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import aiohttp
from harness.machine import HZ, machine_table, pid_ticks, sample_other_load
from harness.redis_server import free_port
from harness.report import Table, emit, fmt, verdict, write_markdown
from scenarios.api.posting import server

CLIENTS = 32
TARGET = 1.10
TOKEN = "bench-token-0123456789abcdef"
TOKENS = f"""
[[token]]
name = "bench"
token = "{TOKEN}"
queues = ["bench-*"]
role = "write"
max_pending = 100000000
max_queues = 1000
creates_per_second = 1000000
"""
BODY = {"delay": 3600, "queue": "bench-a", "callback": {"url": "https://example.com/hook"}}


async def post_round(port: int, requests: int) -> tuple[float, int]:
    """Send `requests` POSTs from `CLIENTS` keep-alive clients; return requests/s and non-201s."""
    url = f"http://127.0.0.1:{port}/v1/timers"
    headers = {"Authorization": f"Bearer {TOKEN}"}
    refused = 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=CLIENTS)) as session:

        async def client(n: int) -> None:
            nonlocal refused
            for _ in range(n):
                async with session.post(url, json=BODY, headers=headers) as answer:
                    await answer.read()
                    refused += answer.status != 201

        await asyncio.gather(*(client(4) for _ in range(CLIENTS)))  # warm the pool
        t0 = time.perf_counter()
        await asyncio.gather(*(client(requests // CLIENTS) for _ in range(CLIENTS)))
        return (requests // CLIENTS * CLIENTS) / (time.perf_counter() - t0), refused


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=3200)
    parser.add_argument("--markdown", metavar="PATH")
    args = parser.parse_args(argv)
    tables: list[Table] = []
    emit(machine_table(sample_other_load()), tables)
    with tempfile.TemporaryDirectory(prefix="tickwheel-bench-tenants-") as tmp:
        directory = Path(tmp)
        (directory / "tokens.toml").write_text(TOKENS)
        (directory / "tokens.toml").chmod(0o600)
        base = [sys.executable, "-m", "tickwheel", "serve", "--no-worker"]
        kinds = {
            "--token (one token)": ["--token", TOKEN],
            "--tokens FILE (tenant with quotas)": ["--tokens", str(directory / "tokens.toml")],
        }
        cpu: dict[str, list[float]] = {kind: [] for kind in kinds}
        rate: dict[str, list[float]] = {kind: [] for kind in kinds}
        refused = dict.fromkeys(kinds, 0)
        for n in range(args.rounds):
            for kind, extra in kinds.items():
                port = free_port()
                store = f"sqlite:///{directory}/{n}-{len(cpu[kind])}-{extra[0][2:]}.db"
                command = [*base, "--port", str(port), "--store", store, *extra]
                with server(command, port) as pid:
                    ticks0 = pid_ticks(pid)
                    per_s, bad = asyncio.run(post_round(port, args.requests))
                    cpu_s = (pid_ticks(pid) - ticks0) / HZ
                cpu[kind].append(cpu_s / (args.requests + 4 * CLIENTS) * 1e6)
                rate[kind].append(per_s)
                refused[kind] += bad
    out = Table(
        f"POST /v1/timers with and without tenants, {CLIENTS} clients, SQLite, "
        f"median of {args.rounds} alternating rounds of {args.requests}",
        ["server", "requests /s", "server CPU µs each", "non-201", "x --token", "target", "result"],
    )
    floor = statistics.median(cpu["--token (one token)"])
    for n, kind in enumerate(kinds):
        ratio = statistics.median(cpu[kind]) / floor
        out.rows.append(
            [
                kind,
                fmt(statistics.median(rate[kind])),
                fmt(statistics.median(cpu[kind])),
                str(refused[kind]),
                f"{ratio:.2f}",
                "—" if n == 0 else f"≤ {TARGET:.2f}",
                "floor" if n == 0 else verdict(ratio <= TARGET),
            ]
        )
    out.notes = [
        "server CPU from /proc per request, warm-up included; each round a fresh process and "
        "SQLite file; the clients (aiohttp, this process) share the same 2 vCPUs"
    ]
    emit(out, tables)
    if args.markdown:
        write_markdown(args.markdown, tables, "Tenants benchmark")


if __name__ == "__main__":
    main()
