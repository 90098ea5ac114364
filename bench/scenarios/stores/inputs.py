"""The run's sizes and settings, and the timers every store scenario adds and claims (built,
and timed, before any run)."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from harness.report import progress

from tickwheel.model import Callback, Timer
from tickwheel.stores.codec import encode_spec
from tickwheel.stores.redis.record import SeqSource, base36, pack_new

URL = "https://hooks.example.com/t/42"  # 30 characters: a minimal timer's callback
QUEUE = "default"
PREFIX = "bench"
SEED = 20240601
FAR_LEAD_MS = 3_600_000  # pending ("not due") timers start an hour ahead...
DUE_SPAN_MS = 600_000  # ...due ones are spread over the last ten minutes
PRODUCER_BATCH = 10_000  # timers per add_many call
PIPELINE = 1_000  # commands per pipeline (raw floor) and timers per SQLite transaction
CONCURRENCY = 64  # concurrent add / ack calls
CLAIM_LIMIT = 1_000
CLAIM_ROUNDS = 3  # alternated floor and RedisStore claim+ack runs; rows keep the median
LEASE_MS = 30_000
LATENCY_LIMIT = 100
SMALL = 10_000  # the "10k pending" point of the latency table
FLAT_LIMIT = 1.5  # "must stay flat": this bench's reading, p50 at N / p50 at 10k


def wall_ms() -> int:
    """Return the epoch ms of this host's clock."""
    return time.time_ns() // 1_000_000


@dataclass
class Sizes:
    """How many timers each scenario uses."""

    pending: int  # N: memory and latency
    schedule: int  # timers per schedule row
    single: int  # timers per one-by-one add row
    claim: int  # due timers per claim + ack row
    calls: int  # claim calls per latency cell

    @property
    def due(self) -> int:
        """Due timers to build: enough for claim + ack and for every latency call."""
        return max(self.claim, LATENCY_LIMIT * (self.calls + 1))


@dataclass
class Inputs:
    """The timers of the run, and what building and encoding them cost."""

    far: list[Timer]  # pending, due an hour or more ahead, in random due order
    due: list[Timer]  # already due
    distinct: list[Timer]  # pending, each with its own Callback (so its own encoding)
    build_us: float
    distinct_build_us: float
    spec_bytes: int
    record_bytes: int
    id_bytes: int


def build_inputs(sizes: Sizes, spread_ms: int) -> Inputs:
    """Build every Timer the run uses, timing their construction."""
    rng = random.Random(SEED)
    callback = Callback(url=URL)
    now = wall_ms()
    count = max(sizes.pending, sizes.schedule, SMALL)
    progress(f"building {count:,} pending + {sizes.due:,} due timers")
    offsets = [FAR_LEAD_MS + rng.randrange(spread_ms) for _ in range(count)]
    t0 = time.perf_counter()
    far = [Timer(due_ms=now + off, callback=callback) for off in offsets]
    build_us = (time.perf_counter() - t0) / count * 1e6
    due = [
        Timer(due_ms=now - DUE_SPAN_MS + rng.randrange(DUE_SPAN_MS), callback=callback)
        for _ in range(sizes.due)
    ]
    n = sizes.schedule // 2
    t0 = time.perf_counter()
    distinct = [
        Timer(due_ms=now + off, callback=Callback(url=f"{URL}/{i}"))
        for i, off in enumerate(offsets[:n])
    ]
    distinct_us = (time.perf_counter() - t0) / max(n, 1) * 1e6
    sample = far[0]
    spec = encode_spec(sample)
    record = pack_new(sample, base36(now), SeqSource.format(SeqSource().take()), spec)
    return Inputs(
        far,
        due,
        distinct,
        build_us,
        distinct_us,
        len(spec.encode()),
        len(record.encode()),
        len(sample.id),
    )
