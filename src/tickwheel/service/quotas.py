"""`Quotas`: each tenant's ``max_pending``, ``max_queues``, ``max_schedules`` and
``creates_per_second``, checked before anything is written.

Counting a tenant's pending timers exactly would cost a store scan per create. Instead the counts
of every queue (`Store.queue_infos`) are read at most once per `REFRESH_MS` (less often when a
read is slow: see `READ_SHARE`), by the create that finds them stale, and each create admitted
by this process is added to them until the next read. So a quota holds exactly for the creates
of one process, and to within a refresh's worth of other processes' creates (or of timers that
fired meanwhile) across several: approximate, never unbounded. Schedules are counted at each
creation of one, which is rare.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from tickwheel.model import State
from tickwheel.service.api_errors import ApiError
from tickwheel.service.tenants import Tenant, Tenants
from tickwheel.stores.base import QueueInfo, Store
from tickwheel.stores.checks import MAX_LIST

REFRESH_MS = 1000
"""How old the counts behind ``max_pending`` and ``max_queues`` may grow before a create
reads them again, at least."""
READ_SHARE = 20
"""A read of the counts waits at least this many times as long as the last one took, so that
counting costs at most 1/20 of the time however large the store (about 20 ms per 100,000
timers on SQLite)."""
PENDING = (State.SCHEDULED, State.LEASED, State.PAUSED)


class QuotaExceeded(ApiError):
    """429: a tenant's quota would be exceeded; nothing was written. Only the rate says when to
    try again (``Retry-After``): pending timers and queues go away when the tenant's do."""

    def __init__(
        self, tenant: Tenant, quota: str, message: str, retry_after_s: int | None = None
    ) -> None:
        super().__init__(
            429,
            f"token {tenant.name!r} is over its quota {quota}: {message}",
            code="quota_exceeded",
            field=quota,
            retry_after_s=retry_after_s,
        )


@dataclass(slots=True)
class _Bucket:
    """A token bucket of `rate` a second holding at most one second's worth."""

    rate: float
    clock: Callable[[], float]
    tokens: float = 0.0
    at_s: float = field(default=-math.inf)

    def take(self, tenant: Tenant, n: int) -> None:
        now_s = self.clock()
        capacity = max(self.rate, 1.0)
        self.tokens = min(capacity, self.tokens + (now_s - self.at_s) * self.rate)
        self.at_s = now_s
        if n > capacity:
            raise QuotaExceeded(
                tenant,
                "creates_per_second",
                f"{n} creates at once is more than a second's worth ({self.rate:g})",
                retry_after_s=math.ceil(n / self.rate),
            )
        if self.tokens < n:
            wait_s = math.ceil((n - self.tokens) / self.rate)
            raise QuotaExceeded(
                tenant, "creates_per_second", f"{self.rate:g} creates a second", wait_s
            )
        self.tokens -= n


@dataclass(slots=True)
class _Usage:
    pending: int = 0
    queues: set[str] = field(default_factory=set)


