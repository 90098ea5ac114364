"""The PostgreSQL store against raw psycopg on the same server, in the same run (issue 26).

Starts its own PostgreSQL (initdb + pg_ctl in a temp dir, a free loopback port; as the
``postgres`` user when run as root), with the server's default durability (fsync and
synchronous commit on) unless ``--no-durable``. Each measure alternates tickwheel and its raw
floor `--rounds` times and reports the median of each; the ratio is tickwheel / floor, rates
(higher is better) or times (lower is better) as the row says.

- sequential ``await store.add(Timer(...))`` vs one ``INSERT`` a call, autocommit, one connection;
- 64 tasks adding at once (the store groups them into shared transactions) vs 64 connections
  each inserting in autocommit;
- ``add_many`` of 1,000 vs a ``COPY`` of the same rows;
- 20,000 timers due at one instant drained by ``consume`` with a plain ``await d.ack()`` loop
  vs claiming 1,000 at a time with ``FOR UPDATE SKIP LOCKED`` and settling them in one statement.

The raw floors write a table with the store's columns, its primary key and a (queue, due) index.

A second table sets tickwheel beside procrastinate on the same server, one round each:
one-at-a-time enqueue (``await task.defer_async()`` vs ``await store.add()``) and 20,000 jobs
due at once drained (its worker, `PROCRASTINATE_CONCURRENCY` jobs at a time, the job deleted on
success, vs ``consume`` with a plain ack loop).

`--pending N,M,…` adds a table of claim latency with N (then M …) timers pending an hour
ahead, written server-side: the median of 100 claims of 10 timers due now (each followed by
an `ack_many`), so the cost of the index probe with many pending shows.

A last table churns `--churn` timers through add, claim and ack (1,000 at a time, retention 0,
autovacuum on as by default) and reports the ``timers`` table's live and dead tuples and its
size with its indexes at the end: claims delete finished timers in batches, so neither grows
with the count.

    python bench/postgres.py [--rounds 3] [--churn 200000] [--no-procrastinate]
                             [--pending 10000,1000000] [--no-durable] [--markdown PATH|-]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import psycopg
from harness.report import Table, emit, finish, fmt, progress, verdict

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from pg_server import PostgresServer

from tickwheel.engine.consume import consume
from tickwheel.model import Timer
from tickwheel.stores.base import StoreSettings
from tickwheel.stores.codec import encode_spec
from tickwheel.stores.postgres import PostgresStore

SEQUENTIAL = 2000
PROCRASTINATE_CONCURRENCY = 8
CONCURRENT_TASKS = 64
CONCURRENT_EACH = 40
BATCH = 1000
BURST = 20_000
CLAIM = 1000

RAW_TABLE = """CREATE TABLE raw_{n} (
    id text PRIMARY KEY, queue text NOT NULL, state smallint NOT NULL, due_ms bigint NOT NULL,
    attempt integer NOT NULL, created_ms bigint NOT NULL, spec text NOT NULL)"""
RAW_INDEX = "CREATE INDEX ON raw_{n} (queue, due_ms) WHERE state = 0"
RAW_INSERT = """INSERT INTO raw_{n} (id, queue, state, due_ms, attempt, created_ms, spec)
                VALUES (%s, 'default', 0, %s, 0, %s, %s)"""


class Bench:
    """One server, a fresh store schema and raw table per measure."""

    def __init__(self, server: PostgresServer) -> None:
        self.server = server
        self.url = server.url
        self._n = 0

    async def raw_table(self) -> str:
        self._n += 1
        name = f"raw_{self._n}"
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            await conn.execute(RAW_TABLE.format(n=self._n))
            await conn.execute(RAW_INDEX.format(n=self._n))
        return name

    def store(self) -> PostgresStore:
        return PostgresStore(self.url, schema=f"b{uuid.uuid4().hex[:10]}", pool_size=8)


def _timers(prefix: str, count: int, due_ms: int) -> list[Timer]:
    return [Timer(id=f"{prefix}-{n}", due_ms=due_ms, payload={"n": n}) for n in range(count)]


async def sequential_store(bench: Bench) -> float:
    store = bench.store()
    try:
        await store.stats()
        timers = _timers("s", SEQUENTIAL, store.now_ms() + 3_600_000)
        start = time.perf_counter()
        for timer in timers:
            await store.add(timer)
        return SEQUENTIAL / (time.perf_counter() - start)
    finally:
        await store.close()


async def sequential_raw(bench: Bench) -> float:
    table = await bench.raw_table()
    insert = RAW_INSERT.replace("raw_{n}", table)
    due = int(time.time() * 1000) + 3_600_000
    timers = _timers("s", SEQUENTIAL, due)
    async with await psycopg.AsyncConnection.connect(bench.url, autocommit=True) as conn:
        start = time.perf_counter()
        for timer in timers:
            await conn.execute(insert, (timer.id, timer.due_ms, due, encode_spec(timer)))
        return SEQUENTIAL / (time.perf_counter() - start)


async def concurrent_store(bench: Bench) -> float:
    store = bench.store()
    try:
        await store.stats()
        due = store.now_ms() + 3_600_000

        async def one(task: int) -> None:
            for timer in _timers(f"c{task}", CONCURRENT_EACH, due):
                await store.add(timer)

        start = time.perf_counter()
        await asyncio.gather(*(one(task) for task in range(CONCURRENT_TASKS)))
        return CONCURRENT_TASKS * CONCURRENT_EACH / (time.perf_counter() - start)
    finally:
        await store.close()


async def concurrent_raw(bench: Bench) -> float:
    table = await bench.raw_table()
    insert = RAW_INSERT.replace("raw_{n}", table)
    due = int(time.time() * 1000) + 3_600_000
    conns = [
        await psycopg.AsyncConnection.connect(bench.url, autocommit=True)
        for _ in range(CONCURRENT_TASKS)
    ]
    try:

        async def one(task: int, conn: psycopg.AsyncConnection[object]) -> None:
            for timer in _timers(f"c{task}", CONCURRENT_EACH, due):
                await conn.execute(insert, (timer.id, timer.due_ms, due, encode_spec(timer)))

        start = time.perf_counter()
        await asyncio.gather(*(one(task, conn) for task, conn in enumerate(conns)))
        return CONCURRENT_TASKS * CONCURRENT_EACH / (time.perf_counter() - start)
    finally:
        for conn in conns:
            await conn.close()


async def many_store(bench: Bench) -> float:
    store = bench.store()
    try:
        await store.stats()
        times = []
        for batch in range(5):
            timers = _timers(f"m{batch}", BATCH, store.now_ms() + 3_600_000)
            start = time.perf_counter()
            await store.add_many(timers)
            times.append(time.perf_counter() - start)
        return BATCH / statistics.median(times)
    finally:
        await store.close()


async def many_copy(bench: Bench) -> float:
    table = await bench.raw_table()
    due = int(time.time() * 1000) + 3_600_000
    columns = "id, queue, state, due_ms, attempt, created_ms, spec"
    times = []
    async with await psycopg.AsyncConnection.connect(bench.url, autocommit=True) as conn:
        for batch in range(5):
            timers = _timers(f"m{batch}", BATCH, due)
            start = time.perf_counter()
            async with (
                conn.cursor() as cursor,
                cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy,
            ):
                for timer in timers:
                    await copy.write_row(
                        (timer.id, "default", 0, timer.due_ms, 0, due, encode_spec(timer))
                    )
            times.append(time.perf_counter() - start)
    return BATCH / statistics.median(times)


async def burst_store(bench: Bench) -> float:
    store = bench.store()
    try:
        now = store.now_ms()
        for start in range(0, BURST, 5000):
            await store.add_many(_timers(f"b{start}", 5000, now))
        drained = 0
        begin = time.perf_counter()
        async with contextlib.aclosing(consume(store)) as deliveries:
            async for delivery in deliveries:
                await delivery.ack()
                drained += 1
                if drained == BURST:
                    break
        return time.perf_counter() - begin
    finally:
        await store.close()


async def burst_raw(bench: Bench) -> float:
    table = await bench.raw_table()
    now = int(time.time() * 1000)
    columns = "id, queue, state, due_ms, attempt, created_ms, spec"
    async with await psycopg.AsyncConnection.connect(bench.url, autocommit=True) as conn:
        async with (
            conn.cursor() as cursor,
            cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy,
        ):
            for timer in _timers("b", BURST, now):
                await copy.write_row((timer.id, "default", 0, now, 0, now, encode_spec(timer)))
        claim = f"""UPDATE {table} SET state = 1, attempt = attempt + 1 WHERE id IN (
                        SELECT id FROM {table} WHERE queue = 'default' AND state = 0
                        AND due_ms <= %s ORDER BY due_ms LIMIT {CLAIM} FOR UPDATE SKIP LOCKED)
                    RETURNING id, attempt, spec"""
        settle = f"UPDATE {table} SET state = 2 WHERE id = ANY(%s)"
        begin = time.perf_counter()
        while True:
            async with conn.transaction():
                rows = await (await conn.execute(claim, (int(time.time() * 1000),))).fetchall()
            if not rows:
                break
            await conn.execute(settle, ([row[0] for row in rows],))
        return time.perf_counter() - begin


Measure = Callable[[Bench], Awaitable[float]]
ROWS: list[tuple[str, str, Measure, Measure, float, bool]] = [
    # name, unit, tickwheel, floor, limit, higher is better
    ("sequential `await store.add()` vs raw INSERT (autocommit)", "adds/s",
     sequential_store, sequential_raw, 0.7, True),
    ("64 concurrent single adds vs 64 connections' raw INSERT", "adds/s",
     concurrent_store, concurrent_raw, 1.5, True),
    ("`add_many` of 1,000 vs COPY of the same rows", "timers/s",
     many_store, many_copy, 0.5, True),
    ("20k due at once: `consume` + `await d.ack()` vs SKIP LOCKED claim 1,000 + one UPDATE",
     "s to drain", burst_store, burst_raw, 3.0, False),
]  # fmt: skip


async def run(
    bench: Bench,
    rounds: int,
    rows: list[tuple[str, str, Measure, Measure, float, bool]],
    title: str,
    other: str,
) -> Table:
    table = Table(title, ["measure", "unit", "tickwheel", other, "ratio", "limit", "result"])
    for name, unit, ours, floor, limit, higher in rows:
        mine, theirs = [], []
        for round_ in range(rounds):  # alternate, so both see the same moments of load
            progress(f"{name}: round {round_ + 1}/{rounds}")
            mine.append(await ours(bench))
            theirs.append(await floor(bench))
        a, b = statistics.median(mine), statistics.median(theirs)
        ratio = a / b
        ok = ratio >= limit if higher else ratio <= limit
        digits = 2 if unit.startswith("s") else 0
        table.rows.append(
            [
                name,
                unit,
                fmt(a, digits),
                fmt(b, digits),
                f"{ratio:.2f}",
                f"{'≥' if higher else '≤'} {limit:g}",
                verdict(ok),
            ]
        )
    return table


async def _procrastinate_app(bench: Bench) -> Any:
    """A procrastinate app with a no-op task, on a database of its own with its schema."""
    import procrastinate  # a dev dependency, for this comparison only

    bench._n += 1
    database = f"procrastinate_{bench._n}"
    async with await psycopg.AsyncConnection.connect(bench.url, autocommit=True) as conn:
        await conn.execute(f"CREATE DATABASE {database}")
    url = bench.url.rsplit("/", 1)[0] + f"/{database}"
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))

    @app.task(name="noop", queue="default")
    async def noop(n: int) -> None:
        return None

    return app, noop


async def procrastinate_enqueue(bench: Bench) -> float:
    app, noop = await _procrastinate_app(bench)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()
        start = time.perf_counter()
        for n in range(SEQUENTIAL):
            await noop.defer_async(n=n)
        return SEQUENTIAL / (time.perf_counter() - start)


async def procrastinate_burst(bench: Bench) -> float:
    app, noop = await _procrastinate_app(bench)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()
        for start in range(0, BURST, 5000):
            await noop.batch_defer_async(*({"n": n} for n in range(start, start + 5000)))
        begin = time.perf_counter()
        await app.run_worker_async(
            queues=["default"],
            wait=False,
            concurrency=PROCRASTINATE_CONCURRENCY,
            delete_jobs="successful",
            install_signal_handlers=False,
        )
        return time.perf_counter() - begin


PROCRASTINATE: list[tuple[str, str, Measure, Measure, float, bool]] = [
    ("one-at-a-time enqueue: `store.add()` vs `task.defer_async()`", "adds/s",
     sequential_store, procrastinate_enqueue, 1.0, True),
    ("20k due at once, drained: `consume` + ack vs procrastinate's worker", "s to drain",
     burst_store, procrastinate_burst, 1.0, False),
]  # fmt: skip


async def claim_latency(bench: Bench, pending: int) -> float:
    """Median ms of a claim of 10 due timers with `pending` others an hour ahead."""
    store = bench.store()
    try:
        await store.stats()
        now = store.now_ms()
        schema = store.names.schema
        fill = f"""INSERT INTO {schema}.timers (id, queue, state, due_ms, seq, attempt,
                       created_ms, updated_ms, spec, deferrals)
                   SELECT 'p' || g, 'default', 0, {now + 3_600_000} + g, g, 0, {now}, {now},
                          '[null,null,null]', 0
                   FROM generate_series(1, {pending}) AS g"""
        async with await psycopg.AsyncConnection.connect(bench.url, autocommit=True) as conn:
            await conn.execute(fill)
            await conn.execute(f"ANALYZE {schema}.timers")
        times = []
        for round_ in range(100):
            await store.add_many(_timers(f"r{round_}", 10, store.now_ms()))
            start = time.perf_counter()
            leases = await store.claim("default", store.now_ms(), 10, 30_000)
            times.append(time.perf_counter() - start)
            await store.ack_many(leases)
        return statistics.median(times) * 1000
    finally:
        await store.close()


async def pending_table(bench: Bench, counts: list[int]) -> Table:
    table = Table("Claim latency by timers pending", ["pending", "claim of 10, median ms"])
    for count in counts:
        progress(f"claim latency at {count:,} pending")
        table.rows.append([f"{count:,}", fmt(await claim_latency(bench, count), 2)])
    return table


async def churn(bench: Bench, total: int) -> Table:
    """Add, claim and ack `total` timers 1,000 at a time; sample the table as it goes."""
    store = PostgresStore(
        bench.url, StoreSettings(retention_ms=0), schema=f"c{uuid.uuid4().hex[:10]}"
    )
    table = Table(
        f"Churn: {total:,} timers added, claimed and acked, 1,000 at a time (retention 0)",
        ["after", "live tuples", "dead tuples", "table + indexes, MB", "cycles/s"],
    )
    schema = store.names.schema
    stats = f"""SELECT n_live_tup, n_dead_tup, pg_total_relation_size('{schema}.timers')
                FROM pg_stat_user_tables WHERE schemaname = '{schema}' AND relname = 'timers'"""
    try:
        done = 0
        begin = time.perf_counter()
        async with await psycopg.AsyncConnection.connect(bench.url, autocommit=True) as conn:
            while done < total:
                now = store.now_ms()
                await store.add_many(_timers(f"k{done}", BATCH, now))
                while leases := await store.claim("default", store.now_ms(), BATCH, 30_000):
                    await store.ack_many(leases)
                done += BATCH
                if done % (total // 4) == 0:
                    progress(f"churn: {done:,}")
                    await asyncio.sleep(1)  # let the statistics collector catch up
                    row = await (await conn.execute(stats)).fetchone()
                    live, dead, size = row if row else (0, 0, 0)
                    rate = done / (time.perf_counter() - begin)
                    table.rows.append(
                        [f"{done:,}", fmt(live), fmt(dead), fmt(size / 1e6, 1), fmt(rate)]
                    )
        return table
    finally:
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="0: the churn table alone")
    parser.add_argument(
        "--pending", default="", help="claim latency at these counts: 10000,1000000"
    )
    parser.add_argument("--no-procrastinate", action="store_true", help="skip its table")
    parser.add_argument("--churn", type=int, default=200_000, help="timers in the churn table")
    parser.add_argument("--no-durable", action="store_true", help="fsync and sync commit off")
    parser.add_argument("--markdown", help="write the tables as Markdown here ('-': stdout)")
    args = parser.parse_args()
    start = time.monotonic()
    server = PostgresServer(durable=not args.no_durable)
    tables: list[Table] = []
    try:
        server.start()
        if args.rounds:
            title = "PostgreSQL store vs raw psycopg, same server, same run"
            table = asyncio.run(run(Bench(server), args.rounds, ROWS, title, "floor"))
            with psycopg.connect(server.url) as conn:
                version = conn.execute("SHOW server_version").fetchone()
            mode = "off" if args.no_durable else "on"
            table.notes.append(
                f"PostgreSQL {version[0] if version else '?'}, fsync and synchronous_commit "
                f"{mode}; medians of {args.rounds} alternating rounds"
            )
            emit(table, tables)
        if args.rounds and not args.no_procrastinate:
            title = "PostgreSQL store vs procrastinate, same server, same run"
            # one round: its drain of 20k takes minutes, and the gap is far beyond the noise
            table = asyncio.run(run(Bench(server), 1, PROCRASTINATE, title, "procrastinate"))
            table.notes.append(
                f"procrastinate {metadata.version('procrastinate')}, its worker at concurrency "
                f"{PROCRASTINATE_CONCURRENCY}; one round each"
            )
            emit(table, tables)
        if args.pending:
            counts = [int(count) for count in args.pending.split(",")]
            emit(asyncio.run(pending_table(Bench(server), counts)), tables)
        if args.churn:
            emit(asyncio.run(churn(Bench(server), args.churn)), tables)
    finally:
        server.remove()
    finish(tables, start, args.markdown, "PostgreSQL store")


if __name__ == "__main__":
    main()
