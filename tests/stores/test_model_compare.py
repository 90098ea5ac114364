"""Model test: every store does exactly what `MemoryStore`, the reference, does.

A hypothesis state machine drives random adds, cancels, reschedules, claims, acks, retries,
kills, replays, pauses, resumes and clock jumps (which expire leases and retention) against the
reference and another store side by side on one manual clock, and compares every result and
every raised error. Named edge cases that random runs reach rarely replay through the same
machine in `test_scenario`. To check a new backend: subclass `StoreComparison` with its
`make_store`, expose its ``TestCase`` as a module-level ``Test…`` name and append it to
`COMPARISONS` (see `SqliteComparison`).
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Awaitable, Callable
from operator import methodcaller
from pathlib import Path
from typing import TypeVar

import pytest
from budget import examples
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tickwheel.errors import TickwheelError
from tickwheel.model import State, Timer
from tickwheel.stores import Lease, MemoryStore, Page, Stats, Store, StoreSettings
from tickwheel.stores.sqlite import SqliteStore

from .conftest import ManualClock

T = TypeVar("T")

ID_POOL = ("a", "b", "c", "d", "e", "f")
IDS = st.sampled_from(ID_POOL)
QUEUES = st.sampled_from(["default", "default", "default", "other"])
# due times on a 1 s grid, so that many are equal: equal due times must be claimed alike;
# slot 0 is due at once, slot -20 long overdue, slot 70 past the store's horizon (refused)
SLOTS = st.sampled_from([-20, 0, 0, 1, 1, 2, 5, 70])
LIMITS = st.sampled_from([1, 1, 2, 3, 6])  # 6 is over max_claim: refused
LEASES = st.sampled_from([100, 1000, 1000, 5000])
STEPS = st.sampled_from([1, 999, 1000, 1000, 5000, 5000, 20_000])
ERRORS = st.sampled_from(["HTTP 503", "timeout", "x" * 2000])
SETTINGS = StoreSettings(retention_ms=5000, max_horizon_ms=60_000, max_claim=5)


def _timer(timer: Timer) -> tuple[object, ...]:
    return (
        timer.id,
        timer.state,
        timer.attempt,
        timer.due_ms,
        timer.last_error,
        timer.queue,
        timer.payload,
        timer.created_ms,
        timer.updated_ms,
        timer.first_claimed_ms,
        timer.deferrals,
    )


def _view(result: object) -> object:
    """Reduce a store's answer to what must be equal between stores."""
    if isinstance(result, Timer):
        return _timer(result)
    if isinstance(result, Lease):
        return (_timer(result.timer), result.token, result.deadline_ms)
    if isinstance(result, Page):
        return ([_timer(t) for t in result.timers], result.cursor)
    if isinstance(result, Stats):
        return (result.counts, result.earliest_due_ms)
    if isinstance(result, list):
        return [_view(item) for item in result]
    return result


def _error(error: TickwheelError) -> tuple[object, ...]:
    context = getattr(error, "argument", None), getattr(error, "timer_id", None)
    return (type(error), *context, getattr(error, "token", None))


async def listed(store: Store, state: State | None, **filters: object) -> list[Timer]:
    """Every timer a walk through `store.list`'s pages returns, by id (each store lists in an
    order of its own)."""
    timers: list[Timer] = []
    cursor = None
    while True:
        page = await store.list(state, limit=2, cursor=cursor, **filters)  # type: ignore[arg-type]
        timers += page.timers
        if page.cursor is None:
            return sorted(timers, key=lambda timer: timer.id)
        cursor = page.cursor