class Quotas:
    """The quotas of one app's tenants, with the counts and buckets they are checked against."""

    def __init__(self, tenants: Tenants, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._counted = [tenant for tenant in tenants if tenant.counted]
        self._buckets = {
            tenant.name: _Bucket(tenant.creates_per_second, clock)
            for tenant in tenants
            if tenant.creates_per_second is not None
        }
        self._usage: dict[str, _Usage] | None = None
        self._read_at_s = -math.inf
        self._every_s = REFRESH_MS / 1000
        self._reading: asyncio.Future[None] | None = None
        # creates admitted while a read is under way, which it may not have counted yet
        self._during: dict[str, int] = {}

    async def admit(self, store: Store, tenant: Tenant, queues: Iterable[str], n: int) -> None:
        """Count `n` creates of timers into `queues` against the tenant's quotas, or refuse all.

        Raises:
            QuotaExceeded: over ``max_pending``, ``max_queues`` or ``creates_per_second``.
        """
        if n < 1:
            return
        usage = await self._of(store, tenant) if tenant.counted else None
        new_queues: set[str] = set()
        if usage is not None:
            new_queues = set(queues) - usage.queues
            self._check(tenant, usage, n, new_queues)
        bucket = self._buckets.get(tenant.name)
        if bucket is not None:
            bucket.take(tenant, n)
        if usage is not None:  # no await since the check: nothing else was admitted meanwhile
            usage.pending += n
            usage.queues |= new_queues
            if self._reading is not None:
                self._during[tenant.name] = self._during.get(tenant.name, 0) + n

    async def admit_queue(self, store: Store, tenant: Tenant, queue: str) -> None:
        """Refuse settings for a queue the tenant does not have yet once it has `max_queues`.

        Raises:
            QuotaExceeded: over ``max_queues``.
        """
        if tenant.max_queues is None:
            return
        usage = await self._of(store, tenant)
        if queue not in usage.queues:
            self._check(tenant, usage, 0, {queue})
            usage.queues.add(queue)

    async def admit_schedule(self, store: Store, tenant: Tenant, queue: str) -> None:
        """Refuse a new schedule over ``max_schedules`` (counted now) or ``max_queues``.

        Raises:
            QuotaExceeded: over either quota.
        """
        await self.admit_queue(store, tenant, queue)
        if tenant.max_schedules is None:
            return
        count, cursor = 0, None
        while True:
            page = await store.list_schedules(MAX_LIST, cursor)
            count += sum(tenant.sees(state.schedule.queue) for state in page.schedules)
            cursor = page.cursor
            if cursor is None:
                break
        if count >= tenant.max_schedules:
            raise QuotaExceeded(
                tenant, "max_schedules", f"it has {count} of {tenant.max_schedules} schedules"
            )

    def _check(self, tenant: Tenant, usage: _Usage, n: int, new_queues: set[str]) -> None:
        limit = tenant.max_queues
        if new_queues and limit is not None and len(usage.queues) + len(new_queues) > limit:
            raise QuotaExceeded(
                tenant,
                "max_queues",
                f"it has {len(usage.queues)} of {limit} queues; "
                f"{len(new_queues)} more would be over",
            )
        limit = tenant.max_pending
        if limit is not None and usage.pending + n > limit:
            raise QuotaExceeded(
                tenant,
                "max_pending",
                f"it has about {usage.pending} of {limit} pending timers; {n} more would be over",
            )

    async def _of(self, store: Store, tenant: Tenant) -> _Usage:
        """The tenant's counts, read again when older than `REFRESH_MS` by one request at a
        time; the others meanwhile go on with the counts they have, or wait for the first."""
        started_s = self._clock()
        if started_s - self._read_at_s >= self._every_s and self._reading is None:
            self._reading = asyncio.get_running_loop().create_future()
            self._during = {}
            try:
                self._read(await store.queue_infos())
                read_s = self._clock() - started_s
                self._every_s = max(REFRESH_MS / 1000, READ_SHARE * read_s)
            finally:
                self._reading.set_result(None)
                self._reading = None
        elif self._usage is None and self._reading is not None:
            await asyncio.shield(self._reading)
        if self._usage is None:  # the first read failed: it raised in the request that made it
            return await self._of(store, tenant)
        return self._usage.setdefault(tenant.name, _Usage())

    def _read(self, infos: list[QueueInfo]) -> None:
        usage = {tenant.name: _Usage() for tenant in self._counted}
        for info in infos:
            pending = sum(info.counts.get(state, 0) for state in PENDING)
            for tenant in self._counted:
                if tenant.sees(info.name):
                    counts = usage[tenant.name]
                    counts.pending += pending
                    counts.queues.add(info.name)
        for name, n in self._during.items():
            usage[name].pending += n
        self._usage = usage
        self._read_at_s = self._clock()
