"""SqliteStore: schedule and claim + ack rates, disk per timer, claim latency at 10k and N."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from harness.report import progress

from scenarios.stores.context import StoreBench
from scenarios.stores.inputs import CONCURRENCY, PRODUCER_BATCH, SMALL, wall_ms
from scenarios.stores.measuring import add_each, claim_ack
from tickwheel.model import Timer
from tickwheel.stores import SqliteStore
from tickwheel.stores.codec import encode_spec

SQLITE_MANY = f"SqliteStore.add_many, {PRODUCER_BATCH:,} per call"

SQLITE_COLUMNS = [
    "id", "queue", "state", "due_ms", "seq", "deadline_ms", "attempt", "created_ms",
    "updated_ms", "last_error", "spec", "first_claimed_ms",
]  # fmt: skip


def sqlite_raw_fill(path: Path, timers: Sequence[Timer]) -> bool:
    """Untimed setup: write into an empty store file the rows `SqliteStore.add` would write.

    One executemany per 100,000 rows with a large page cache; seq numbers equal due times as
    the store does (1, 2, ... per queue and due_ms). Returns False, writing nothing, when the
    table is not empty or its columns are not the ones this function knows.
    """
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(timers)")]
        if columns != SQLITE_COLUMNS or conn.execute("SELECT count(*) FROM timers").fetchone()[0]:
            return False
        conn.execute("PRAGMA cache_size = -262144")  # 256 MiB
        now = wall_ms()
        seqs: dict[tuple[str, int], int] = {}
        specs: dict[tuple[int, int], str] = {}
        rows = []
        for t in timers:
            seq = seqs[t.queue, t.due_ms] = seqs.get((t.queue, t.due_ms), 0) + 1
            key = (id(t.callback), id(t.retry))
            spec = specs.get(key) if t.payload is None else None
            if spec is None:
                spec = specs[key] = encode_spec(t)
            rows.append((t.id, t.queue, 0, t.due_ms, seq, None, 0, now, now, None, spec, None))
        marks = ", ".join("?" * len(SQLITE_COLUMNS))
        sql = f"INSERT INTO timers ({', '.join(SQLITE_COLUMNS)}) VALUES ({marks})"
        for start in range(0, len(rows), 100_000):
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(sql, rows[start : start + 100_000])
            conn.execute("COMMIT")
        return True
    finally:
        conn.close()


async def sqlite_fill(store: SqliteStore, timers: Sequence[Timer]) -> None:
    """Add timers with `add_many` (one transaction per 1,000)."""
    await store.add_many(timers)


async def sqlite_phases(bench: StoreBench) -> None:
    """Measure SqliteStore: adds (single and batched), claim + ack, disk and latency at N."""
    s, inputs, out = bench.sizes, bench.inputs, bench.results.schedule
    for label, concurrency in (
        ("SqliteStore.add, one at a time", 1),
        (f"SqliteStore.add, {CONCURRENCY} at once (gather)", CONCURRENCY),
    ):
        store = bench.sqlite()
        await store.stats()  # creates the file and schema
        progress(f"sqlite schedule: {label} ({s.single:,})")
        async with bench.probe(label, s.single, False) as probe:
            await add_each(store, inputs.far[: s.single], concurrency)
        out[label] = probe.measured
        await store.close()

    store = bench.sqlite()
    await store.stats()
    label = SQLITE_MANY
    progress(f"sqlite schedule: {label} ({s.schedule:,})")
    async with bench.probe(label, s.schedule, False) as probe:
        await sqlite_fill(store, inputs.far[: s.schedule])
    out[label] = probe.measured
    await store.close()

    store = bench.sqlite()
    await sqlite_fill(store, inputs.due[: s.claim])
    progress(f"sqlite claim+ack ({s.claim:,})")
    async with bench.probe("SqliteStore claim+ack", s.claim, False) as probe:
        probe.count = await claim_ack(store, probe)
    bench.results.claim["SqliteStore"] = probe.measured
    bench.check_count("SqliteStore", probe.count, s.claim)
    await store.close()

    # N pending: most loaded by a fast untimed path, the last `tail` timed through the
    # store's own INSERT (the batched rate at that size)
    tail = min(s.schedule, s.pending // 2)
    progress(f"sqlite: loading {s.pending - tail:,} (untimed, executemany)")
    store = await sqlite_loaded(bench, inputs.far[: s.pending - tail])
    label = f"SqliteStore.add_many, {s.pending - tail:,} -> {s.pending:,} pending"
    progress(f"sqlite schedule: {label}")
    async with bench.probe(label, tail, False) as probe:
        await sqlite_fill(store, inputs.far[s.pending - tail : s.pending])
    out[label] = probe.measured
    await store.close()  # checkpoints the WAL into the file
    bench.results.sqlite_disk = store.path.stat().st_size / s.pending
    big = SqliteStore(store.path)
    small = await sqlite_loaded(bench, inputs.far[:SMALL])
    due = bench.due_for_latency()

    async def add_due() -> None:
        for each in (small, big):
            await sqlite_fill(each, due)

    await bench.latency("SqliteStore", {SMALL: small, s.pending: big}, add_due)
    await small.close()
    await big.close()


async def sqlite_loaded(bench: StoreBench, timers: Sequence[Timer]) -> SqliteStore:
    """A new SQLite store holding `timers`, loaded by the fast untimed path if possible."""
    store = bench.sqlite()
    await store.stats()  # creates the schema
    await store.close()
    if await asyncio.to_thread(sqlite_raw_fill, store.path, timers):
        return SqliteStore(store.path)
    bench.results.notes.append("SQLite schema changed: the untimed loads used add()")
    store = SqliteStore(store.path)
    await sqlite_fill(store, timers)
    return store