class StoreComparison(RuleBasedStateMachine):
    """Run each step on the reference and on `make_store`'s store; demand equal outcomes."""

    def make_store(self, clock: ManualClock, settings: StoreSettings, tmp: Path) -> Store:
        raise NotImplementedError

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.tmp = tempfile.TemporaryDirectory()
        self.clock = ManualClock()
        self.reference = MemoryStore(SETTINGS, clock=self.clock)
        self.other = self.make_store(self.clock, SETTINGS, Path(self.tmp.name))
        self.leases: list[tuple[Lease, Lease]] = []  # (reference's, other's), stale ones kept

    def teardown(self) -> None:
        try:
            self.loop.run_until_complete(self.other.close())
        finally:
            self.loop.close()
            self.tmp.cleanup()

    def both(self, call: Callable[[Store], Awaitable[T]]) -> tuple[T, T] | None:
        """Run `call(store)` on the reference and on the other store.

        Both must return equal views or raise alike; return both results, or None if raised.
        """
        results: list[T] = []
        outcomes: list[tuple[str, object]] = []
        for store in (self.reference, self.other):
            try:
                result = self.loop.run_until_complete(call(store))
            except TickwheelError as error:
                outcomes.append(("raised", _error(error)))
            else:
                results.append(result)
                outcomes.append(("returned", _view(result)))
        assert outcomes[1] == outcomes[0]
        return (results[0], results[1]) if len(results) == 2 else None

    def lease(self, which: int, store: Store) -> Lease:
        """Return lease number `which` (modulo how many) as `store` handed it out."""
        return self.leases[which % len(self.leases)][store is self.other]

    def due(self, slot: int) -> int:
        return max(0, (self.clock.now_ms // 1000 + slot) * 1000)

    @rule(
        timer_id=IDS,
        slot=SLOTS,
        queue=QUEUES,
        payload=st.sampled_from([None, 1, {"k": [1, 2]}]),
        replace=st.booleans(),
    )
    def add(self, timer_id: str, slot: int, queue: str, payload: object, replace: bool) -> None:
        timer = Timer(id=timer_id, due_ms=self.due(slot), queue=queue, payload=payload)
        self.both(lambda store: store.add(timer, replace=replace))

    @rule(timer_id=IDS)
    def cancel(self, timer_id: str) -> None:
        self.both(lambda store: store.cancel(timer_id))

    @rule(timer_id=IDS, slot=SLOTS)
    def reschedule(self, timer_id: str, slot: int) -> None:
        self.both(lambda store: store.reschedule(timer_id, self.due(slot)))

    @rule(queue=QUEUES, ahead=st.sampled_from([0, 0, 0, 100, 2000]), limit=LIMITS, lease_ms=LEASES)
    def claim(self, queue: str, ahead: int, limit: int, lease_ms: int) -> None:
        horizon = self.clock.now_ms + ahead
        both = self.both(lambda store: store.claim(queue, horizon, limit, lease_ms))
        if both is not None:
            self.leases.extend(zip(*both, strict=True))

    @precondition(lambda self: self.leases)
    @rule(which=st.integers(0, 1000))
    def ack(self, which: int) -> None:
        self.both(lambda store: store.ack(self.lease(which, store)))

    @precondition(lambda self: self.leases)
    @rule(which=st.integers(0, 1000), lease_ms=LEASES)
    def extend(self, which: int, lease_ms: int) -> None:
        both = self.both(lambda store: store.extend(self.lease(which, store), lease_ms))
        if both is not None:
            self.leases.append(both)

    @precondition(lambda self: self.leases)
    @rule(which=st.lists(st.integers(0, 1000), max_size=4))
    def ack_many(self, which: list[int]) -> None:
        self.both(lambda store: store.ack_many([self.lease(n, store) for n in which]))

    @precondition(lambda self: self.leases)
    @rule(which=st.integers(0, 1000), slot=SLOTS, error=ERRORS)
    def retry(self, which: int, slot: int, error: str) -> None:
        due = self.due(slot)
        self.both(lambda store: store.retry(self.lease(which, store), due, error))

    @precondition(lambda self: self.leases)
    @rule(which=st.integers(0, 1000), slot=SLOTS, reason=ERRORS)
    def defer(self, which: int, slot: int, reason: str) -> None:
        due = self.due(slot)
        self.both(lambda store: store.defer(self.lease(which, store), due, reason))

    @precondition(lambda self: self.leases)
    @rule(which=st.integers(0, 1000), error=ERRORS)
    def kill(self, which: int, error: str) -> None:
        self.both(lambda store: store.kill(self.lease(which, store), error))

    @rule(timer_id=IDS)
    def replay(self, timer_id: str) -> None:
        self.both(lambda store: store.replay(timer_id))

    @rule(timer_id=IDS)
    def pause(self, timer_id: str) -> None:
        self.both(lambda store: store.pause(timer_id))

    @rule(timer_id=IDS)
    def resume(self, timer_id: str) -> None:
        self.both(lambda store: store.resume(timer_id))

    @rule(queue=QUEUES, state=st.sampled_from([State.SCHEDULED, State.PAUSED, State.DEAD]))
    def purge(self, queue: str, state: State) -> None:
        self.both(lambda store: store.purge(queue, state))

    @rule(ms=STEPS)
    def advance(self, ms: int) -> None:
        self.clock.advance(ms)

    @invariant()
    def same_timers(self) -> None:
        for timer_id in ID_POOL:
            self.both(methodcaller("get", timer_id))
        self.both(lambda store: store.stats())
        for queue in ("default", "other"):
            self.both(methodcaller("next_due_ms", queue))
        for state in (None, *State):
            self.both(lambda store: listed(store, state))  # noqa: B023 -- run at once
        self.both(lambda store: store.queue_infos())
        self.both(lambda store: store.list_queues(1))
        self.both(lambda store: store.list_queues(1, "default"))
        for queue in ("default", "other"):
            self.both(methodcaller("queue_info", queue))
        now = self.clock.now_ms
        self.both(lambda store: listed(store, None, queue="other"))
        self.both(lambda store: listed(store, None, due_from_ms=now, due_to_ms=now + 2000))


class SqliteComparison(StoreComparison):
    """`SqliteStore` on a fresh file per run."""

    def make_store(self, clock: ManualClock, settings: StoreSettings, tmp: Path) -> Store:
        return SqliteStore(tmp / "timers.db", settings, clock=clock)


SqliteComparison.TestCase.settings = settings(
    max_examples=examples(full=100, ci=20), stateful_step_count=30, deadline=None
)
TestSqliteMatchesMemory = SqliteComparison.TestCase

# every backend's comparison; the scenarios below run against each
COMPARISONS: list[type[StoreComparison]] = [SqliteComparison]

_ADD = {"queue": "default", "payload": None, "replace": False}
_CLAIM = {"queue": "default", "ahead": 0, "lease_ms": 1000}
# named edge cases that random runs reach rarely: (rule, arguments) steps, checked after each
SCENARIOS: dict[str, list[tuple[str, dict[str, object]]]] = {
    "rescheduling to an equal due time goes last": [
        ("add", {"timer_id": "a", "slot": 1, **_ADD}),
        ("add", {"timer_id": "b", "slot": 1, **_ADD}),
        ("reschedule", {"timer_id": "a", "slot": 1}),
        ("advance", {"ms": 1000}),
        ("claim", {"limit": 1, **_CLAIM}),
    ],
    "expired leases come back in lease order": [
        ("add", {"timer_id": "a", "slot": 0, **_ADD}),
        ("add", {"timer_id": "b", "slot": 0, **_ADD}),
        ("reschedule", {"timer_id": "a", "slot": 0}),
        ("claim", {"limit": 1, **_CLAIM}),
        ("claim", {"limit": 1, **_CLAIM}),
        ("advance", {"ms": 1000}),
        ("claim", {"limit": 1, **_CLAIM}),
        ("claim", {"limit": 1, **_CLAIM}),
    ],
    "a retry to an equal due time goes after the waiting timers": [
        ("add", {"timer_id": "a", "slot": 0, **_ADD}),
        ("add", {"timer_id": "b", "slot": 1, **_ADD}),
        ("claim", {"limit": 1, **_CLAIM}),
        ("retry", {"which": 0, "slot": 1, "error": "HTTP 503"}),
        ("add", {"timer_id": "c", "slot": 1, **_ADD}),
        ("advance", {"ms": 1000}),
        ("claim", {"limit": 2, **_CLAIM}),
    ],
    "a replayed timer goes after the timers already due then": [
        ("add", {"timer_id": "a", "slot": 0, **_ADD}),
        ("claim", {"limit": 1, **_CLAIM}),
        ("kill", {"which": 0, "error": "HTTP 400"}),
        ("add", {"timer_id": "b", "slot": 0, **_ADD}),
        ("advance", {"ms": 1000}),
        ("add", {"timer_id": "c", "slot": 0, **_ADD}),
        ("replay", {"timer_id": "a"}),
        ("claim", {"limit": 2, **_CLAIM}),
    ],
    "a done timer is gone exactly when its retention ends": [
        ("add", {"timer_id": "a", "slot": 0, **_ADD}),
        ("claim", {"limit": 1, **_CLAIM}),
        ("ack", {"which": 0}),
        ("advance", {"ms": 4999}),
        ("advance", {"ms": 1}),
        ("add", {"timer_id": "a", "slot": 1, **_ADD, "payload": 2}),
    ],
    "a resumed timer goes after the timers due at the same time": [
        ("add", {"timer_id": "a", "slot": 1, **_ADD}),
        ("add", {"timer_id": "b", "slot": 1, **_ADD}),
        ("pause", {"timer_id": "a"}),
        ("add", {"timer_id": "c", "slot": 1, **_ADD}),
        ("advance", {"ms": 5000}),
        ("resume", {"timer_id": "a"}),
        ("claim", {"limit": 3, **_CLAIM}),
    ],
    "a paused timer outlives its lease's return and keeps its attempt": [
        ("add", {"timer_id": "a", "slot": 0, **_ADD}),
        ("claim", {"limit": 1, **_CLAIM}),
        ("advance", {"ms": 1000}),
        ("claim", {"limit": 1, **_CLAIM}),
        ("retry", {"which": 1, "slot": 1, "error": "HTTP 503"}),
        ("pause", {"timer_id": "a"}),
        ("advance", {"ms": 20_000}),
        ("claim", {"limit": 1, **_CLAIM}),
        ("resume", {"timer_id": "a"}),
        ("claim", {"limit": 1, **_CLAIM}),
    ],
    "replace takes over a leased timer and the old lease is lost": [
        ("add", {"timer_id": "a", "slot": 0, **_ADD}),
        ("claim", {"limit": 1, **_CLAIM}),
        ("add", {"timer_id": "a", "slot": 0, **_ADD, "replace": True}),
        ("ack", {"which": 0}),
        ("claim", {"limit": 1, **_CLAIM}),
    ],
}


@pytest.mark.parametrize("comparison", COMPARISONS)
@pytest.mark.parametrize("steps", SCENARIOS.values(), ids=SCENARIOS)
def test_scenario(
    comparison: type[StoreComparison], steps: list[tuple[str, dict[str, object]]]
) -> None:
    machine = comparison()
    try:
        machine.same_timers()
        for name, arguments in steps:
            getattr(machine, name)(**arguments)
            machine.same_timers()
    finally:
        machine.teardown()
