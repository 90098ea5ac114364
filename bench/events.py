"""The event stream (``GET /v1/events``) of one `tickwheel serve` at 5,000 state changes/s to
10 subscribers, beside the same load with no subscriber.

Run ``python bench/events.py`` (``--quick``: one pair of 5 s runs).

Each run starts `python -m tickwheel serve` on a fresh SQLite file (or a private redis-server),
creates ``rate / 3`` timers a second through ``POST /v1/timers/batch`` (batches of 100, due
1 s later) for ``--seconds``, each fired at a lean receiver in its own process: three changes a
timer (created, fired, acked). The subscribers run in a process of their own, each on its own
connection, counting the events they read and the lag of the newest one in each read (its
``at_ms``, when the server published it, to the reader's clock: one machine). A run with no
subscriber and one with them alternate, ``--runs`` pairs, so the machine's load hits both.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import uvloop
from harness.machine import OtherLoad, machine_table, sample_other_load
from harness.redis_server import private_redis
from harness.report import Table, emit, finish, fmt, pct, progress
from scenarios.engine.receivers import LEAN_RECEIVER_SOURCE, ReceiverProcess
from scenarios.serve_path.runs import Code, Serve

HERE = Path(__file__).resolve().parents[1] / "src"
BATCH = 100
DELAY_S = 1.0
SETTLE_S = 3.0

# the subscribers, in a child process on uvloop: argv is the API URL, the number of streams
# and the seconds to read; prints one JSON line of what each read
SUBSCRIBERS_SOURCE = r"""
import asyncio, json, os, sys, time
import uvloop

