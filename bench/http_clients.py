"""HTTP client benchmark: callbacks/s of aiohttp, httpx and tickwheel's own client, pooled.

Run ``python bench/http_clients.py`` (``--requests``, ``--concurrency``, ``--pools``, ``--runs``,
``--clients``, ``--uvloop``, ``--markdown PATH``). It starts ``tickwheel.testing``'s receiver
(aiohttp, on uvloop when installed) in its own process on a free loopback port, then, for each
client and pool size (aiohttp, httpx, tickwheel's `HttpClient` on its own and `HttpTarget` on
top of it), POSTs ``--requests`` callbacks with ``--concurrency`` in flight, carrying the
headers a real callback carries (timer id, attempt, due, idempotency key, HMAC signature, user agent, JSON body). Clients
alternate over ``--runs`` runs; the table gives the best and the spread, and the CPU each side
used per request (the client's is what a worker pays). The receiver is stopped by its pid.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from urllib.parse import urlsplit

import aiohttp
import httpx
from harness.machine import HZ, cpu_ticks, machine_table, pid_ticks, sample_other_load
from harness.report import Table, emit, fmt, write_markdown

from tickwheel.callbacks.http import HttpTarget
from tickwheel.callbacks.httpclient import HttpClient
from tickwheel.callbacks.settings import HttpSettings
from tickwheel.callbacks.signing import sign
from tickwheel.engine.outcome import Verdict
from tickwheel.model import Callback, RetryPolicy, Timer

SECRET = "bench-secret"
BODY = b'{"order_id": 123456, "action": "expire", "tenant": "acme", "note": "benchmark body"}'
Post = Callable[[int], Awaitable[None]]


@contextlib.contextmanager
def receiver_process() -> Iterator[tuple[str, int]]:
    """Run the receiver in a child process; yield its URL and pid; stop it by pid."""
    code = "from tickwheel.testing import run_receiver; run_receiver('127.0.0.1', 0, None, True)"
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, bufsize=1
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        if not line.startswith("receiving on "):
            raise RuntimeError(f"receiver did not start: {line!r}")
        yield line.removeprefix("receiving on ").strip(), child.pid
    finally:
        child.terminate()
        child.wait(timeout=10)


def callback_headers(i: int) -> dict[str, str]:
    """Return the headers of callback `i`, as the HTTP target sends them."""
    timer_id = f"01JBENCH{i:018d}"
    return {
        "Content-Type": "application/json",
        "Tickwheel-Timer-Id": timer_id,
        "Tickwheel-Attempt": "1",
        "Tickwheel-Due": str(time.time_ns() // 1_000_000),
        "Idempotency-Key": timer_id,
        "Tickwheel-Signature": sign(SECRET, BODY, int(time.time())),
        "User-Agent": "tickwheel/bench",
    }


@dataclass
class Client:
    """One client under test: opens a `post(i)` function for a pool size and closes it."""

    name: str
    open: Callable[[str, int], Awaitable[tuple[Post, Callable[[], Awaitable[None]]]]]


async def open_aiohttp(url: str, pool: int) -> tuple[Post, Callable[[], Awaitable[None]]]:
    """A pooled aiohttp session, as HttpTarget used it until it moved to HttpClient."""
    connector = aiohttp.TCPConnector(limit=pool, limit_per_host=pool)
    session = aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=10), auto_decompress=False
    )

    async def post(i: int) -> None:
        async with session.post(url, data=BODY, headers=callback_headers(i)) as reply:
            await reply.read()
            if reply.status != 200:
                raise RuntimeError(f"HTTP {reply.status}")

    return post, session.close


def spare_httpx_the_failed_import() -> bool:
    """Make httpcore's per-lock ``import sniffio`` fail fast when sniffio is not installed.

    httpcore (1.0.9) imports sniffio each time it creates a lock or an event; without sniffio
    every such import searches sys.path again, about 30 % of httpx's client time in a profile.
    A ``None`` in sys.modules fails the import at once with the same result ("asyncio").
    """
    if importlib.util.find_spec("sniffio") is not None:
        return False
    sys.modules["sniffio"] = None  # type: ignore[assignment]
    return True


async def open_httpx(url: str, pool: int) -> tuple[Post, Callable[[], Awaitable[None]]]:
    """A pooled httpx.AsyncClient with the same pool size."""
    limits = httpx.Limits(max_connections=pool, max_keepalive_connections=pool)
    client = httpx.AsyncClient(limits=limits, timeout=10.0)

    async def post(i: int) -> None:
        reply = await client.post(url, content=BODY, headers=callback_headers(i))
        if reply.status_code != 200:
            raise RuntimeError(f"HTTP {reply.status_code}")

    return post, client.aclose


async def open_httpclient(url: str, pool: int) -> tuple[Post, Callable[[], Awaitable[None]]]:
    """tickwheel's HttpClient alone: the same headers written into request bytes per call."""
    client = HttpClient(allow_private=True, max_connections=pool, max_per_host=pool)
    parts = urlsplit(url)
    host, port = parts.hostname or "", parts.port or 80
    start = f"POST {parts.path or '/'} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
    end = f"Content-Length: {len(BODY)}\r\n\r\n".encode() + BODY

    async def post(i: int) -> None:
        lines = "".join(f"{name}: {value}\r\n" for name, value in callback_headers(i).items())
        reply = await client.request(("http", host, port), (start + lines).encode() + end, 10.0)
        if reply.status != 200:
            raise RuntimeError(f"HTTP {reply.status}")

    async def close() -> None:
        client.close()

    return post, close


