"""`Settler`: spaced ack calls gather the acks queued meanwhile; no settle is dropped or hangs,
whatever the store raises."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import cast

import pytest

from tickwheel.engine.metrics import Metrics
from tickwheel.engine.settle import Settler, Throttled
from tickwheel.errors import InvalidTimer
from tickwheel.model import RetryPolicy, State, Timer
from tickwheel.stores import Lease, MemoryStore, Store, StoreSettings
from tickwheel.stores.attempt_record import Attempt

from .support import wall_ms

pytestmark = pytest.mark.latency  # tight bounds on real time: `make test` runs these after the rest


class AckRecorder:
    """Records each ack_many call's size and start time; every ack lands."""

    settings = StoreSettings()

    def __init__(self) -> None:
        self.calls: list[tuple[int, float]] = []

    def now_ms(self) -> int:
        return wall_ms()

    async def ack_many(
        self, leases: Sequence[Lease], attempts: Sequence[Attempt | None] = ()
    ) -> list[bool]:
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


class AckFailsOnce(AckRecorder):
    """The first ack_many call raises something other than `StoreUnavailable`."""

    async def ack_many(
        self, leases: Sequence[Lease], attempts: Sequence[Attempt | None] = ()
    ) -> list[bool]:
        if not self.calls:
            self.calls.append((len(leases), time.monotonic()))
            raise RuntimeError("a bug in the store")
        return await super().ack_many(leases, attempts)


async def test_a_failed_ack_batch_tells_its_waiters_and_the_next_acks_still_land() -> None:
    store = AckFailsOnce()
    metrics = Metrics()
    settler = Settler(cast(Store, store), metrics, Throttled())
    failed = [settler.ack(lease(n)) for n in range(3)]
    async with asyncio.timeout(2):
        assert await asyncio.gather(*failed) == [False] * 3
        assert await settler.ack(lease(3))
    assert [size for size, _ in store.calls] == [3, 1]
    assert metrics.store_errors["ack"] == 1


async def test_ack_then_calls_back_once_the_ack_landed_or_failed() -> None:
    store = AckFailsOnce()
    settler = Settler(cast(Store, store), Metrics(), Throttled())
    heard: list[str] = []
    settler.ack_then(lease(0), None, lambda: heard.append("failed batch"))
    assert heard == []  # not before the store answered
    async with asyncio.timeout(2):
        await settler.drain()
        landed = settler.ack(lease(1))
        settler.ack_then(lease(2), None, lambda: heard.append("landed"))
        assert await landed
        await settler.drain()
    assert heard == ["failed batch", "landed"]
    assert [size for size, _ in store.calls] == [1, 2]


class Refuses(MemoryStore):
    """A memory store whose retry (and, if told, kill) raises `error`."""

    def __init__(self, error: Exception, *, kill_too: bool = False) -> None:
        super().__init__()
        self.error = error
        self.kill_too = kill_too

    async def retry(
        self, lease: Lease, due_ms: int, error: str, attempt: Attempt | None = None
    ) -> None:
        raise self.error

    async def kill(self, lease: Lease, error: str, attempt: Attempt | None = None) -> None:
        if self.kill_too:
            raise self.error
        await super().kill(lease, error, attempt)


async def claimed(store: Store) -> Lease:
    policy = RetryPolicy(min_backoff_s=1, max_backoff_s=1)
    await store.add(Timer(due_ms=store.now_ms(), retry=policy))
    [taken] = await store.claim("default", store.now_ms(), 1, 10_000)
    return taken


@pytest.mark.parametrize(
    "error", [InvalidTimer("due_ms", "past the horizon"), RuntimeError("disk on fire")]
)
async def test_a_retry_the_store_refuses_dead_letters_the_timer_with_both_errors(
    error: Exception,
) -> None:
    store = Refuses(error)
    settler = Settler(store, Metrics(), Throttled())
    taken = await claimed(store)
    await settler.fail(taken, "HTTP 500: oops")
    stored = await store.get(taken.timer.id)
    assert stored is not None
    assert stored.state is State.DEAD
    assert stored.last_error is not None
    assert type(error).__name__ in stored.last_error
    assert stored.last_error.endswith("HTTP 500: oops")


async def test_a_kill_the_store_refuses_is_logged_and_the_lease_left_to_lapse(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = Refuses(RuntimeError("disk on fire"), kill_too=True)
    settler = Settler(store, Metrics(), Throttled())
    taken = await claimed(store)
    await settler.fail(taken, "HTTP 500: oops")
    stored = await store.get(taken.timer.id)
    assert stored is not None
    assert stored.state is State.LEASED
    assert "could not be dead-lettered" in caplog.text


class CountingDefers(MemoryStore):
    """A memory store that counts its `defer_many` calls and refuses a batch holding `bad`."""

    def __init__(self, bad: str | None = None) -> None:
        super().__init__()
        self.calls = 0
        self.bad = bad

    async def defer_many(self, deferrals: Sequence[tuple[Lease, int, str]]) -> list[bool]:
        self.calls += 1
        if any(lease.timer.id == self.bad for lease, _, _ in deferrals):
            raise InvalidTimer("due_ms", "past the horizon")
        return await super().defer_many(deferrals)

    async def defer(self, lease: Lease, due_ms: int, reason: str) -> None:
        if lease.timer.id == self.bad:
            raise InvalidTimer("due_ms", "past the horizon")
        await super().defer(lease, due_ms, reason)


async def test_deferrals_handed_back_at_once_share_few_store_calls() -> None:
    store = CountingDefers()
    metrics = Metrics()
    settler = Settler(store, metrics, Throttled())
    await store.add_many([Timer(due_ms=store.now_ms()) for _ in range(1200)])
    leases = await store.claim("default", store.now_ms(), 1200, 10_000)
    later = store.now_ms() + 5000
    await asyncio.gather(*(settler.defer(lease, later, "its target hangs") for lease in leases))
    assert store.calls <= 4  # 1,200 in batches of 500: not one call each
    assert sum(metrics.deferred.values()) == 1200
    assert (await store.stats()).counts[State.SCHEDULED] == 1200


async def test_a_batch_the_store_refuses_is_deferred_one_by_one_and_the_refused_one_dead() -> None:
    store = CountingDefers()
    settler = Settler(store, Metrics(), Throttled())
    await store.add_many([Timer(id=f"t{n}", due_ms=store.now_ms()) for n in range(3)])
    leases = await store.claim("default", store.now_ms(), 3, 10_000)
    store.bad = "t1"
    later = store.now_ms() + 5000
    await asyncio.gather(*(settler.defer(lease, later, "waiting") for lease in leases))
    states = [(await store.get(f"t{n}")).state for n in range(3)]  # type: ignore[union-attr]
    assert states == [State.SCHEDULED, State.DEAD, State.SCHEDULED]
