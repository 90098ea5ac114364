"""Fill a RedisStore with N pending timers (memory, `add_many` rate), then time claims of 1,000
due timers beside a store holding 10k pending on the same server.

The floor: the same ids and specs written as plainly as Redis allows, ZADD id -> due plus
HSET id -> spec, pipelined; what any store of these timers needs at the least."""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

from harness.report import progress
from redis.asyncio import Redis

from tickwheel.model import Callback, Timer
from tickwheel.stores import Lease
from tickwheel.stores.codec import encode_spec
from tickwheel.stores.redis import RedisStore

URL = "https://hooks.example.com/t/42"  # the stores bench's callback: a 63-byte spec
QUEUE = "default"
SEED = 20261125
LEAD_MS = 3_600_000  # pending timers are due an hour ahead or later...
SPREAD_MS = 3_600_000  # ...spread over the hour after that
BATCH = 10_000  # timers per add_many call
SMALL = 10_000  # the small store's pending timers
CLAIM_LIMIT = 1_000
DUE_SPAN_MS = 600_000  # due timers for the claims are spread over the last ten minutes
LEASE_MS = 600_000  # no lease lapses while a round claims, however slowly
PROGRESS_STEPS = 20  # progress lines over one fill
MAX_CLAIM_CALLS = 1_000  # claims one round may take to lease its due timers
FLOOR_MAX = 1_000_000  # the floor writes at most this many (its cost per timer is flat)
FLOOR_KEYS = ("floor:due", "floor:specs")


@dataclass
class Fill:
    """What filling one store cost."""

    count: int
    add_s: float  # time inside add_many calls
    wall_s: float  # building the timers too
    memory_bytes: int  # INFO memory used_memory after the fill minus before
    spec_bytes: int
    id_bytes: int
    step_rates: list[float] = field(default_factory=list)  # add_many per s, each 1/20 of N

    @property
    def per_s(self) -> float:
        return self.count / self.add_s

    @property
    def bytes_per_timer(self) -> float:
        return self.memory_bytes / self.count


@dataclass
class Claims:
    """By pending timers in the store: the ms each first claim of CLAIM_LIMIT due timers took,
    the timers it took, and the ms and calls taking all of them took."""

    first_ms: dict[int, list[float]] = field(default_factory=dict)
    first_took: dict[int, list[int]] = field(default_factory=dict)
    all_ms: dict[int, list[float]] = field(default_factory=dict)
    calls: dict[int, list[int]] = field(default_factory=dict)


def _timers(count: int, rng: random.Random, now_ms: int, lead_ms: int, span_ms: int) -> list[Timer]:
    callback = Callback(url=URL)
    return [
        Timer(
            id=f"order-{uuid.UUID(int=rng.getrandbits(128), version=4).hex}",
            due_ms=now_ms + lead_ms + rng.randrange(span_ms),
            callback=callback,
        )
        for _ in range(count)
    ]


def _chunks(count: int) -> Iterator[int]:
    for start in range(0, count, BATCH):
        yield min(BATCH, count - start)


async def used_memory(admin: Redis) -> int:
    return int((await admin.info("memory"))["used_memory"])


async def floor(admin: Redis, count: int) -> Fill:
    """ZADD + HSET `count` timers like `fill`'s, BATCH a pipeline; the keys are deleted after."""
    rng = random.Random(SEED)
    now = int((await admin.time())[0]) * 1000
    sample = _timers(1, rng, now, LEAD_MS, SPREAD_MS)[0]
    spec = encode_spec(sample)
    await admin.delete(*FLOOR_KEYS)
    before = await used_memory(admin)
    add_s = 0.0
    wall0 = time.perf_counter()
    for size in _chunks(count):
        timers = _timers(size, rng, now, LEAD_MS, SPREAD_MS)
        t0 = time.perf_counter()
        async with admin.pipeline(transaction=False) as pipe:
            pipe.zadd(FLOOR_KEYS[0], {t.id: t.due_ms for t in timers})
            pipe.hset(FLOOR_KEYS[1], mapping={t.id: spec for t in timers})
            await pipe.execute()
        add_s += time.perf_counter() - t0
    wall_s = time.perf_counter() - wall0
    memory = await used_memory(admin) - before
    await admin.delete(*FLOOR_KEYS)
    progress(
        f"floor: {count:,} ZADD + HSET at {count / add_s:,.0f}/s, {memory / count:,.0f} B each"
    )
    return Fill(count, add_s, wall_s, memory, len(spec.encode()), len(sample.id))