async def open_target(url: str, pool: int) -> tuple[Post, Callable[[], Awaitable[None]]]:
    """tickwheel's HttpTarget (on HttpClient), private targets allowed, one Timer fired repeatedly."""
    target = HttpTarget(
        HttpSettings(
            signing_secret=SECRET,
            allow_private_targets=True,
            max_connections=pool,
            max_per_host=pool,
        )
    )
    callback = Callback(url=url, headers={"Content-Type": "application/json"}, body=BODY.decode())
    timer = Timer(
        id="01JBENCH000000000000000000",
        due_ms=time.time_ns() // 1_000_000,
        callback=callback,
        retry=RetryPolicy(timeout_s=10.0),
    )

    async def post(i: int) -> None:
        outcome = await target.fire(timer, 1)
        if outcome.verdict is not Verdict.ACK:
            raise RuntimeError(outcome.error)

    return post, target.close


CLIENTS = [
    Client("aiohttp", open_aiohttp),
    Client("httpx", open_httpx),
    Client("HttpClient", open_httpclient),
    Client("HttpTarget", open_target),
]


@dataclass
class Result:
    """Samples of one client at one pool size."""

    rates: list[float] = field(default_factory=list)
    client_us: list[float] = field(default_factory=list)
    receiver_us: list[float] = field(default_factory=list)
    other_cpus: list[float] = field(default_factory=list)


async def drive(post: Post, first: int, requests: int, concurrency: int) -> None:
    """Make `requests` calls of `post` with `concurrency` in flight."""
    next_i = first
    end = first + requests

    async def worker() -> None:
        nonlocal next_i
        while next_i < end:
            i = next_i
            next_i += 1
            await post(i)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def measure(
    client: Client, url: str, pid: int, pool: int, args: argparse.Namespace, result: Result
) -> None:
    """Warm a fresh pool up, then time one run of `args.requests` callbacks."""
    post, close = await client.open(url, pool)
    try:
        await drive(post, 0, min(2_000, args.requests), args.concurrency)
        machine0, receiver0 = cpu_ticks()[0], pid_ticks(pid)
        cpu0, t0 = time.process_time(), time.perf_counter()
        await drive(post, 10_000_000, args.requests, args.concurrency)
        seconds = time.perf_counter() - t0
        client_s = time.process_time() - cpu0
        receiver_s = (pid_ticks(pid) - receiver0) / HZ
        machine_s = (cpu_ticks()[0] - machine0) / HZ
    finally:
        await close()
    result.rates.append(args.requests / seconds)
    result.client_us.append(client_s / args.requests * 1e6)
    result.receiver_us.append(receiver_s / args.requests * 1e6)
    result.other_cpus.append(max(0.0, machine_s - client_s - receiver_s) / seconds)


