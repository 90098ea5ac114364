"""The raw floor of the store scenarios: plain redis-py commands doing a store's work."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import redis.asyncio as aredis
from harness.raw_floor import RAW_DUE

from scenarios.stores.inputs import CLAIM_LIMIT, LEASE_MS, PIPELINE, wall_ms
from scenarios.stores.measuring import Probe
from tickwheel.model import Timer

RAW_RECORDS = "raw:records"


async def raw_zadd(client: aredis.Redis, timers: Sequence[Timer], record: str | None) -> None:
    """Pipelined single-member ZADD (and HSET of `record`), PIPELINE timers per round trip."""
    for start in range(0, len(timers), PIPELINE):
        pipe = client.pipeline(transaction=False)
        for timer in timers[start : start + PIPELINE]:
            pipe.zadd(RAW_DUE, {timer.id: timer.due_ms})
            if record is not None:
                pipe.hset(RAW_RECORDS, timer.id, record)
        await pipe.execute()


async def raw_fill(
    client: aredis.Redis,
    timers: Sequence[Timer],
    record: str | None = None,
    keys: tuple[str, str] = (RAW_DUE, RAW_RECORDS),
) -> None:
    """Untimed setup: variadic ZADD (and HSET) of PIPELINE members per command, two pipelines
    of ten commands in flight."""
    step = PIPELINE * 10

    async def send(start: int) -> None:
        pipe = client.pipeline(transaction=False)
        for first in range(start, min(start + step, len(timers)), PIPELINE):
            chunk = timers[first : first + PIPELINE]
            pipe.zadd(keys[0], {t.id: t.due_ms for t in chunk})
            if record is not None:
                pipe.hset(keys[1], mapping=dict.fromkeys((t.id for t in chunk), record))
        await pipe.execute()

    starts = range(0, len(timers), step)
    for n in range(0, len(starts), 2):
        await asyncio.gather(*map(send, starts[n : n + 2]))


async def raw_claim(script: Any, limit: int, due_key: str = RAW_DUE) -> list[bytes]:
    """The floor's claim: up to `limit` due ids of `due_key` moved to its lease zset."""
    now = wall_ms()
    keys = [due_key, f"{due_key}:leases"]
    ids: list[bytes] = await script(keys=keys, args=[now, limit, now + LEASE_MS])
    return ids


async def raw_claim_ack(client: aredis.Redis, script: Any, probe: Probe) -> int:
    """The floor's claim + ack: the Lua claim, then one pipelined ZREM per acked id."""
    done = 0
    while True:
        t0 = time.perf_counter()
        ids = await raw_claim(script, CLAIM_LIMIT, RAW_DUE)
        t1 = time.perf_counter()
        probe.claim_s += t1 - t0
        if not ids:
            return done
        pipe = client.pipeline(transaction=False)
        for member in ids:
            pipe.zrem(f"{RAW_DUE}:leases", member)
        await pipe.execute()
        probe.ack_s += time.perf_counter() - t1
        probe.batches += 1
        done += len(ids)
