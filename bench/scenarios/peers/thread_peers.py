"""The libraries whose worker runs on threads of the bench's process: huey and dramatiq on
Redis, and APScheduler's in-process scheduler with its default (memory) job store. Each keeps
its default settings; the bench's event loop only waits meanwhile."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from peer_base import Peer
from run_log import record


def utc(when_s: float) -> datetime:
    return datetime.fromtimestamp(when_s, tz=UTC)


class Huey(Peer):
    package = "huey"
    settings = "RedisHuey(url); Consumer(huey) defaults: 1 worker thread, periodic on"
    timing = (
        "task.schedule(eta=datetime); its scheduler moves due tasks every 1 s (scheduler_interval)"
    )

    async def open(self) -> None:
        from huey import RedisHuey

        self.huey = RedisHuey("bench", url=self.redis_url)
        self.job = self.huey.task(name="job")(record)
        self.consumer: Any = None

    async def enqueue(self, i: int, when_s: float | None) -> None:
        if when_s is None:
            self.job(i)
        else:
            self.job.schedule(args=(i,), eta=utc(when_s))

    async def start(self) -> None:
        from huey.consumer import Consumer

        self.consumer = Consumer(self.huey)
        # its signal handlers would take the bench's SIGTERM; start() runs the threads only
        self.consumer._set_signal_handlers = lambda: None
        self.consumer.start()

    async def stop(self) -> None:
        consumer, self.consumer = self.consumer, None
        if consumer is not None:
            consumer.stop(graceful=True)

    async def close(self) -> None:
        await self.stop()


class Dramatiq(Peer):
    package = "dramatiq"
    settings = "RedisBroker(url); Worker(broker) defaults: 8 threads"
    timing = (
        "actor.send_with_options(delay=ms); the worker pulls delayed messages ahead and "
        "re-enqueues each when its eta passes (polling its queues every 1 s when idle)"
    )

    async def open(self) -> None:
        import dramatiq
        from dramatiq.brokers.redis import RedisBroker

        self.broker = RedisBroker(url=self.redis_url)
        dramatiq.set_broker(self.broker)
        self.job = dramatiq.actor(record, actor_name="job")
        self.worker: Any = None

    async def enqueue(self, i: int, when_s: float | None) -> None:
        if when_s is None:
            self.job.send(i)
        else:
            delay_ms = max(0, round((when_s - time.time()) * 1000))
            self.job.send_with_options(args=(i,), delay=delay_ms)

    async def start(self) -> None:
        import dramatiq

        self.worker = dramatiq.Worker(self.broker)
        self.worker.start()

    async def stop(self) -> None:
        worker, self.worker = self.worker, None
        if worker is not None:
            worker.stop()

    async def close(self) -> None:
        await self.stop()
        self.broker.close()


class APScheduler(Peer):
    package = "apscheduler"
    settings = (
        "BackgroundScheduler() defaults: memory job store, 10 threads, misfire_grace_time 1 s"
    )
    timing = "add_job(trigger='date', run_date=datetime); its thread sleeps until the next run time"
    enqueue_ahead = True

    async def open(self) -> None:
        self.scheduler: Any = None

    def _fresh(self) -> None:
        from apscheduler.schedulers.background import BackgroundScheduler

        if self.scheduler is not None and self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        self.scheduler = BackgroundScheduler(timezone=UTC)

    async def reset(self) -> None:
        self._fresh()  # its store is in memory: a new scheduler is an empty one

    async def enqueue(self, i: int, when_s: float | None) -> None:
        if when_s is None:
            self.scheduler.add_job(record, args=(i,))
        else:
            self.scheduler.add_job(record, "date", run_date=utc(when_s), args=(i,))

    async def start(self) -> None:
        self.scheduler.start()

    async def stop(self) -> None:
        if self.scheduler is not None and self.scheduler.running:
            self.scheduler.shutdown(wait=True)

    async def close(self) -> None:
        await self.stop()


def make(name: str, redis_url: str, postgres_url: str) -> Peer:
    kinds: dict[str, type[Peer]] = {"huey": Huey, "dramatiq": Dramatiq, "apscheduler": APScheduler}
    return kinds[name](name, redis_url, postgres_url)
