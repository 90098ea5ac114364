"""What every store scenario shares: the clients, sizes, inputs and the results they fill."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis.asyncio as aredis
from harness.raw_floor import RAW_CLAIM_LUA
from harness.report import progress

from scenarios.stores.inputs import LATENCY_LIMIT, LEASE_MS, PREFIX, QUEUE, Inputs, Sizes
from scenarios.stores.measuring import Call, Measured, Probe, sample_interleaved
from scenarios.stores.raw_floor import raw_claim
from tickwheel.model import Timer
from tickwheel.stores import SqliteStore
from tickwheel.stores.redis import RedisStore

Lat = dict[tuple[str, str, int], list[float]]  # (store, case, pending) -> claim ms samples


@dataclass
class Results:
    """What the scenarios measured, for the tables."""

    schedule: dict[str, Measured] = field(default_factory=dict)
    claim: dict[str, Measured] = field(default_factory=dict)  # the median of CLAIM_ROUNDS
    claim_runs: dict[str, list[float]] = field(default_factory=dict)  # every run's timers/s
    memory: dict[str, float] = field(default_factory=dict)  # label -> bytes per timer
    server: list[Measured] = field(default_factory=list)  # Redis runs, for "where time goes"
    latency: Lat = field(default_factory=dict)
    sqlite_disk: float | None = None
    kinds: dict[str, list[int]] = field(default_factory=dict)  # key kind -> [keys, bytes]
    notes: list[str] = field(default_factory=list)
    load_note: str = ""


class StoreBench:
    """The clients, sizes and inputs of one run, the results the scenarios fill in, and the
    helpers they share."""

    def __init__(self, url: str, sizes: Sizes, inputs: Inputs, shards: int) -> None:
        self.url = url
        self.sizes = sizes
        self.inputs = inputs
        self.shards = shards
        self.results = Results()
        self.admin = aredis.Redis.from_url(url, decode_responses=True)
        self.raw = aredis.Redis.from_url(url)
        self.raw_script = self.raw.register_script(RAW_CLAIM_LUA)
        self.tmp = Path(tempfile.mkdtemp(prefix="tickwheel-bench-sqlite-"))
        self._files = 0

    async def close(self) -> None:
        """Close the clients and remove the SQLite files."""
        await self.admin.aclose()
        await self.raw.aclose()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def store(self) -> RedisStore:
        """Return a new RedisStore on the run's server, under the bench prefix."""
        return RedisStore.from_url(self.url, prefix=PREFIX, shards=self.shards)

    def sqlite(self) -> SqliteStore:
        """Return a SqliteStore on a new file."""
        self._files += 1
        return SqliteStore(self.tmp / f"bench{self._files}.db")

    async def flush(self) -> None:
        """Empty our redis-server (FLUSHALL)."""
        await self.admin.flushall()

    async def used_memory(self) -> int:
        """Return the server's used_memory once closed clients' buffers are gone."""
        await asyncio.sleep(0.3)  # let the server drop closed clients' buffers
        return int((await self.admin.info("memory"))["used_memory"])

    def probe(self, label: str, count: int, redis_side: bool) -> Probe:
        """Return a Probe whose result joins "where the time goes"; `redis_side` adds Redis's view."""
        return Probe(label, count, self.admin if redis_side else None, self.results.server)

    def check_count(self, label: str, got: int, expected: int) -> None:
        """Note (and warn) when a claim + ack run did not settle every due timer."""
        if got != expected:
            note = f"{label}: claimed and acked {got:,} of {expected:,} due timers"
            self.results.notes.append(note)
            progress(f"  warning: {note}")

    async def latency(self, name: str, stores: dict[int, Any], add_due: Call) -> None:
        """Latency of claim(limit=100) on stores holding 10k and N pending timers, interleaved:
        first with nothing due, then after `add_due` gave each 100 due timers per call."""
        progress(f"{name} latency at {' and '.join(f'{p:,}' for p in stores)} pending")

        def claim(store: Any) -> Call:
            if isinstance(store, str):  # the floor: a zset key
                return lambda: raw_claim(self.raw_script, LATENCY_LIMIT, store)
            return lambda: store.claim(QUEUE, store.now_ms(), LATENCY_LIMIT, LEASE_MS)

        calls = {pending: claim(store) for pending, store in stores.items()}
        for call in calls.values():
            for _ in range(5):  # warm-up (loads the scripts)
                await call()
        k, lat = self.sizes.calls, self.results.latency
        for pending, samples in (await sample_interleaved(calls, k, 0)).items():
            lat[name, "nothing due", pending] = samples
        await add_due()
        for pending, samples in (await sample_interleaved(calls, k, LATENCY_LIMIT)).items():
            lat[name, "100 due", pending] = samples

    def due_for_latency(self) -> list[Timer]:
        """Return the due timers the latency cells add: 100 per claim call."""
        return self.inputs.due[: LATENCY_LIMIT * self.sizes.calls]
