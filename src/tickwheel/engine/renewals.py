"""`Renewals`: the leases a dispatcher holds, renewed while their timers wait or run."""

from __future__ import annotations

import asyncio
import logging

from tickwheel.engine.held import Held, Holding
from tickwheel.engine.metrics import Metrics
from tickwheel.engine.settle import Throttled
from tickwheel.errors import LeaseLost, StoreUnavailable

logger = logging.getLogger("tickwheel.engine")

RENEW_CONCURRENCY = 64  # one-by-one renewals in flight, after a batch failed
RENEW_BATCH = 2000  # leases per extend_many call


class Renewals:
    """Renews the leases `holding` holds by its `lease_ms` each time; releases a timer whose
    lease passed on to another claim."""

    def __init__(
        self, holding: Holding, lease_ms: int, *, metrics: Metrics, throttled: Throttled
    ) -> None:
        self._holding = holding
        self._lease_ms = lease_ms
        self._metrics = metrics
        self._throttled = throttled

    async def run(self, stopping: asyncio.Event) -> None:
        """Renew leases that run short, waiting or running, until `stopping` is set.

        A lease is checked every quarter `lease_ms` and renewed once under half is left, so
        it holds for as long as its callback runs and this process lives, and lapses within
        one `lease_ms` of a crash, however long the callback's timeout.
        """
        lease_ms = self._lease_ms
        holding = self._holding
        while not stopping.is_set():
            try:
                async with asyncio.timeout(lease_ms / 4000):
                    await stopping.wait()
                return
            except TimeoutError:
                pass
            now = holding.now_ms()
            short = [
                held
                for held in holding.held.values()
                if held.lease.deadline_ms - now < lease_ms // 2
            ]
            for start in range(0, len(short), RENEW_BATCH):
                await self._renew_batch(short[start : start + RENEW_BATCH])

    async def _renew_batch(self, batch: list[Held]) -> None:
        """Renew the leases of `batch` in one `extend_many`, or one by one if it fails, so that
        one lease's failure touches no other."""
        batch = [held for held in batch if held.active]  # not settled meanwhile
        if not batch:
            return
        leases = [held.lease for held in batch]
        try:
            renewed = await self._holding.renew_many(batch)
        except Exception:
            # policy: what failed the batch (a Cluster node down, a surprise) fails only the
            # leases it touches: they are renewed one by one, each failure counted and logged
            limit = asyncio.Semaphore(RENEW_CONCURRENCY)
            await asyncio.gather(*(self._renew_one(held, limit) for held in batch))
            return
        for held, lease, new in zip(batch, leases, renewed, strict=True):
            if new is None and held.active and held.lease is lease:
                self._metrics.leases_lost += 1
                held.release()  # not fired if it still waits, not sent if it waits to be

    async def _renew_one(self, held: Held, limit: asyncio.Semaphore) -> None:
        """Renew one lease; a failure is logged and touches no other lease."""
        lease = held.lease
        try:
            async with limit:
                if held.active and held.lease is lease:  # not settled or renewed meanwhile
                    await held.renew()
        except LeaseLost:
            self._metrics.leases_lost += 1
            if held.lease is lease:
                held.release()  # not fired if it still waits, not sent if it waits to be
        except StoreUnavailable as error:
            self._metrics.store_errors["extend"] += 1
            self._throttled.warning("extend", "store unavailable, lease not renewed: %s", error)
        except Exception:
            # policy: a surprise from the store must not end the renewing of other leases
            self._metrics.store_errors["extend"] += 1
            timer_id = lease.timer.id
            logger.exception(
                "renewing the lease on timer=%s failed", timer_id, extra={"timer_id": timer_id}
            )
