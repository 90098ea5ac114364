"""`StoreContract`: the part of the `Store` protocol every backend shares, done once.

A public method here checks its arguments (`checks.py`), does what every store does the same
way, then calls the backend's own step, a protected method of the same name (`claim` calls
`_claim`), as saq's ``Queue.enqueue`` calls ``_enqueue``. Each backend's root class
(`MemoryHeaps`, `SqliteThread`, `RedisStoreBase`, PostgreSQL's `Runner`) derives from it, so a
backend writes its steps and never an argument check. Calls with nothing to check (`get`,
`ack`, `ack_many`, ...) are the backend's own: a wrapper would cost a call and check nothing.
A due time given with ``due_checked=True`` was compared with the horizon by the caller (the
API, which names the request's field as it refuses one), so it is not compared again.
`TransactionContract` adds the forms of a store that also writes in its caller's transaction
(PostgreSQL's ``tx=`` and ``*_sync`` forms), checked the same way.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Generic, TypeVar

from tickwheel.errors import LeaseLost
from tickwheel.model import State, Timer
from tickwheel.schedule import Schedule, ScheduleState, Step, plan_create, plan_update
from tickwheel.stores import checks
from tickwheel.stores.attempt_record import Attempt
from tickwheel.stores.base import (
    Deferral,
    DueQueues,
    Lease,
    Limit,
    LimitPage,
    Page,
    QueueInfo,
    QueueSettings,
    SchedulePage,
    StoreSettings,
)
from tickwheel.stores.limit import Grants
from tickwheel.stores.queue_defaults import QueueDefaults
from tickwheel.stores.queue_pages import QueuePage

Tx = TypeVar("Tx")
SyncTx = TypeVar("SyncTx")


def check_timers(timers: Sequence[Timer], now_ms: int, settings: StoreSettings) -> None:
    """Refuse timers due past the store's horizon from `now_ms`.

    A `Timer` checked its due time's type and range when it was built; only the horizon, which
    is the store's, is left. One loop, no call per timer.
    """
    latest = now_ms + settings.max_horizon_ms
    for timer in timers:
        if timer.due_ms > latest:
            raise checks.beyond_horizon(settings)


def create_step(schedule: Schedule, now_ms: int, settings: StoreSettings) -> Step:
    """`plan_create`, refused when its first occurrence falls past the store's horizon."""
    return _within_horizon(plan_create(schedule, now_ms), now_ms, settings, "the first occurrence")


def update_step(
    state: ScheduleState,
    schedule: Schedule,
    now_ms: int,
    pending: Timer | None,
    settings: StoreSettings,
) -> Step:
    """`plan_update`, refused when the occurrence it creates falls past the store's horizon."""
    return _within_horizon(plan_update(state, schedule, now_ms, pending), now_ms, settings)


def _within_horizon(
    step: Step, now_ms: int, settings: StoreSettings, subject: str | None = None
) -> Step:
    """Refuse `step` if the occurrence it creates is past the horizon, naming ``start`` as a
    schedule's own checks name its fields (the API's names): its series is placed by it."""
    if step.add is not None and step.add.due_ms > now_ms + settings.max_horizon_ms:
        raise checks.beyond_horizon(settings, "start", subject)
    return step


EXTENDS_AT_ONCE = 64
"""Extends in flight at once in `extend_many` of a store that extends one lease at a time."""


