"""`Dispatcher`: a timer claimed again while it waits in the wheel is delivered once, at its
latest claim's due time."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import cast

import pytest

from tickwheel.engine.dispatch import Dispatcher
from tickwheel.engine.metrics import Metrics
from tickwheel.engine.settings import WorkerSettings
from tickwheel.engine.settle import Settler, Throttled
from tickwheel.model import Timer
from tickwheel.stores import Lease, Store, StoreSettings
from tickwheel.stores.attempt_record import Attempt
from tickwheel.stores.base import Limit, QueueSettings

from .support import wall_ms


class ScriptedStore:
    """Claims return the given batches in turn, then nothing; every settle succeeds."""

    settings = StoreSettings()

    def __init__(self, batches: list[list[Lease]]) -> None:
        self.batches = batches
        self.handed_back: list[Lease] = []

    def now_ms(self) -> int:
        return wall_ms()

    async def sync_clock(self) -> None:
        """This host's clock: nothing to measure."""

    async def claim(self, queue: str, horizon_ms: int, limit: int, lease_ms: int) -> list[Lease]:
        return self.batches.pop(0) if self.batches else []

    async def advance(self, leases: Sequence[Lease]) -> list[bool]:
        return [True] * len(leases)

    async def next_due_ms(self, queue: str) -> int | None:
        return None

    async def wait(self, queue: str, timeout_s: float) -> bool:
        await asyncio.sleep(0.01)
        return False

    async def ack_many(
        self, leases: Sequence[Lease], attempts: Sequence[Attempt | None] = ()
    ) -> list[bool]:
        return [True] * len(leases)

    async def defer(self, lease: Lease, due_ms: int, reason: str) -> None:
        self.handed_back.append(lease)

    async def defer_many(self, deferrals: Sequence[tuple[Lease, int, str]]) -> list[bool]:
        self.handed_back += [lease for lease, _, _ in deferrals]
        return [True] * len(deferrals)

    async def retry(
        self, lease: Lease, due_ms: int, error: str, attempt: Attempt | None = None
    ) -> None:
        self.handed_back.append(lease)

    async def queue_settings(self) -> dict[str, QueueSettings]:
        return {}

    async def limits(self) -> dict[str, Limit]:
        return {}

    async def settings_versions(self) -> tuple[int, int]:
        return 0, 0


@pytest.mark.parametrize("second_in_ms", [100, 500])
async def test_a_timer_claimed_again_is_delivered_once_at_its_new_due_time(
    second_in_ms: int,
) -> None:
    now = wall_ms()
    first = Timer(id="t1", due_ms=now + 300)
    again = Timer(id="t1", due_ms=now + second_in_ms)
    store = ScriptedStore([[Lease(first, 1, now + 60_000)], [Lease(again, 2, now + 60_000)]])
    delivered: list[tuple[Lease, int]] = []
    metrics, throttled = Metrics(), Throttled()
    dispatcher = Dispatcher(
        cast(Store, store),  # the calls a dispatcher makes, nothing more
        WorkerSettings(queues=("default",), lookahead_ms=1000),
        lambda ready: delivered.extend((held.lease, store.now_ms()) for held in ready),
        settler=Settler(cast(Store, store), metrics, throttled),
        metrics=metrics,
        throttled=throttled,
        abandon=lambda: None,
    )
    running = asyncio.create_task(dispatcher.run())
    await asyncio.sleep(0.7)
    dispatcher.stop(grace=False)
    await running
    assert [(lease.token, at >= now + second_in_ms) for lease, at in delivered] == [(2, True)]
    assert store.handed_back == [delivered[0][0]]  # held, unsettled: handed back on stop
