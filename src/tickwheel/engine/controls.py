"""The store's queue settings and host limits as a worker last read them.

Each second a worker asks the store for the versions of its two settings tables, one cheap
call, and reads a table again only when its version moved: 20,000 host limits cost an idle
worker nothing until one of them changes. A pause still reaches every worker within about
`REFRESH_S`. Every `FULL_READ_S` both tables are read whatever the versions say, so a write no
version counted (a tickwheel from before versions, writing the same store during an upgrade)
is seen all the same.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Coroutine
from typing import Any

from tickwheel.engine.metrics import Metrics
from tickwheel.errors import StoreUnavailable
from tickwheel.stores import Store
from tickwheel.stores.base import Lease, Limit, QueueSettings, new_lease

logger = logging.getLogger("tickwheel.engine")

REFRESH_S = 1.0
"""Longest a worker goes on with settings it read from the store: a pause's delay."""
FULL_READ_S = 60.0
"""Longest a worker goes without reading both tables whole, whatever their versions say."""
CLAIM_S = 1.0
"""A claim from a rate-limited queue takes its burst and this long of its rate at most."""


class Controls:
    """The store's queue settings and host limits as last read, looked at every `refresh_s`.

    Until the first read lands, `ready` is unset and nothing should be claimed: a queue paused
    before this worker started must stay so. A failed read keeps the settings last read.
    """

    def __init__(
        self,
        store: Store,
        metrics: Metrics,
        refresh_s: float = REFRESH_S,
        full_read_s: float = FULL_READ_S,
    ) -> None:
        self._store = store
        self._metrics = metrics
        self.refresh_s = refresh_s
        self.full_read_s = full_read_s
        self.queues: dict[str, QueueSettings] = {}
        self.hosts: dict[str, Limit] = {}
        self.reads = 0
        """Tables read whole so far (a test and a benchmark see the versions spare them)."""
        self.ready = asyncio.Event()
        self._changed = asyncio.Event()
        self._versions: tuple[int, int] | None = None
        self._full_at = -math.inf

    def paused(self, queue: str) -> bool:
        settings = self.queues.get(queue)
        return settings is not None and settings.paused

    def queue_limit(self, queue: str) -> Limit | None:
        settings = self.queues.get(queue)
        return None if settings is None else settings.limit

    def queue_rate(self, queue: str) -> float | None:
        """The rate limit of `queue`, if it has one."""
        limit = self.queue_limit(queue)
        return None if limit is None else limit.rate

    def with_defaults(self, queue: str, leases: list[Lease]) -> list[Lease]:
        """`leases` of `queue` as they fire: each timer with its queue's defaults applied
        (`QueueDefaults.apply`), so its callback, timeout, backoff and attempts follow them."""
        settings = self.queues.get(queue)
        defaults = None if settings is None else settings.defaults
        if defaults is None:
            return leases
        fired = []
        for lease in leases:
            timer = defaults.apply(lease.timer)
            fired.append(
                lease if timer is lease.timer else new_lease(timer, lease.token, lease.deadline_ms)
            )
        return fired

    def claim_bound(self, queue: str) -> int:
        """Most timers of a rate-limited `queue` worth one claim: its burst and `CLAIM_S` of
        its rate (more would wait in the worker holding their leases)."""
        limit = self.queue_limit(queue)
        if limit is None or limit.rate is None:
            raise ValueError(f"queue {queue!r} has no rate limit")
        return max(1, limit.bucket + math.ceil(limit.rate * CLAIM_S))

    def changed(self) -> Coroutine[Any, Any, bool]:
        """Wait until a refresh reads settings other than those read so far (from this call)."""
        return self._changed.wait()

    async def refresh(self) -> None:
        """Read the versions, then each table whose version moved (both, when due).

        The versions are read first: a write landing between them and a table's read is in
        what was read, and moves the version again, so at worst it is read twice.

        Raises:
            StoreUnavailable: the store did not answer; the settings stay as they were.
        """
        store = self._store
        versions = await store.settings_versions()
        now = asyncio.get_running_loop().time()
        full = now - self._full_at >= self.full_read_s
        last = self._versions
        read_queues = full or last is None or versions[0] != last[0]
        read_hosts = full or last is None or versions[1] != last[1]
        queues, hosts = self.queues, self.hosts
        if read_queues and read_hosts:
            queues, hosts = await asyncio.gather(store.queue_settings(), store.limits())
        elif read_queues:
            queues = await store.queue_settings()
        elif read_hosts:
            hosts = await store.limits()
        self.reads += read_queues + read_hosts
        if full:
            self._full_at = now
        self._versions = versions
        # compared only when read: comparing 20,000 limits with themselves costs 0.5 ms
        if (read_queues and queues != self.queues) or (read_hosts and hosts != self.hosts):
            self.queues, self.hosts = queues, hosts
            self._changed.set()
            self._changed = asyncio.Event()
        self.ready.set()

    async def run(self, stopping: asyncio.Event) -> None:
        """Refresh until `stopping` is set; a failure is counted and tried at the next turn."""
        while not stopping.is_set():
            try:
                await self.refresh()
            except StoreUnavailable as error:
                self._metrics.store_errors["settings"] += 1
                logger.warning("store unavailable, reading queue settings again soon: %s", error)
            except Exception:
                # policy: a surprise must not freeze the settings (or keep `ready` unset) for good
                self._metrics.store_errors["settings"] += 1
                logger.exception("reading queue settings failed; trying again")
            stop = asyncio.ensure_future(stopping.wait())
            try:
                await asyncio.wait({stop}, timeout=self.refresh_s)
            finally:
                stop.cancel()
