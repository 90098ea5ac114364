"""Peers benchmark (issue 15, info): one-call-per-job enqueue and a drain, tickwheel beside saq,
huey and dramatiq on the same private redis-server, in the same run.

Run ``python bench/peers.py`` (``--jobs N``, default 5,000; ``--peers-python PATH``; ``--markdown
PATH``). The peers are never a dependency of tickwheel: install them into a throwaway venv
first, which this script runs as a subprocess per peer::

    python3 -m venv /tmp/peers-venv
    /tmp/peers-venv/bin/pip install saq huey dramatiq typing_extensions

A peer that is not installed (or fails) gets a row saying so instead of figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import redis.asyncio as aredis
import uvloop
from harness.machine import OtherLoad, machine_table, sample_other_load
from harness.redis_server import private_redis
from harness.report import Table, emit, fmt, progress, write_markdown

from tickwheel.engine import consume
from tickwheel.model import Timer
from tickwheel.stores.redis import RedisStore

PEERS = ("saq", "huey", "dramatiq")
PEER_RUN = Path(__file__).parent / "scenarios" / "peers" / "peer_run.py"
PEER_TIMEOUT_S = 300


@dataclass
class Row:
    name: str
    enqueue_per_s: float | None
    drain_s: float | None
    how: str


async def tickwheel_row(url: str, n: int) -> Row:
    """`await store.add(Timer(...))` n times; then n timers due now drained by a plain
    ``async for d in consume(...): await d.ack()`` loop, closed with ``contextlib.aclosing`` as
    the README writes it, from its start until the loop has closed and all acks landed."""
    admin = aredis.Redis.from_url(url)
    await admin.flushall()
    store = RedisStore.from_url(url, prefix="peers")
    try:
        await store.sync_clock()
        due = store.now_ms() + 3_600_000
        timers = [
            Timer(id=f"job-{uuid.uuid4().hex}", due_ms=due, payload={"i": i}) for i in range(n)
        ]
        t0 = time.perf_counter()
        for timer in timers:
            await store.add(timer)
        enqueue_s = time.perf_counter() - t0
        await admin.flushall()
        now = store.now_ms()
        await store.add_many([Timer(due_ms=now, payload={"i": i}) for i in range(n)])
        acked = 0
        t0 = time.perf_counter()
        async with contextlib.aclosing(consume(store)) as deliveries:  # as the README loops
            async for delivery in deliveries:
                await delivery.ack()
                acked += 1
                if acked == n:
                    break
        drain_s = time.perf_counter() - t0  # the acks flushed as the loop closed
    finally:
        await store.close()
        await admin.aclose()
    return Row("tickwheel (RedisStore, consume)", n / enqueue_s, drain_s, "store.add; consume loop")


def peer_row(python: Path, name: str, url: str, n: int) -> Row:
    """Run one peer in the throwaway venv; a row of figures, or of why there are none."""
    if not python.exists():
        return Row(name, None, None, f"skipped: {python} not found (see the docstring)")
    try:
        out = subprocess.run(
            [str(python), str(PEER_RUN), name, url, str(n)],
            capture_output=True,
            text=True,
            timeout=PEER_TIMEOUT_S,
            check=True,
        )
    except subprocess.CalledProcessError as error:
        last = (error.stderr.strip().splitlines() or ["no output"])[-1]
        return Row(name, None, None, f"skipped: {last[:120]}")
    except subprocess.TimeoutExpired:
        return Row(name, None, None, f"skipped: over {PEER_TIMEOUT_S} s")
    found = json.loads(out.stdout.strip().splitlines()[-1])
    how = f"one call per job; its worker, {found['workers']} at once"
    return Row(name, found["enqueue_per_s"], found["drain_s"], how)


def table(rows: list[Row], n: int, other: OtherLoad) -> Table:
    ours = rows[0]
    out = Table(
        f"Peers (info): {n:,} jobs, enqueued one call each, then {n:,} drained",
        ["library", "enqueue /s", "x tickwheel", "drain s", "x tickwheel", "how"],
    )
    for row in rows:
        enqueue_ratio = (
            None
            if row.enqueue_per_s is None or ours.enqueue_per_s is None
            else row.enqueue_per_s / ours.enqueue_per_s
        )
        drain_ratio = (
            None if row.drain_s is None or ours.drain_s is None else row.drain_s / ours.drain_s
        )
        out.rows.append(
            [
                row.name,
                fmt(row.enqueue_per_s),
                fmt(enqueue_ratio, 2),
                fmt(row.drain_s, 3),
                fmt(drain_ratio, 2),
                row.how,
            ]
        )
    out.notes = [
        "same redis-server (private, no persistence), FLUSHALLed between phases; enqueue: "
        "sequential, each call awaited before the next; drain: the jobs enqueued beforehand, "
        "from the consumer's start until every job ran (tickwheel: acked)",
        "tickwheel's jobs are timers due an hour ahead (enqueue) and due now (drain); the peers' "
        "are immediate jobs; each peer runs in its own process from the throwaway venv",
        other.note(),
    ]
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=5_000)
    parser.add_argument("--peers-python", type=Path, default=Path("/tmp/peers-venv/bin/python"))
    parser.add_argument("--markdown", metavar="PATH")
    args = parser.parse_args(argv)
    tables: list[Table] = []
    emit(machine_table(sample_other_load()), tables)
    with private_redis("tickwheel-bench-peers-") as server:
        tables[0].rows += server.rows()
        other = OtherLoad(server.pid)
        progress("tickwheel")
        rows = [uvloop.run(tickwheel_row(server.url, args.jobs))]
        for name in PEERS:
            progress(name)
            rows.append(peer_row(args.peers_python, name, server.url, args.jobs))
        emit(table(rows, args.jobs, other), tables)
    if args.markdown:
        write_markdown(args.markdown, tables, "Peers benchmark")


if __name__ == "__main__":
    main()
