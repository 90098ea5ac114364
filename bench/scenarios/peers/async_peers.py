"""The asyncio libraries: saq, arq and taskiq on Redis, procrastinate on PostgreSQL. Each
worker runs as a task in the bench's event loop, as their in-process APIs run it, with the
library's default settings."""

from __future__ import annotations

import asyncio
import contextlib
import math
from datetime import UTC, datetime, timedelta
from typing import Any

from peer_base import GRACE_S, Peer, flush_redis
from run_log import record


def utc(when_s: float) -> datetime:
    return datetime.fromtimestamp(when_s, tz=UTC)


class TaskPeer(Peer):
    """A worker that is one coroutine: start it as a task, cancel it to stop."""

    worker: asyncio.Task[Any] | None = None

    def run_worker(self) -> Any:
        raise NotImplementedError

    async def start(self) -> None:
        self.worker = asyncio.create_task(self.run_worker())

    async def stop(self) -> None:
        worker, self.worker = self.worker, None
        if worker is not None:
            worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await worker

    async def close(self) -> None:
        await self.stop()


class Saq(TaskPeer):
    package = "saq"
    settings = "Worker(queue, functions) defaults: concurrency 10"
    timing = (
        "enqueue(scheduled=epoch s, an int: due rounded up); the worker moves due jobs every 1 s"
    )

    async def open(self) -> None:
        from saq import Queue

        async def job(ctx: object, *, i: int) -> None:
            record(i)

        self.job = job
        self.queue = Queue.from_url(self.redis_url, name="bench")
        await self.queue.connect()

    async def close(self) -> None:
        await super().close()
        await self.queue.disconnect()

    async def enqueue(self, i: int, when_s: float | None) -> None:
        scheduled = 0 if when_s is None else math.ceil(when_s)
        await self.queue.enqueue("job", i=i, scheduled=scheduled)

    def run_worker(self) -> Any:
        from saq import Worker

        self.saq_worker = Worker(self.queue, functions=[("job", self.job)])
        return self.saq_worker.start()

    async def stop(self) -> None:
        if self.worker is not None:
            await self.saq_worker.stop()
        await super().stop()


class Arq(TaskPeer):
    package = "arq"
    settings = "Worker(functions, redis_settings) defaults: max_jobs 10"
    timing = (
        "enqueue_job(_defer_until=datetime), ms scores; the worker polls every 0.5 s (poll_delay)"
    )

    async def open(self) -> None:
        from arq import create_pool
        from arq.connections import RedisSettings

        self.settings_ = RedisSettings(host=self.host, port=self.port)
        self.pool = await create_pool(self.settings_)

    async def close(self) -> None:
        await super().close()
        await self.pool.aclose()

    async def enqueue(self, i: int, when_s: float | None) -> None:
        defer = None if when_s is None else utc(when_s)
        await self.pool.enqueue_job("job", i, _defer_until=defer)

    def run_worker(self) -> Any:
        from arq.worker import Worker, func

        async def job(ctx: object, i: int) -> None:
            record(i)

        self.arq_worker = Worker(
            functions=[func(job, name="job")], redis_settings=self.settings_, handle_signals=False
        )
        return self.arq_worker.async_run()

    async def stop(self) -> None:
        if self.worker is not None:
            # close() cancels the worker's own tasks and gathers them, which can raise theirs
            with contextlib.suppress(asyncio.CancelledError):
                await self.arq_worker.close()
        await super().stop()


class Taskiq(TaskPeer):
    package = "taskiq"
    settings = (
        "RedisStreamBroker; run_receiver_task(broker) in process (the `taskiq worker` CLI "
        "starts 2 such processes); TaskiqScheduler with ListRedisScheduleSource"
    )
    timing = (
        "schedule_by_time(source, datetime); its scheduler re-reads the source every 60 s "
        "(update_interval) and sends what is due on whole seconds (loop_interval 1 s)"
    )
    grace_s = 75.0
    update_interval: timedelta | None = None  # its default, a minute

    async def open(self) -> None:
        from taskiq import TaskiqScheduler
        from taskiq_redis import ListRedisScheduleSource, RedisStreamBroker

        self.broker = RedisStreamBroker(url=self.redis_url)

        @self.broker.task(task_name="job")
        async def job(i: int) -> None:
            record(i)

        self.job = job
        self.source = ListRedisScheduleSource(self.redis_url)
        self.scheduler = TaskiqScheduler(self.broker, sources=[self.source])
        await self.broker.startup()

    async def close(self) -> None:
        await super().close()
        await self.broker.shutdown()

    async def reset(self) -> None:
        flush_redis(self.redis_url)
        await self.broker.startup()  # its consumer group went with the flush

    async def enqueue(self, i: int, when_s: float | None) -> None:
        if when_s is None:
            await self.job.kiq(i)
        else:
            await self.job.schedule_by_time(self.source, utc(when_s), i)

    async def run_worker(self) -> None:
        from taskiq.api import run_receiver_task, run_scheduler_task

        scheduler = run_scheduler_task(self.scheduler, interval=self.update_interval)
        await asyncio.gather(run_receiver_task(self.broker), scheduler)


class TaskiqTuned(Taskiq):
    """An extra row: the scheduler re-reads its source every second instead of every minute."""

    settings = Taskiq.settings + "; tuned: run_scheduler_task(interval=1 s)"
    timing = "as taskiq, the source re-read every 1 s"
    grace_s = GRACE_S
    update_interval = timedelta(seconds=1)


class Procrastinate(TaskPeer):
    package = "procrastinate"
    settings = "App(PsycopgConnector); run_worker_async() defaults: concurrency 1"
    timing = (
        "configure(schedule_at=datetime).defer_async(); a job deferred to later is found by "
        "polling every 5 s (fetch_job_polling_interval; LISTEN/NOTIFY wakes only on insert)"
    )

    async def open(self) -> None:
        import procrastinate

        self.app = procrastinate.App(
            connector=procrastinate.PsycopgConnector(conninfo=self.postgres_url)
        )
        await self.app.open_async()

        @self.app.task(name="job")
        async def job(i: int) -> None:
            record(i)

        self.job = job
        await self.app.schema_manager.apply_schema_async()

    async def close(self) -> None:
        await super().close()
        await self.app.close_async()

    async def reset(self) -> None:
        await self.app.connector.execute_query_async("TRUNCATE procrastinate_jobs CASCADE")

    async def enqueue(self, i: int, when_s: float | None) -> None:
        if when_s is None:
            await self.job.defer_async(i=i)
        else:
            await self.job.configure(schedule_at=utc(when_s)).defer_async(i=i)

    def run_worker(self) -> Any:
        return self.app.run_worker_async()


def make(name: str, redis_url: str, postgres_url: str) -> Peer:
    kinds: dict[str, type[Peer]] = {
        "saq": Saq,
        "arq": Arq,
        "taskiq": Taskiq,
        "taskiq-1s": TaskiqTuned,
        "procrastinate": Procrastinate,
    }
    return kinds[name](name, redis_url, postgres_url)