def spread(values: Sequence[float]) -> str:
    """Return 'low-high' of `values`."""
    return f"{min(values):,.0f}-{max(values):,.0f}"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Read the command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--pools", type=int, nargs="+", default=[256, 64])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--clients",
        nargs="+",
        choices=[c.name for c in CLIENTS],
        default=[c.name for c in CLIENTS],
        help="which clients to measure (default all)",
    )
    parser.add_argument("--uvloop", action="store_true", help="run the clients on uvloop")
    parser.add_argument("--markdown", help="also write the tables as Markdown to this path")
    return parser.parse_args(argv)


async def run(args: argparse.Namespace) -> Table:
    """Measure every client at every pool size, alternating, and tabulate."""
    clients = [c for c in CLIENTS if c.name in args.clients]
    results = {(c.name, pool): Result() for c in clients for pool in args.pools}
    spared = spare_httpx_the_failed_import()
    with receiver_process() as (url, pid):
        for run_no in range(args.runs):
            order = clients if run_no % 2 == 0 else clients[::-1]
            for pool in args.pools:
                for client in order:
                    print(f"run {run_no + 1}: {client.name} pool {pool}", file=sys.stderr)
                    await measure(client, url, pid, pool, args, results[client.name, pool])
    versions = {
        name: metadata.version(name) for name in ("aiohttp", "httpx", "httpcore", "httptools")
    }
    table = Table(
        f"HTTP clients: {args.requests:,} POSTs, {args.concurrency} in flight, "
        f"best of {args.runs} runs",
        [
            "client",
            "pool",
            "callbacks/s (best)",
            "spread",
            "client CPU µs/req",
            "receiver CPU µs/req",
            "other CPUs",
        ],
    )
    for (name, pool), result in results.items():
        table.rows.append(
            [
                name,
                str(pool),
                fmt(max(result.rates)),
                spread(result.rates),
                fmt(min(result.client_us)),
                fmt(min(result.receiver_us)),
                f"{max(result.other_cpus):.2f}",
            ]
        )
    loop = "uvloop" if args.uvloop else "asyncio"
    table.notes = [
        f"aiohttp {versions['aiohttp']}, httpx {versions['httpx']} "
        f"(httpcore {versions['httpcore']}), httptools {versions['httptools']}; "
        f"clients on the {loop} loop, one process; "
        "receiver: tickwheel.testing.Receiver in its own process (uvloop)",
        "pool: aiohttp TCPConnector(limit=pool, limit_per_host=pool); "
        "httpx Limits(max_connections=pool, max_keepalive_connections=pool)",
        "HttpClient: tickwheel.callbacks.httpclient (asyncio.Protocol + httptools), "
        "max_connections=pool, max_per_host=pool; request bytes built from the same headers",
        "HttpTarget: HttpClient plus the URL route, request building, signature and Outcome",
        "other CPUs: the most that processes other than these two kept busy during a run (of 2)",
    ]
    if spared:
        table.notes.append(
            "sniffio is not installed: httpcore's failing `import sniffio` per lock was made "
            "to fail fast (sys.modules['sniffio'] = None), so httpx is not charged for it"
        )
    return table


def main(argv: Sequence[str] | None = None) -> None:
    """Run the benchmark and print the tables."""
    args = parse_args(argv)
    tables: list[Table] = []
    emit(machine_table(sample_other_load()), tables)
    runner: Callable[..., Table] = asyncio.run
    if args.uvloop:
        import uvloop

        runner = uvloop.run
    emit(runner(run(args)), tables)
    if args.markdown:
        write_markdown(args.markdown, tables)


if __name__ == "__main__":
    main()
