"""Redis memory per pending timer at N, by kind of key, and claim latency at 10k and N pending."""

from __future__ import annotations

from harness.raw_floor import RAW_DUE
from harness.report import progress

from scenarios.stores.context import StoreBench
from scenarios.stores.inputs import PREFIX, SMALL
from scenarios.stores.measuring import add_batched
from scenarios.stores.raw_floor import raw_fill
from tickwheel.stores.redis import RedisStore


def key_kind(key: str) -> str:
    """Name the kind of a RedisStore key (see tickwheel/stores/redis/keys.py)."""
    rest = key.split("}:", 1)[-1]
    parts = rest.split(":")
    kinds = {
        "r": "records hash (id -> record)",
        "dead": "dead letters (id, score 0)",
        "n": "counts (state -> timers)",
        "x": "done list (expiry,id)",
        "l": "lease batches (deadline|queue)",
        "b": "lease batch lists (seq+id)",
    }
    if parts[0] in kinds:
        return kinds[parts[0]]
    if parts[0] == "q" and len(parts) >= 3:
        kind = parts[-2] if len(parts) >= 4 else parts[-1]
        queue_kinds = {
            "n": "near sets (seq+id -> due)",
            "1": "minute slots (id lists)",
            "2": "day slots (id lists)",
            "i1": "slot indexes (start -> start)",
            "i2": "slot indexes (start -> start)",
            "l": "queue lease deadlines",
        }
        return queue_kinds.get(kind, f"other ({rest})")
    return f"other ({rest})"


async def memory_by_kind(bench: StoreBench) -> dict[str, list[int]]:
    """MEMORY USAGE (exact: SAMPLES 0) of the store's keys, summed per kind of key."""
    kinds: dict[str, list[int]] = {}
    async for key in bench.admin.scan_iter(match=f"{{{PREFIX}:*", count=1000):
        usage = await bench.admin.memory_usage(key, samples=0) or 0
        cell = kinds.setdefault(key_kind(key), [0, 0])
        cell[0] += 1
        cell[1] += usage
    return dict(sorted(kinds.items(), key=lambda item: -item[1][1]))


async def redis_pending(bench: StoreBench) -> None:
    """Memory per timer at N (floor and store), then latency at 10k and N pending."""
    n, inputs, mem = bench.sizes.pending, bench.inputs, bench.results.memory
    far = inputs.far[:n]
    await bench.flush()
    before = await bench.used_memory()
    progress(f"redis memory: raw ZADD of {n:,}")
    await raw_fill(bench.raw, far)
    mem["raw floor: ZADD only (id -> due)"] = (await bench.used_memory() - before) / n

    before = await bench.used_memory()
    progress(f"redis memory: raw ZADD + HSET of {n:,}")
    keys = ("raw2:due", "raw2:records")
    await raw_fill(bench.raw, far, "r" * inputs.record_bytes, keys)
    mem[f"raw floor: ZADD + HSET {inputs.record_bytes} B record"] = (
        await bench.used_memory() - before
    ) / n
    await bench.raw.delete(*keys)  # the ZADD-only zset stays, for the latency phase

    warm = bench.store()
    await warm.stats()  # loads the scripts
    await warm.close()
    store = bench.store()
    before = await bench.used_memory()
    label = f"RedisStore.add_many at N={n:,} (memory phase)"
    progress(f"redis memory: {label}")
    async with bench.probe(label, n, True) as probe:
        await add_batched(store, far)
    bench.results.schedule[label] = probe.measured
    await store.close()
    mem["RedisStore"] = (await bench.used_memory() - before) / n
    progress("redis memory: MEMORY USAGE of the store's keys")
    bench.results.kinds = await memory_by_kind(bench)

    # the 10k sets sit beside the N ones (other keys, another prefix) so that both are
    # measured in alternation
    small_key = f"{RAW_DUE}:small"
    await raw_fill(bench.raw, far[:SMALL], keys=(small_key, ""))
    due = bench.due_for_latency()

    async def raw_due() -> None:
        for key in (small_key, RAW_DUE):
            await raw_fill(bench.raw, due, keys=(key, ""))

    await bench.latency("raw floor: Lua claim", {SMALL: small_key, n: RAW_DUE}, raw_due)
    small = RedisStore.from_url(bench.url, prefix=f"{PREFIX}-small", shards=bench.shards)
    await add_batched(small, far[:SMALL])
    big = bench.store()

    async def store_due() -> None:
        for each in (small, big):
            await add_batched(each, due)

    await bench.latency("RedisStore", {SMALL: small, n: big}, store_due)
    await small.close()
    await big.close()
    await bench.flush()