async def fill(store: RedisStore, admin: Redis, count: int) -> Fill:
    """`add_many` `count` pending timers, BATCH a call, one call at a time."""
    rng = random.Random(SEED)
    await store.sync_clock()  # due times count from the server's clock
    sample = _timers(1, rng, store.now_ms(), LEAD_MS, SPREAD_MS)[0]
    before = await used_memory(admin)
    add_s = step_add_s = 0.0
    added = step_added = 0
    step = max(BATCH, count // PROGRESS_STEPS)
    rates: list[float] = []
    wall0 = time.perf_counter()
    for size in _chunks(count):
        timers = _timers(size, rng, store.now_ms(), LEAD_MS, SPREAD_MS)
        t0 = time.perf_counter()
        await store.add_many(timers)
        spent = time.perf_counter() - t0
        add_s += spent
        step_add_s += spent
        added += size
        step_added += size
        if step_added >= step or added == count:
            rates.append(step_added / step_add_s)
            progress(
                f"filled {added:,} of {count:,}: add_many {rates[-1]:,.0f}/s over the last "
                f"{step_added:,}, {added / add_s:,.0f}/s so far, used_memory "
                f"{await used_memory(admin) / 2**20:,.0f} MiB"
            )
            step_add_s, step_added = 0.0, 0
    wall_s = time.perf_counter() - wall0
    memory = await used_memory(admin) - before
    return Fill(
        count,
        add_s,
        wall_s,
        memory,
        len(encode_spec(sample).encode()),
        len(sample.id),
        rates,
    )


@dataclass
class CatchUp:
    """How long after the fill a timer already due could first be claimed, and in how many
    claim calls: the store first moves the filled timers' day slot down (bounded per call)."""

    seconds: float
    calls: int


async def catch_up(store: RedisStore) -> CatchUp:
    """Add one due timer and claim (limit 1) until it comes: the first claim after a fill."""
    rng = random.Random(SEED + 2)
    now = store.now_ms()
    await store.add_many(_timers(1, rng, now, -DUE_SPAN_MS, DUE_SPAN_MS))
    calls = 0
    t0 = time.perf_counter()
    while True:
        leases = await store.claim(QUEUE, store.now_ms(), 1, LEASE_MS)
        calls += 1
        if leases:
            break
        if calls % 100 == 0:
            progress(f"catching up: {calls} claims, {time.perf_counter() - t0:,.1f} s")
    seconds = time.perf_counter() - t0
    if not all(await store.ack_many(leases)):
        raise RuntimeError("the catch-up timer's ack was refused")
    return CatchUp(seconds, calls)


async def claim_latency(stores: dict[int, RedisStore], rounds: int) -> Claims:
    """Time claims of CLAIM_LIMIT due timers on each store, the stores in alternation.

    Each round adds CLAIM_LIMIT timers due in the last ten minutes to a store, claims until
    it holds them all (a claim bounds its work, so one call may take fewer), then acks them,
    so the pending timers stay as filled.
    """
    rng = random.Random(SEED + 1)
    claims = Claims()
    for n in range(rounds + 1):  # round 0 warms up and is not kept
        for pending, store in stores.items():
            now = store.now_ms()
            await store.add_many(_timers(CLAIM_LIMIT, rng, now, -DUE_SPAN_MS, DUE_SPAN_MS))
            leases: list[Lease] = []
            calls = 0
            t0 = time.perf_counter()
            while len(leases) < CLAIM_LIMIT and calls < MAX_CLAIM_CALLS:
                took = await store.claim(QUEUE, store.now_ms(), CLAIM_LIMIT - len(leases), LEASE_MS)
                calls += 1
                if calls == 1:
                    first_ms = (time.perf_counter() - t0) * 1000
                    first_took = len(took)
                leases += took
            all_ms = (time.perf_counter() - t0) * 1000
            if len(leases) != CLAIM_LIMIT:
                raise RuntimeError(f"{calls} claims took {len(leases)} of {CLAIM_LIMIT} due timers")
            if not all(await store.ack_many(leases)):
                raise RuntimeError("an ack of the latency rounds was refused")
            if n:
                claims.first_ms.setdefault(pending, []).append(first_ms)
                claims.first_took.setdefault(pending, []).append(first_took)
                claims.all_ms.setdefault(pending, []).append(all_ms)
                claims.calls.setdefault(pending, []).append(calls)
        if n and n % 10 == 0:
            progress(f"claim rounds: {n} of {rounds}")
    return claims