async def read(host, port, seconds, out):
    reader, writer = await asyncio.open_connection(host, port, limit=1 << 20)
    writer.write(f"GET /v1/events HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    await writer.drain()
    end = time.monotonic() + seconds
    events, lags, dropped = 0, [], False
    while (left := end - time.monotonic()) > 0:
        try:
            chunk = await asyncio.wait_for(reader.read(1 << 16), left)
        except TimeoutError:
            break
        if not chunk:
            dropped = True
            break
        events += chunk.count(b"\nevent: ")
        at = chunk.rfind(b'"at_ms":')
        if at >= 0:
            stop = chunk.find(b"}", at)
            if stop > 0:
                lags.append(time.time_ns() / 1e6 - int(chunk[at + 8 : stop]))
    writer.close()
    out.append({"events": events, "lags": lags, "dropped": dropped})

async def main():
    url, count, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    host, port = url.removeprefix("http://").rsplit(":", 1)
    out = []
    await asyncio.gather(*(read(host, int(port), seconds, out) for _ in range(count)))
    times = os.times()
    print(json.dumps({"streams": out, "cpu_s": times.user + times.system}), flush=True)

uvloop.run(main())
"""


@dataclass
class Run:
    subscribers: int
    timers: int
    arrived: int
    late_ms: list[float]
    serve_cpu_s: float
    seconds: float
    streams: list[dict[str, Any]]
    other_cpus: float

    @property
    def changes(self) -> int:
        return 3 * self.timers

    def delivered_per_s(self, active_s: float) -> list[float]:
        """Each subscriber's events a second over the `active_s` changes were made in."""
        return [s["events"] / active_s for s in self.streams]

    def lags(self) -> list[float]:
        return [lag for s in self.streams for lag in s["lags"]]

    def dropped(self) -> int:
        return sum(1 for s in self.streams if s["dropped"])


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=5000, help="state changes a second")
    parser.add_argument("--subscribers", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=15.0, help="seconds of creates")
    parser.add_argument("--runs", type=int, default=2, help="pairs of runs")
    parser.add_argument("--store", choices=("sqlite", "redis"), default="sqlite")
    parser.add_argument("--quick", action="store_true", help="one pair of 5 s runs")
    parser.add_argument(
        "--markdown", nargs="?", const="-", metavar="PATH",
        help="also print the tables as Markdown (to PATH when given)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.runs = 5.0, 1
    return args


async def create(api: str, timers_per_s: float, seconds: float, url: str) -> int:
    """POST batches of `BATCH` timers, paced to `timers_per_s`, for `seconds`."""
    interval = BATCH / timers_per_s
    sent = 0
    start = time.monotonic()
    async with aiohttp.ClientSession() as session:
        while (now := time.monotonic()) - start < seconds:
            due_s = time.time() + DELAY_S
            batch = [{"due": due_s, "callback": {"url": url}} for _ in range(BATCH)]
            async with session.post(f"{api}/v1/timers/batch", json={"timers": batch}) as reply:
                answer = await reply.json()
                if reply.status != 200 or any(r["status"] != 201 for r in answer["results"]):
                    raise RuntimeError(f"create failed: {reply.status} {str(answer)[:200]}")
            sent += BATCH
            wait = start + sent / timers_per_s - now - (time.monotonic() - now)
            await asyncio.sleep(max(0.0, min(wait, interval)))
    return sent


async def run_once(args: argparse.Namespace, subscribers: int, store_url: str) -> Run:
    receiver = ReceiverProcess(LEAN_RECEIVER_SOURCE)
    with tempfile.TemporaryDirectory(prefix="tickwheel-events-") as folder:
        url = store_url or f"sqlite:///{folder}/t.db"
        serve = Serve(Code("this checkout", HERE), url, Path(folder) / "serve.log")
        load = OtherLoad(receiver.pid, serve.process.pid)
        readers = None
        try:
            cpu_before = serve.cpu_s()
            await receiver.report()  # counts afresh from here
            read_s = args.seconds + DELAY_S + SETTLE_S
            if subscribers:
                readers = await asyncio.create_subprocess_exec(
                    sys.executable, "-c", SUBSCRIBERS_SOURCE, serve.url, str(subscribers),
                    str(read_s), stdout=subprocess.PIPE,
                )  # fmt: skip
                load.track(readers.pid)
                await asyncio.sleep(0.5)  # connected before the first change
            sent = await create(serve.url, args.rate / 3, args.seconds, receiver.url)
            await asyncio.sleep(DELAY_S + SETTLE_S)
            report = await receiver.report()
            streams: list[dict[str, Any]] = []
            if readers is not None:
                load.untrack(readers.pid)
                async with asyncio.timeout(read_s + 30):
                    out, _ = await readers.communicate()
                streams = json.loads(out)["streams"]
            cpu_s = serve.cpu_s() - cpu_before
            other = load.other()
        finally:
            serve.stop()
            receiver.stop()
            if readers is not None and readers.returncode is None:
                readers.kill()
    return Run(subscribers, sent, report["unique"], report["late"], cpu_s, read_s, streams, other)


def tables(runs: list[Run], args: argparse.Namespace) -> list[Table]:
    per_run = Table(
        f"Event stream: {args.rate:,} changes/s ({args.rate // 3:,} timers/s: created, fired, "
        f"acked) through one serve ({args.store}), {args.subscribers} subscribers beside none",
        ["subscribers", "timers", "fired", "callback late p50 / p99 ms", "serve CPU %",
         "delivered/s per subscriber (min)", "events / changes", "lag p50 / p99 ms",
         "dropped", "other CPUs"],
    )  # fmt: skip
    for run in runs:
        delivered = run.delivered_per_s(args.seconds + DELAY_S)
        lags = run.lags()
        got = sum(s["events"] for s in run.streams)
        per_run.rows.append(
            [
                str(run.subscribers),
                f"{run.timers:,}",
                f"{run.arrived:,}",
                f"{fmt(pct(run.late_ms, 0.5), 1)} / {fmt(pct(run.late_ms, 0.99), 1)}",
                fmt(100 * run.serve_cpu_s / run.seconds),
                "-" if not delivered else f"{min(delivered):,.0f}",
                "-" if not run.streams else f"{got:,} / {run.changes * len(run.streams):,}",
                "-" if not lags else f"{fmt(pct(lags, 0.5), 1)} / {fmt(pct(lags, 0.99), 1)}",
                "-" if not run.streams else str(run.dropped()),
                f"{run.other_cpus:.2f}",
            ]
        )
    pairs = list(zip(runs[0::2], runs[1::2], strict=True))
    ratios = [
        (b.serve_cpu_s / a.serve_cpu_s) if a.subscribers == 0 else (a.serve_cpu_s / b.serve_cpu_s)
        for a, b in pairs
    ]
    per_run.notes.append(
        f"serve CPU with subscribers / without, per alternating pair: "
        f"{', '.join(f'{r:.2f}' for r in ratios)} (median {statistics.median(ratios):.2f}); "
        "CPU % is of one core over the read window (creates, firing, settling and the streams)"
    )
    return [per_run]


async def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    started = time.monotonic()
    out: list[Table] = []
    emit(machine_table(sample_other_load()), out)
    runs: list[Run] = []
    own = private_redis("tickwheel-events-") if args.store == "redis" else contextlib.nullcontext()
    with own as server:
        for pair in range(args.runs):
            order = (0, args.subscribers) if pair % 2 == 0 else (args.subscribers, 0)
            for subscribers in order:
                progress(f"pair {pair + 1}: {subscribers} subscribers")
                store_url = "" if server is None else f"{server.url}?prefix=ev{len(runs)}"
                runs.append(await run_once(args, subscribers, store_url))
    for table in tables(runs, args):
        emit(table, out)
    finish(out, started, args.markdown, "Event stream")


if __name__ == "__main__":
    uvloop.run(main())
