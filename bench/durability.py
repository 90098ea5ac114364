"""Cost of ``durability=replicated`` (issue 17): per add, default store against replicated.

Run ``python bench/durability.py`` (``--timers N`` sequential adds a row, default 5,000;
``--batches N`` add_many calls of 1,000 a row, default 20; ``--markdown PATH``). It starts its
own master and replica (two ``redis-server`` processes on free loopback ports in temp dirs, no
persistence, the second made a replica by ``REPLICAOF``) and stops them at the end. The default
and replicated stores take turns in 10 rounds, each on its own key prefix, so load that comes
and goes on a shared host falls on both alike.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import redis
import uvloop
from harness.machine import OtherLoad, machine_table, own_cpu_s, sample_other_load
from harness.redis_server import private_redis
from harness.report import Table, emit, fmt, progress, write_markdown

from tickwheel.model import Timer
from tickwheel.stores import open_store
from tickwheel.stores.redis import RedisStore

ROUNDS = 10
CONCURRENCY = 64
BATCH = 1_000
WAIT_MS = 1_000


@dataclass
class Tally:
    """Seconds and client CPU seconds one row has spent over its rounds, and its adds."""

    label: str
    seconds: float = 0.0
    cpu_s: float = 0.0
    adds: int = 0

    async def time(
        self, calls: Sequence[Callable[[], Awaitable[object]]], adds: int, at_once: int = 1
    ) -> None:
        """Run `calls`, `at_once` at a time, adding the time they took and the CPU."""
        cpu0, t0 = own_cpu_s(), time.perf_counter()
        if at_once == 1:
            for call in calls:
                await call()
        else:
            gate = asyncio.Semaphore(at_once)

            async def one(call: Callable[[], Awaitable[object]]) -> None:
                async with gate:
                    await call()

            await asyncio.gather(*map(one, calls))
        self.seconds += time.perf_counter() - t0
        self.cpu_s += own_cpu_s() - cpu0
        self.adds += adds

    def us_per_add(self) -> float:
        return self.seconds / self.adds * 1e6


def make_replica(master_port: int, replica_port: int) -> None:
    """Make the server on `replica_port` a replica of the master and wait until it is in sync."""
    with redis.Redis(port=master_port, socket_timeout=5) as client:
        client.config_set("repl-diskless-sync-delay", 0)  # sync now, not 5 s later
    with redis.Redis(port=replica_port, socket_timeout=5) as client:
        client.replicaof("127.0.0.1", master_port)
    deadline = time.monotonic() + 10
    with redis.Redis(port=master_port, socket_timeout=5) as client:
        # online as the master sees it: WAIT counts only online replicas
        while client.info("replication").get("slave0", {}).get("state") != "online":
            if time.monotonic() > deadline:
                raise RuntimeError("the replica did not sync with its master")
            time.sleep(0.05)


def timers(n: int, due_ms: int) -> list[Timer]:
    return [
        Timer(id=f"order-{uuid.uuid4().hex}", due_ms=due_ms, payload={"n": k}) for k in range(n)
    ]


async def measure(url: str, n: int, batches: int) -> list[tuple[Tally, Tally]]:
    """Sequential adds, then add_many of `BATCH`: (default, replicated) row pairs."""
    prefix = f"b{uuid.uuid4().hex[:8]}"
    default = open_store(f"{url}?prefix={prefix}d")
    replicated = open_store(f"{url}?prefix={prefix}r&durability=replicated&wait_ms={WAIT_MS}")
    assert isinstance(default, RedisStore)
    assert isinstance(replicated, RedisStore)
    await default.sync_clock()
    due = default.now_ms() + 3_600_000
    pairs = []
    try:
        step = -(-n // ROUNDS)
        for at_once, how in ((1, "sequential"), (CONCURRENCY, f"{CONCURRENCY} at once")):
            single = (Tally(f"add, {how} (default)"), Tally(f"add, {how} (replicated)"))
            for start in range(0, n, step):
                for store, tally in zip((default, replicated), single, strict=True):
                    chunk = timers(min(step, n - start), due)
                    calls = [lambda t=t, s=store: s.add(t) for t in chunk]
                    await tally.time(calls, len(chunk), at_once)
            pairs.append(single)
        many = (
            Tally(f"add_many of {BATCH:,} (default)"),
            Tally(f"add_many of {BATCH:,} (replicated)"),
        )
        per_round = -(-batches // ROUNDS)
        for start in range(0, batches, per_round):
            count = min(per_round, batches - start)
            for store, tally in zip((default, replicated), many, strict=True):
                chunks = [timers(BATCH, due) for _ in range(count)]
                await tally.time(
                    [lambda c=c, s=store: s.add_many(c) for c in chunks], BATCH * count
                )
        pairs.append(many)
    finally:
        await default.close()
        await replicated.close()
    return pairs


def table(pairs: list[tuple[Tally, Tally]], other: OtherLoad) -> Table:
    out = Table(
        "durability=replicated: cost per add against the default store, same run",
        [
            "run",
            "default µs/add",
            "replicated µs/add",
            "x default",
            "default adds/s",
            "replicated adds/s",
            "client CPU µs/add (default / replicated)",
        ],
    )
    for default, replicated in pairs:
        out.rows.append(
            [
                default.label.removesuffix(" (default)"),
                fmt(default.us_per_add(), 1),
                fmt(replicated.us_per_add(), 1),
                f"{replicated.us_per_add() / default.us_per_add():.2f}",
                fmt(1e6 / default.us_per_add()),
                fmt(1e6 / replicated.us_per_add()),
                f"{default.cpu_s / default.adds * 1e6:.1f} / "
                f"{replicated.cpu_s / replicated.adds * 1e6:.1f}",
            ]
        )
    out.notes = [
        f"one master and one replica on loopback; replicated: WAIT 1 {WAIT_MS} after each call's "
        "scripts, on the connection that ran them; each timer a small payload, due an hour ahead",
        "'x default': replicated time per add over the default's (higher costs more); the two "
        f"stores take turns in {ROUNDS} rounds; '{CONCURRENCY} at once': callers on one event "
        "loop, whose adds the store coalesces into batches (one WAIT a batch)",
        other.note(),
    ]
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timers", type=int, default=5_000)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--markdown", metavar="PATH")
    args = parser.parse_args(argv)
    if args.timers < ROUNDS or args.batches < 1:
        parser.error(f"--timers must be at least {ROUNDS} and --batches at least 1")
    tables: list[Table] = []
    emit(machine_table(sample_other_load()), tables)
    with (
        private_redis("tickwheel-bench-durability-master-") as master,
        private_redis("tickwheel-bench-durability-replica-") as replica,
    ):
        make_replica(master.port, replica.port)
        progress(f"replica on port {replica.port} in sync with the master on {master.port}")
        tables[0].rows += master.rows()
        other = OtherLoad(master.pid, replica.pid)
        pairs = uvloop.run(measure(master.url, args.timers, args.batches))
        emit(table(pairs, other), tables)
    if args.markdown:
        write_markdown(args.markdown, tables, "Replicated durability benchmark")


if __name__ == "__main__":
    main()
