"""Per-queue gauges on ``/metrics``: timers per state, paused or not, the oldest overdue age.

Only the first `MAX_QUEUES` queues by name get gauges, read as one page of the queue table
(`Store.list_queues`), whatever the number of queues. The counts are read by a task of the
process, not on each scrape: every `EVERY_S`, or less often when a read is dear, so that
reading takes at most `READ_SHARE` of the time, and at least every `MAX_EVERY_S`. A scrape
shows the last reading, the overdue age as it was then (so an age never counts time after its
timer fired).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from tickwheel.errors import StoreUnavailable
from tickwheel.model import State
from tickwheel.stores import Store
from tickwheel.stores.base import QueueInfo

if TYPE_CHECKING:
    from prometheus_client.core import Metric

logger = logging.getLogger("tickwheel.service")

EVERY_S = 5.0
READ_SHARE = 0.0005
"""Most of a core the gauges' reads may take: an idle service stays idle with many queues."""
MAX_EVERY_S = 120.0
"""Longest between two reads, however dear."""
MAX_QUEUES = 256
"""Queues with gauges of their own at most (in name order): labels stay bounded."""
STATES = (State.SCHEDULED, State.LEASED, State.PAUSED, State.DEAD)


class QueueGauges:
    """A registry collector for the store's queues, as `refresh` last read them."""

    def __init__(
        self, store: Store, every_s: float = EVERY_S, read_share: float = READ_SHARE
    ) -> None:
        self._store = store
        self.every_s = every_s
        self.read_share = read_share
        self.next_in_s = every_s
        self.infos: list[QueueInfo] = []
        self.read_at_ms = 0
        self.failures = 0

    async def refresh(self) -> None:
        """Read the queues once; the next read waits for `every_s` or what keeps reads under
        `read_share` of a core, whichever is longer.

        Raises:
            StoreUnavailable: the store did not answer; the last counts stay.
        """
        started_s = time.perf_counter()
        self.infos = (await self._store.list_queues(MAX_QUEUES)).queues
        self.read_at_ms = self._store.now_ms()
        took_s = time.perf_counter() - started_s
        self.next_in_s = min(MAX_EVERY_S, max(self.every_s, took_s / self.read_share))

    async def run(self) -> None:
        """Refresh every `every_s` until cancelled; a failed read keeps the last counts."""
        while True:
            try:
                await self.refresh()
            except StoreUnavailable as error:
                self.failures += 1
                logger.warning("store unavailable, queue gauges not refreshed: %s", error)
            except Exception:
                # policy: the gauges are worth less than the process they would take down
                self.failures += 1
                logger.exception("reading the queues for their gauges failed")
            await asyncio.sleep(self.next_in_s)

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily

        infos, read_at_ms = self.infos, self.read_at_ms
        timers = GaugeMetricFamily(
            "tickwheel_queue_timers",
            f"Timers per queue and state, read every {self.every_s:g} s or less often when a "
            "read is dear",
            labels=["queue", "state"],
        )
        paused = GaugeMetricFamily(
            "tickwheel_queue_paused", "1 while the queue is paused, else 0", labels=["queue"]
        )
        overdue = GaugeMetricFamily(
            "tickwheel_queue_oldest_overdue_seconds",
            "Age of the queue's earliest scheduled timer already due (0 when none is)",
            labels=["queue"],
        )
        for info in infos:
            for state in STATES:
                timers.add_metric([info.name, state.value], info.counts.get(state, 0))
            paused.add_metric([info.name], 1.0 if info.settings.paused else 0.0)
            earliest = info.earliest_due_ms
            age_s = 0.0 if earliest is None else max(0.0, (read_at_ms - earliest) / 1000)
            overdue.add_metric([info.name], age_s)
        yield timers
        yield paused
        yield overdue
