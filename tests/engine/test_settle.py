"""`Settler` acks: spaced store calls gather the acks queued meanwhile; none is dropped."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import cast

from tickwheel.engine.metrics import Metrics
from tickwheel.engine.settle import Settler, Throttled
from tickwheel.model import Timer
from tickwheel.stores import Lease, Store


class AckRecorder:
    """Records each ack_many call's size and start time; every ack lands."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, float]] = []

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    async def ack_many(self, leases: Sequence[Lease]) -> list[bool]:
        self.calls.append((len(leases), time.monotonic()))
        await asyncio.sleep(0)
        return [True] * len(leases)


def lease(n: int) -> Lease:
    return Lease(Timer(id=f"t{n}", due_ms=1), 1, 10**13)


async def test_acks_within_the_interval_share_one_store_call() -> None:
    store = AckRecorder()
    settler = Settler(cast(Store, store), Metrics(), Throttled(), ack_every_s=0.05)
    first = settler.ack(lease(0))
    await asyncio.sleep(0.01)
    rest = []
    for n in range(1, 11):
        rest.append(settler.ack(lease(n)))
        await asyncio.sleep(0.002)
    assert await asyncio.gather(first, *rest) == [True] * 11
    sizes = [size for size, _ in store.calls]
    assert sizes == [1, 10]
    assert store.calls[1][1] - store.calls[0][1] >= 0.05 - 0.005  # loop timers may run early


async def test_without_an_interval_acks_go_out_as_soon_as_the_last_call_returns() -> None:
    store = AckRecorder()
    settler = Settler(cast(Store, store), Metrics(), Throttled())
    for n in range(3):
        assert await settler.ack(lease(n))
    assert [size for size, _ in store.calls] == [1, 1, 1]
