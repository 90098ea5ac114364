"""With --profile: cProfile of RedisStore's client side, and its server time split claim / ack."""

from __future__ import annotations

import cProfile
import time

from harness.profiling import profile_table
from harness.report import Table, progress

from scenarios.stores.context import StoreBench
from scenarios.stores.inputs import CLAIM_LIMIT, LEASE_MS, QUEUE
from scenarios.stores.measuring import ADMIN_COMMANDS, Probe, add_batched, claim_ack, commandstats


async def profile(bench: StoreBench) -> list[Table]:
    """cProfile RedisStore.add_many and claim+ack (client side), then split claim+ack's
    server time into claim and ack; runs after the timed phases and does not change them."""
    tables = []
    s = bench.sizes
    for title, count in (
        (f"RedisStore.add_many of {s.schedule:,}", s.schedule),
        (f"RedisStore claim+ack of {s.claim:,}", s.claim),
    ):
        await bench.flush()
        store = bench.store()
        await store.stats()
        profiler = cProfile.Profile()
        progress(f"profiling {title}")
        if "claim" in title:
            await add_batched(store, bench.inputs.due[:count])
            probe = Probe(title, count, None, [])
            profiler.enable()
            await claim_ack(store, probe)
        else:
            profiler.enable()
            await add_batched(store, bench.inputs.far[:count])
        profiler.disable()
        await store.close()
        tables.append(profile_table(f"cProfile: {title}", profiler))
    tables.append(await split_claim_ack(bench))
    await bench.flush()
    return tables


async def split_claim_ack(bench: StoreBench) -> Table:
    """Server time of the claim calls and of the acks, read between them (INFO each time)."""
    count = bench.sizes.claim
    progress(f"server time of claim vs ack ({count:,})")
    await bench.flush()
    store = bench.store()
    await add_batched(store, bench.inputs.due[:count])
    totals: dict[str, dict[str, list[int]]] = {"claim": {}, "ack": {}}
    wall = {"claim": 0.0, "ack": 0.0}
    timers = 0

    def add(
        part: str, before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]
    ) -> None:
        for name, (calls, usec) in after.items():
            if name.startswith(ADMIN_COMMANDS):
                continue
            old = before.get(name, (0, 0))
            cell = totals[part].setdefault(name, [0, 0])
            cell[0] += calls - old[0]
            cell[1] += usec - old[1]

    while True:
        first = await commandstats(bench.admin)
        t0 = time.perf_counter()
        leases = await store.claim(QUEUE, store.now_ms(), CLAIM_LIMIT, LEASE_MS)
        wall["claim"] += time.perf_counter() - t0
        second = await commandstats(bench.admin)
        add("claim", first, second)
        if not leases:
            break
        timers += len(leases)
        t0 = time.perf_counter()
        await store.ack_many(leases)
        wall["ack"] += time.perf_counter() - t0
        add("ack", second, await commandstats(bench.admin))
    await store.close()
    table = Table(
        f"Server time of RedisStore claim vs ack ({timers:,} timers, limit {CLAIM_LIMIT})",
        ["part", "wall µs/timer", "EVALSHA/timer", "µs/EVALSHA", "server µs/timer", "inside"],
    )
    for part, stats in totals.items():
        calls, usec = stats.get("evalsha", [0, 0])
        inner = sorted(
            ((u, name, c) for name, (c, u) in stats.items() if name != "evalsha"), reverse=True
        )[:4]
        n = max(timers, 1)
        table.rows.append(
            [
                part,
                f"{wall[part] / n * 1e6:.0f}",
                f"{calls / n:.3f}",
                f"{usec / max(calls, 1):.0f}",
                f"{usec / n:.1f}",
                ", ".join(f"{name} {c / n:.1f}x {u / n:.1f}µs" for u, name, c in inner),
            ]
        )
    table.notes = [
        "'inside': commands the scripts ran, as calls per timer and server µs per timer; "
        "wall - server µs/timer is client time plus waiting (round trips, the other core)",
        "claim includes the purge + peek pipeline over every shard that precedes each claim",
    ]
    return table
