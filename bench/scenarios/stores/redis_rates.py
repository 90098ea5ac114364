"""RedisStore's schedule rate and claim + ack rate, each beside its raw floor."""

from __future__ import annotations

from harness.raw_floor import RAW_DUE
from harness.report import progress

from scenarios.stores.context import StoreBench
from scenarios.stores.inputs import CLAIM_ROUNDS, CONCURRENCY, PIPELINE, PRODUCER_BATCH
from scenarios.stores.measuring import Measured, Probe, add_batched, add_each, claim_ack
from scenarios.stores.raw_floor import raw_claim_ack, raw_fill, raw_zadd


async def redis_schedule(bench: StoreBench) -> None:
    """Measure the schedule rate: the floor's pipelined ZADDs, then RedisStore's adds."""
    s, inputs, out = bench.sizes, bench.inputs, bench.results.schedule
    timers = inputs.far[: s.schedule]
    record = "r" * inputs.record_bytes
    for label, rec in (
        (f"raw floor: pipelined ZADD, {PIPELINE:,} per round trip", None),
        (f"raw floor: pipelined ZADD + HSET ({inputs.record_bytes} B record)", record),
    ):
        await bench.flush()
        progress(f"redis schedule: {label}")
        async with bench.probe(label, len(timers), True) as probe:
            await raw_zadd(bench.raw, timers, rec)
        out[label] = probe.measured
    await bench.flush()
    label = f"raw (info): ZADD of {PIPELINE:,} members per command"
    progress(f"redis schedule: {label}")
    async with bench.probe(label, len(timers), True) as probe:
        for start in range(0, len(timers), PIPELINE):
            chunk = timers[start : start + PIPELINE]
            await bench.raw.zadd(RAW_DUE, {t.id: t.due_ms for t in chunk})
    out[label] = probe.measured

    store = bench.store()
    await store.stats()  # sync the clock and load the scripts
    for label, batch in (
        (f"RedisStore.add_many, {PRODUCER_BATCH:,} per call", timers),
        ("RedisStore.add_many (info): own Callback per timer", inputs.distinct),
    ):
        await bench.flush()
        progress(f"redis schedule: {label} ({len(batch):,})")
        async with bench.probe(label, len(batch), True) as probe:
            await add_batched(store, batch)
        out[label] = probe.measured
    await bench.flush()
    label = f"RedisStore.add (info): one by one, {CONCURRENCY} at once"
    progress(f"redis schedule: {label} ({s.single:,})")
    async with bench.probe(label, s.single, True) as probe:
        await add_each(store, timers[: s.single], CONCURRENCY)
    out[label] = probe.measured
    await store.close()


async def redis_claim(bench: StoreBench) -> None:
    """The floor and RedisStore in CLAIM_ROUNDS alternated rounds; each row keeps its
    median run (single runs of a second or two swing by a quarter on a shared VM)."""
    due = bench.inputs.due[: bench.sizes.claim]
    floor_label, label = "raw floor: Lua claim + pipelined ZREM acks", "RedisStore"
    runs: dict[str, list[Measured]] = {floor_label: [], label: []}
    for round_ in range(1, CLAIM_ROUNDS + 1):
        await bench.flush()
        await raw_fill(bench.raw, due)
        progress(f"redis claim+ack {round_}/{CLAIM_ROUNDS}: {floor_label} ({len(due):,})")
        async with Probe(floor_label, len(due), bench.admin, []) as probe:
            probe.count = await raw_claim_ack(bench.raw, bench.raw_script, probe)
        runs[floor_label].append(probe.measured)

        await bench.flush()
        store = bench.store()
        await add_batched(store, due)
        progress(f"redis claim+ack {round_}/{CLAIM_ROUNDS}: {label} ({len(due):,})")
        async with Probe(f"{label} claim+ack", len(due), bench.admin, []) as probe:
            probe.count = await claim_ack(store, probe)
        runs[label].append(probe.measured)
        await store.close()
        bench.check_count(label, probe.count, len(due))
    for name, measured in runs.items():
        by_rate = sorted(measured, key=lambda m: m.rate)
        median = by_rate[len(by_rate) // 2]
        bench.results.claim[name] = median
        bench.results.claim_runs[name] = [m.rate for m in measured]
        bench.results.server.append(median)
