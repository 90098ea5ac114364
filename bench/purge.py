"""A purge of a big queue beside a small one still in use, on SQLite, Redis and PostgreSQL
(issue 27).

Each store gets `--timers` scheduled timers in queue ``big``, due from a minute to three days
ahead (every level of each store's index). A probe loop then adds a timer to queue ``live``,
claims it and acks it, over and over, timing each round; it runs alone for as long as the purge
took last (the floor), then beside ``store.purge("big", State.SCHEDULED)``, alternating
`--rounds` times. The table gives the purge's rate and the probe's median, p99 and longest
round with and without it: a purge that held a lock or blocked Redis for long would show as a
long round. For Redis, the server's slow log gives the longest command it ran meanwhile.

    python bench/purge.py [--timers 200000] [--rounds 2] [--stores sqlite,redis,postgres]
                          [--markdown PATH|-]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis
from harness.machine import OtherLoad, machine_table, sample_other_load
from harness.redis_server import private_redis
from harness.report import Table, emit, finish, fmt, pct, progress

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from pg_server import PostgresServer

from tickwheel.model import State, Timer
from tickwheel.stores.base import Store
from tickwheel.stores.open import open_store

MINUTE_MS = 60_000
SPREAD_MS = 3 * 24 * 60 * MINUTE_MS


async def fill(store: Store, count: int) -> None:
    now = store.now_ms()
    for start in range(0, count, 1000):
        await store.add_many(
            [
                Timer(id=f"b{n}", due_ms=now + MINUTE_MS + n * SPREAD_MS // count, queue="big")
                for n in range(start, min(count, start + 1000))
            ]
        )


async def probe(store: Store, stop: asyncio.Event) -> list[float]:
    """Add, claim and ack one timer of queue ``live`` until `stop`; each round's ms."""
    rounds: list[float] = []
    while not stop.is_set():
        began = time.perf_counter()
        now = store.now_ms()
        await store.add(Timer(due_ms=now, queue="live"))
        leases = await store.claim("live", now, 10, 30_000)
        await store.ack_many(leases)
        rounds.append((time.perf_counter() - began) * 1000)
        await asyncio.sleep(0.002)
    return rounds


def _probe_process(url: str, stop: Any, results: Any) -> None:
    async def main() -> None:
        store = open_store(url)
        done = asyncio.Event()
        task = asyncio.create_task(probe(store, done))
        # a multiprocessing event: there is no awaitable to wait on
        while not stop.is_set():  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        done.set()
        results.send(await task)
        await store.close()

    asyncio.run(main())


class Probe:
    """`probe` in a process of its own: another client of the store, as a worker elsewhere
    is, sharing neither an event loop nor a GIL with the purge."""

    def __init__(self, url: str) -> None:
        context = multiprocessing.get_context("spawn")
        self._stop = context.Event()
        self._results, sent = context.Pipe(duplex=False)
        self._process = context.Process(target=_probe_process, args=(url, self._stop, sent))
        self.rounds: list[float] = []

    def __enter__(self) -> Probe:
        self._process.start()
        time.sleep(2.0)  # its interpreter starts and its first rounds run
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.rounds = self._results.recv()
        self._process.join()


async def alone(url: str, seconds: float) -> list[float]:
    with Probe(url) as running:
        await asyncio.sleep(seconds)
    return running.rounds


async def beside_purge(store: Store, url: str) -> tuple[int, float, list[float]]:
    with Probe(url) as running:
        began = time.perf_counter()
        purged = await store.purge("big", State.SCHEDULED)
        took_s = time.perf_counter() - began
    return purged, took_s, running.rounds


class SlowLog:
    """The Redis server's own log of commands over 1 ms, from now on: what a purge's scripts
    cost the server, whatever its clients' machine does meanwhile."""

    def __init__(self, url: str) -> None:
        self._client = redis.Redis.from_url(url)
        self._client.config_set("slowlog-log-slower-than", 1000)
        self._client.config_set("slowlog-max-len", 10_000)
        self._client.slowlog_reset()

    def longest_ms(self) -> float:
        entries = self._client.slowlog_get(10_000)
        self._client.close()
        return max((entry["duration"] for entry in entries), default=0) / 1000


async def measure(name: str, url: str, args: argparse.Namespace, table: Table) -> None:
    store = open_store(url)
    try:
        took_s = 2.0
        for round_ in range(args.rounds):
            progress(f"{name}: round {round_ + 1}, filling {args.timers:,}")
            await fill(store, args.timers)
            floor = await alone(url, took_s)
            slowlog = SlowLog(url) if name == "redis" else None
            purged, took_s, during = await beside_purge(store, url)
            slowest = None if slowlog is None else slowlog.longest_ms()
            assert purged == args.timers, (purged, args.timers)
            assert (await store.stats()).counts.get(State.SCHEDULED, 0) == 0
            table.rows.append(
                [
                    name,
                    str(round_ + 1),
                    fmt(purged),
                    fmt(took_s, 2),
                    fmt(purged / took_s),
                    f"{statistics.median(floor):.2f} / {statistics.median(during):.2f}",
                    f"{pct(floor, 0.99):.2f} / {pct(during, 0.99):.2f}",
                    f"{max(floor):.1f} / {max(during):.1f}",
                    "—" if slowest is None else f"{slowest:.1f}",
                ]
            )
            progress(f"{name}: {table.rows[-1]}")
    finally:
        await store.close()


async def run(args: argparse.Namespace, urls: dict[str, str], tables: list[Table]) -> None:
    table = Table(
        f"Purging {args.timers:,} scheduled timers of one queue beside a queue in use",
        [
            "store",
            "round",
            "purged",
            "purge s",
            "timers/s",
            "probe median ms alone / beside",
            "p99",
            "longest",
            "longest Redis command",
        ],
    )
    table.notes.append(
        "probe: add, claim and ack one timer of another queue, 2 ms apart, from a process of "
        "its own (another client); alone for 2 s plus as long as the last purge took, then "
        "from 2 s before the purge to its end"
    )
    for name, url in urls.items():
        await measure(name, url, args, table)
    emit(table, tables)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timers", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--stores", default="sqlite,redis,postgres")
    parser.add_argument("--markdown")
    args = parser.parse_args()
    chosen = args.stores.split(",")
    start_s = time.monotonic()
    tables: list[Table] = []
    with tempfile.TemporaryDirectory() as directory, private_redis("tickwheel-purge-") as redis:
        postgres = PostgresServer() if "postgres" in chosen else None
        try:
            if postgres is not None:
                postgres.start()
            other = OtherLoad(redis.pid)
            emit(machine_table(sample_other_load()), tables)
            urls = {
                "sqlite": f"sqlite:///{directory}/purge.db",
                "redis": redis.url,
                "postgres": "" if postgres is None else postgres.url,
            }
            asyncio.run(run(args, {name: urls[name] for name in chosen}, tables))
            tables[-1].notes.append(f"other processes kept {other.other():.2f} CPUs busy")
        finally:
            if postgres is not None:
                postgres.remove()
    finish(tables, start_s, args.markdown, "tickwheel purge benchmark")


if __name__ == "__main__":
    main()
