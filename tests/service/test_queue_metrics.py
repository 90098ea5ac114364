"""Per-queue gauges: read from the store every few seconds by a task, never by a scrape."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry, generate_latest

from tickwheel.model import Timer
from tickwheel.service.queue_metrics import MAX_EVERY_S, MAX_QUEUES, QueueGauges
from tickwheel.stores import MemoryStore
from tickwheel.stores.base import QueueSettings
from tickwheel.stores.queue_pages import QueuePage


class CountingStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    async def list_queues(self, limit: int = 100, cursor: str | None = None) -> QueuePage:
        self.reads += 1
        return await super().list_queues(limit, cursor)


async def test_gauges_show_counts_pauses_and_overdue_age_as_last_read() -> None:
    store = CountingStore()
    now = store.now_ms()
    await store.add_many([Timer(due_ms=now - 3000, queue="mail") for _ in range(2)])
    await store.add(Timer(due_ms=now + 60_000, queue="later"))
    await store.set_queue("mail", QueueSettings(paused=True))
    gauges = QueueGauges(store)
    registry = CollectorRegistry()
    registry.register(gauges)
    await gauges.refresh()
    for _ in range(5):
        generate_latest(registry)
    assert store.reads == 1  # scrapes read what the last refresh read
    sample = registry.get_sample_value
    assert sample("tickwheel_queue_timers", {"queue": "mail", "state": "scheduled"}) == 2
    assert sample("tickwheel_queue_timers", {"queue": "mail", "state": "dead"}) == 0
    assert sample("tickwheel_queue_paused", {"queue": "mail"}) == 1
    assert sample("tickwheel_queue_paused", {"queue": "later"}) == 0
    age = sample("tickwheel_queue_oldest_overdue_seconds", {"queue": "mail"})
    assert age is not None
    assert 2.9 <= age <= 4
    assert sample("tickwheel_queue_oldest_overdue_seconds", {"queue": "later"}) == 0


async def test_the_refresh_task_reads_every_few_seconds_and_survives_failures() -> None:
    store = CountingStore()
    gauges = QueueGauges(store, every_s=0.05, read_share=1.0)  # a read is never dear here
    task = asyncio.create_task(gauges.run())
    await asyncio.sleep(0.22)
    await store.close()  # every read fails from now on
    await asyncio.sleep(0.12)
    assert not task.done()
    task.cancel()
    assert 4 <= store.reads <= 8
    assert gauges.failures >= 1


class SlowStore(CountingStore):
    async def list_queues(self, limit: int = 100, cursor: str | None = None) -> QueuePage:
        await asyncio.sleep(0.02)
        return await super().list_queues(limit, cursor)


async def test_a_dear_read_spaces_the_next_so_reading_keeps_to_its_share() -> None:
    store = SlowStore()
    gauges = QueueGauges(store, every_s=0.01, read_share=0.1)
    await gauges.refresh()
    assert 0.2 <= gauges.next_in_s <= 1.0  # 20 ms read at a 10 % share: 200 ms or more apart
    capped = QueueGauges(store, every_s=0.01, read_share=1e-9)
    await capped.refresh()
    assert capped.next_in_s == MAX_EVERY_S


async def test_queue_labels_are_bounded() -> None:
    store = MemoryStore()
    now = store.now_ms()
    await store.add_many(
        [Timer(due_ms=now + 1000, queue=f"q{n:04}") for n in range(MAX_QUEUES + 50)]
    )
    gauges = QueueGauges(store)
    await gauges.refresh()
    assert len(gauges.infos) == MAX_QUEUES
