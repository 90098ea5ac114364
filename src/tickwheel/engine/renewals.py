"""`Renewals`: the leases a dispatcher holds, renewed while their timers wait or run."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from tickwheel.engine.metrics import Metrics
from tickwheel.engine.settle import Throttled
from tickwheel.errors import LeaseLost, StoreUnavailable
from tickwheel.stores import Lease, Store

logger = logging.getLogger("tickwheel.engine")

RENEW_CONCURRENCY = 64


class Renewals:
    """Renews the leases in `held` (timer id to its newest lease) by `lease_ms` each time;
    calls `lost(timer_id)` for one that passed on to another claim."""

    def __init__(
        self,
        store: Store,
        lease_ms: int,
        held: dict[str, Lease],
        lost: Callable[[str], None],
        *,
        metrics: Metrics,
        throttled: Throttled,
    ) -> None:
        self._store = store
        self._lease_ms = lease_ms
        self._held = held
        self._lost = lost
        self._metrics = metrics
        self._throttled = throttled

    async def renew(self, lease: Lease) -> Lease:
        """Push a held lease's deadline `lease_ms` from now and hold the renewed lease.

        Raises:
            LeaseLost: the lease lapsed and the timer went to another claim.
            StoreUnavailable: the store did not answer; the lease stands as it was.
        """
        renewed = await self._store.extend(lease, self._lease_ms)
        if self._held.get(lease.timer.id) is lease:
            self._held[lease.timer.id] = renewed
        return renewed

    async def run(self, stopping: asyncio.Event) -> None:
        """Renew leases that run short, waiting or running, until `stopping` is set.

        A lease is checked every quarter `lease_ms` and renewed once under half is left, so
        it holds for as long as its callback runs and this process lives, and lapses within
        one `lease_ms` of a crash, however long the callback's timeout.
        """
        lease_ms = self._lease_ms
        while not stopping.is_set():
            try:
                async with asyncio.timeout(lease_ms / 4000):
                    await stopping.wait()
                return
            except TimeoutError:
                pass
            now = self._store.now_ms()
            short = [
                lease for lease in self._held.values() if lease.deadline_ms - now < lease_ms // 2
            ]
            if short:
                limit = asyncio.Semaphore(RENEW_CONCURRENCY)
                await asyncio.gather(*(self._renew_one(lease, limit) for lease in short))

    async def _renew_one(self, lease: Lease, limit: asyncio.Semaphore) -> None:
        """Renew one lease; a failure is logged and touches no other lease."""
        timer_id = lease.timer.id
        try:
            async with limit:
                if self._held.get(timer_id) is lease:  # not settled or renewed meanwhile
                    await self.renew(lease)
        except LeaseLost:
            self._metrics.leases_lost += 1
            if self._held.get(timer_id) is lease:
                self._lost(timer_id)
        except StoreUnavailable as error:
            self._metrics.store_errors["extend"] += 1
            self._throttled.warning("extend", "store unavailable, lease not renewed: %s", error)
        except Exception:
            # policy: a surprise from the store must not end the renewing of other leases
            self._metrics.store_errors["extend"] += 1
            logger.exception(
                "renewing the lease on timer=%s failed", timer_id, extra={"timer_id": timer_id}
            )