class StoreContract(ABC):
    """The checks and shared work of the `Store` calls that take arguments to check."""

    settings: StoreSettings

    @abstractmethod
    def now_ms(self) -> int:
        """Return the store's clock in epoch ms."""

    def limit_grants(self) -> Grants | None:
        """No grants kept in the store: each worker keeps its own (a store sharing them says
        so by overriding this)."""
        return None

    async def sync_clock(self) -> None:
        """Nothing to measure: the store keeps this host's clock (a store following a server's
        clock says so by overriding this)."""
        return None

    async def add(self, timer: Timer, *, replace: bool = False, due_checked: bool = False) -> Timer:
        if not due_checked:
            check_timers((timer,), self.now_ms(), self.settings)
        return await self._add_one(timer, replace)

    async def add_many(
        self, timers: Sequence[Timer], *, replace: bool = False, due_checked: bool = False
    ) -> list[Timer]:
        if not due_checked:
            check_timers(timers, self.now_ms(), self.settings)
        return await self._add_many(timers, replace)

    async def reschedule(self, timer_id: str, due_ms: int, *, due_checked: bool = False) -> bool:
        if not due_checked:
            checks.check_due(due_ms, self.now_ms(), self.settings)
        return await self._reschedule(timer_id, due_ms)

    async def claim(self, queue: str, horizon_ms: int, limit: int, lease_ms: int) -> list[Lease]:
        checks.check_claim(limit, lease_ms, self.settings)
        return await self._claim(queue, horizon_ms, limit, lease_ms)

    async def extend(self, lease: Lease, lease_ms: int) -> Lease:
        checks.check_lease(lease_ms)
        return await self._extend(lease, lease_ms)

    async def extend_many(self, leases: Sequence[Lease], lease_ms: int) -> list[Lease | None]:
        checks.check_lease(lease_ms)
        return await self._extend_many(leases, lease_ms)

    async def _extend_many(self, leases: Sequence[Lease], lease_ms: int) -> list[Lease | None]:
        """`extend` each, `EXTENDS_AT_ONCE` in flight (a pooled store overlaps their round
        trips); once all are done, the first failure other than a lost lease is raised. A
        store that can batch them overrides this."""
        limit = asyncio.Semaphore(EXTENDS_AT_ONCE)

        async def extend(lease: Lease) -> Lease | None:
            async with limit:
                try:
                    return await self.extend(lease, lease_ms)
                except LeaseLost:
                    return None

        renewed = await asyncio.gather(*(extend(lease) for lease in leases), return_exceptions=True)
        for outcome in renewed:
            if isinstance(outcome, BaseException):
                raise outcome
        return [outcome for outcome in renewed if not isinstance(outcome, BaseException)]

    async def due_queues(
        self, horizon_ms: int, limit: int, *, since_ms: int | None = None
    ) -> DueQueues:
        checks.check_due_queues(horizon_ms, limit, since_ms)
        return await self._due_queues(horizon_ms, limit, since_ms)

    async def wait(self, queue: str, timeout_s: float) -> bool:
        checks.check_timeout(timeout_s)
        return await self._wait(queue, timeout_s)

    async def retry(
        self, lease: Lease, due_ms: int, error: str, attempt: Attempt | None = None
    ) -> None:
        checks.check_due(due_ms, self.now_ms(), self.settings)
        await self._retry(lease, due_ms, error, attempt)

    async def defer(self, lease: Lease, due_ms: int, reason: str) -> None:
        checks.check_due(due_ms, self.now_ms(), self.settings)
        await self._defer(lease, due_ms, reason)

    async def defer_many(self, deferrals: Sequence[Deferral]) -> list[bool]:
        now = self.now_ms()
        for _, due_ms, _ in deferrals:
            checks.check_due(due_ms, now, self.settings)
        return await self._defer_many(deferrals)

    async def list_schedules(self, limit: int = 100, cursor: str | None = None) -> SchedulePage:
        checks.check_list(limit)
        return await self._list_schedules(limit, cursor)

    async def list_limits(self, limit: int = 100, cursor: str | None = None) -> LimitPage:
        checks.check_list(limit)
        return await self._list_limits(limit, cursor)

    async def set_limit(self, host: str, limit: Limit) -> None:
        checks.check_host(host)
        await self._set_limit(host, limit)

    async def list_queues(self, limit: int = 100, cursor: str | None = None) -> QueuePage:
        checks.check_list(limit)
        return await self._list_queues(limit, cursor)

    async def queue_info(self, queue: str) -> QueueInfo:
        checks.check_queue(queue)
        return await self._queue_info(queue)

    async def set_queue(self, queue: str, settings: QueueSettings) -> None:
        checks.check_queue_settings(queue, settings)
        await self._set_queue(queue, settings)

    async def pause_queue(self, queue: str, paused: bool) -> bool:
        checks.check_queue_pause(queue, paused)
        return await self._pause_queue(queue, paused)

    async def set_queue_limit(self, queue: str, limit: Limit | None) -> bool:
        checks.check_queue_limit(queue, limit)
        return await self._set_queue_limit(queue, limit)

    async def set_queue_defaults(self, queue: str, defaults: QueueDefaults | None) -> bool:
        """Set `queue`'s defaults; empty defaults are none."""
        kept = checks.check_queue_defaults(queue, defaults)
        return await self._set_queue_defaults(queue, kept)

    async def purge(self, queue: str, state: State) -> int:
        checks.check_purge(queue, state)
        return await self._purge(queue, state)

    # each backend's steps: called with arguments already checked

    @abstractmethod
    async def _add_one(self, timer: Timer, replace: bool) -> Timer: ...

    @abstractmethod
    async def _add_many(self, timers: Sequence[Timer], replace: bool) -> list[Timer]: ...

    @abstractmethod
    async def _reschedule(self, timer_id: str, due_ms: int) -> bool: ...

    @abstractmethod
    async def _claim(
        self, queue: str, horizon_ms: int, limit: int, lease_ms: int
    ) -> list[Lease]: ...

    @abstractmethod
    async def _extend(self, lease: Lease, lease_ms: int) -> Lease: ...

    @abstractmethod
    async def _due_queues(self, horizon_ms: int, limit: int, since_ms: int | None) -> DueQueues: ...

    @abstractmethod
    async def _wait(self, queue: str, timeout_s: float) -> bool: ...

    @abstractmethod
    async def _retry(
        self, lease: Lease, due_ms: int, error: str, attempt: Attempt | None
    ) -> None: ...

    @abstractmethod
    async def _defer(self, lease: Lease, due_ms: int, reason: str) -> None: ...

    @abstractmethod
    async def _defer_many(self, deferrals: Sequence[Deferral]) -> list[bool]: ...

    @abstractmethod
    async def _list(
        self,
        state: State | None,
        limit: int,
        cursor: str | None,
        queue: str | None,
        due_from_ms: int | None,
        due_to_ms: int | None,
    ) -> Page: ...

    @abstractmethod
    async def _list_schedules(self, limit: int, cursor: str | None) -> SchedulePage: ...

    @abstractmethod
    async def _list_limits(self, limit: int, cursor: str | None) -> LimitPage: ...

    @abstractmethod
    async def _set_limit(self, host: str, limit: Limit) -> None: ...

    @abstractmethod
    async def _list_queues(self, limit: int, cursor: str | None) -> QueuePage: ...

    @abstractmethod
    async def _queue_info(self, queue: str) -> QueueInfo: ...

    @abstractmethod
    async def _set_queue(self, queue: str, settings: QueueSettings) -> None: ...

    @abstractmethod
    async def _pause_queue(self, queue: str, paused: bool) -> bool: ...

    @abstractmethod
    async def _set_queue_limit(self, queue: str, limit: Limit | None) -> bool: ...

    @abstractmethod
    async def _set_queue_defaults(self, queue: str, defaults: QueueDefaults | None) -> bool: ...

    @abstractmethod
    async def _purge(self, queue: str, state: State) -> int: ...

    # last: below this name, `list` in an annotation would be this method
    async def list(
        self,
        state: State | None = None,
        limit: int = 100,
        cursor: str | None = None,
        *,
        queue: str | None = None,
        due_from_ms: int | None = None,
        due_to_ms: int | None = None,
    ) -> Page:
        checks.check_list(limit)
        checks.check_list_filters(queue, due_from_ms, due_to_ms)
        return await self._list(state, limit, cursor, queue, due_from_ms, due_to_ms)


