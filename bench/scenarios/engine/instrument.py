"""Timing a store's claims and acks by wrapping its instance attributes (its code is untouched)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from scenarios.engine.timing import wall_ms
from tickwheel.stores import Lease
from tickwheel.stores.attempt_record import Attempt
from tickwheel.stores.redis import RedisStore


@dataclass
class Calls:
    """(start ms, end ms, items) of each claim and each ack_many a store made."""

    expect: int = 0
    claims: list[tuple[float, float, int]] = field(default_factory=list)
    acks: list[tuple[float, float, int]] = field(default_factory=list)
    acked: int = 0
    all_acked: asyncio.Event = field(default_factory=asyncio.Event)

    def claimed_by(self, at_ms: float) -> int:
        return sum(n for _, end, n in self.claims if end <= at_ms)

    def last_claim_end(self) -> float | None:
        ends = [end for _, end, n in self.claims if n]
        return max(ends) if ends else None

    def busy_ms(self, kind: str) -> float:
        calls = self.claims if kind == "claim" else self.acks
        return sum(end - start for start, end, n in calls if n)


def instrument(store: RedisStore, expect: int) -> Calls:
    """Time the store's claims and acks; `all_acked` is set once `expect` acks have landed."""
    calls = Calls(expect)
    claim, ack_many = store.claim, store.ack_many

    async def timed_claim(queue: str, horizon_ms: int, limit: int, lease_ms: int) -> list[Lease]:
        t0 = wall_ms()
        leases = await claim(queue, horizon_ms, limit, lease_ms)
        calls.claims.append((t0, wall_ms(), len(leases)))
        return leases

    async def timed_ack_many(
        leases: Sequence[Lease], attempts: Sequence[Attempt | None] = ()
    ) -> list[bool]:
        t0 = wall_ms()
        acked = await ack_many(leases, attempts)
        calls.acks.append((t0, wall_ms(), len(leases)))
        calls.acked += sum(acked)
        if calls.acked >= calls.expect:
            calls.all_acked.set()
        return acked

    store.claim = timed_claim  # type: ignore[method-assign]
    store.ack_many = timed_ack_many  # type: ignore[method-assign]
    return calls