class TransactionContract(StoreContract, Generic[Tx, SyncTx]):
    """`StoreContract` for a store that also writes in a transaction its caller holds open.

    `add`, `add_many` and `reschedule` take ``tx=``, the caller's open connection: the change
    commits or rolls back with the caller's own writes. Their ``*_sync`` forms do the same on
    a sync connection. Each form checks as the call without ``tx`` does, then calls the
    backend's step for it (`_add_in`, `_add_sync`, ...).
    """

    async def add(
        self,
        timer: Timer,
        *,
        replace: bool = False,
        due_checked: bool = False,
        tx: Tx | None = None,
    ) -> Timer:
        """Add one timer; with `tx`, inside the caller's transaction on that connection."""
        if tx is None:
            return await super().add(timer, replace=replace, due_checked=due_checked)
        if not due_checked:
            check_timers((timer,), self.now_ms(), self.settings)
        return await self._add_in(tx, timer, replace)

    def add_sync(self, timer: Timer, *, tx: SyncTx, replace: bool = False) -> Timer:
        """`add` inside the transaction of the sync connection `tx`."""
        check_timers((timer,), self.now_ms(), self.settings)
        return self._add_sync(tx, timer, replace)

    async def add_many(
        self,
        timers: Sequence[Timer],
        *,
        replace: bool = False,
        due_checked: bool = False,
        tx: Tx | None = None,
    ) -> list[Timer]:
        """Add many timers (all in `tx`'s transaction when given); return them as stored, in
        order. An id held by a timer with another spec raises `TimerExists` once the rest are
        stored."""
        if tx is None:
            return await super().add_many(timers, replace=replace, due_checked=due_checked)
        if not due_checked:
            check_timers(timers, self.now_ms(), self.settings)
        return await self._add_many_in(tx, timers, replace)

    def add_many_sync(
        self, timers: Sequence[Timer], *, tx: SyncTx, replace: bool = False
    ) -> list[Timer]:
        """`add_many` inside the transaction of the sync connection `tx`."""
        check_timers(timers, self.now_ms(), self.settings)
        return self._add_many_sync(tx, timers, replace)

    async def reschedule(
        self, timer_id: str, due_ms: int, *, due_checked: bool = False, tx: Tx | None = None
    ) -> bool:
        """Move a scheduled or paused timer (in `tx`'s transaction when given)."""
        if tx is None:
            return await super().reschedule(timer_id, due_ms, due_checked=due_checked)
        if not due_checked:
            checks.check_due(due_ms, self.now_ms(), self.settings)
        return await self._reschedule_in(tx, timer_id, due_ms)

    def reschedule_sync(self, timer_id: str, due_ms: int, *, tx: SyncTx) -> bool:
        """`reschedule` inside the transaction of the sync connection `tx`."""
        checks.check_due(due_ms, self.now_ms(), self.settings)
        return self._reschedule_sync(tx, timer_id, due_ms)

    # the backend's steps in the caller's transaction: called with arguments already checked

    @abstractmethod
    async def _add_in(self, tx: Tx, timer: Timer, replace: bool) -> Timer: ...

    @abstractmethod
    def _add_sync(self, tx: SyncTx, timer: Timer, replace: bool) -> Timer: ...

    @abstractmethod
    async def _add_many_in(self, tx: Tx, timers: Sequence[Timer], replace: bool) -> list[Timer]: ...

    @abstractmethod
    def _add_many_sync(self, tx: SyncTx, timers: Sequence[Timer], replace: bool) -> list[Timer]: ...

    @abstractmethod
    async def _reschedule_in(self, tx: Tx, timer_id: str, due_ms: int) -> bool: ...

    @abstractmethod
    def _reschedule_sync(self, tx: SyncTx, timer_id: str, due_ms: int) -> bool: ...
