"""One peer library's enqueue and drain, run by the throwaway venv's Python (issue 15's peers).

Usage: ``peer_run.py <saq|huey|dramatiq> <redis url> <jobs>``; prints one JSON line. It
imports neither tickwheel nor the bench harness: the peers are installed only in
``/tmp/peers-venv`` (``bench/peers.py`` says how), never in the project's environment.

- enqueue: one call per job, each awaited (or returned) before the next, as a producer writes it;
- drain: as many jobs enqueued beforehand, then the library's own worker started, from its
  start until every job has run (each job only counts itself).
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from collections.abc import Callable
from urllib.parse import urlparse

DRAIN_TIMEOUT_S = 120.0


class Counter:
    """Jobs run so far, from any thread; `done` is set once `target` have run."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.count = 0
        self.done = threading.Event()
        self._lock = threading.Lock()

    def hit(self) -> None:
        with self._lock:
            self.count += 1
            if self.count >= self.target:
                self.done.set()


def wait_done(counter: Counter, started: float) -> float:
    if not counter.done.wait(DRAIN_TIMEOUT_S):
        raise SystemExit(f"drain timed out with {counter.count} of {counter.target} run")
    return time.perf_counter() - started


def flush(url: str) -> None:
    """Empty the bench's own server between the enqueue and the drain."""
    import redis

    client = redis.Redis.from_url(url)
    client.flushall()
    client.close()


def timed(calls: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    calls()
    return time.perf_counter() - t0


def run_huey(url: str, n: int) -> dict[str, float]:
    from huey import RedisHuey
    from huey.consumer import Consumer

    parsed = urlparse(url)
    huey = RedisHuey("bench", host=parsed.hostname, port=parsed.port, results=False)
    counter = Counter(n)

    @huey.task()
    def job(i: int) -> None:
        counter.hit()

    enqueue_s = timed(lambda: [job(i) for i in range(n)])
    flush(url)
    for i in range(n):
        job(i)
    consumer = Consumer(huey, workers=8, worker_type="thread", periodic=False)
    consumer._set_signal_handlers = lambda: None  # type: ignore[method-assign]
    started = time.perf_counter()
    consumer.start()  # its worker threads; run() would add the signal loop
    drain_s = wait_done(counter, started)
    consumer.stop(graceful=False)
    return {"enqueue_per_s": n / enqueue_s, "drain_s": drain_s, "workers": 8}


def run_dramatiq(url: str, n: int) -> dict[str, float]:
    import dramatiq
    from dramatiq.brokers.redis import RedisBroker

    broker = RedisBroker(url=url)
    dramatiq.set_broker(broker)
    counter = Counter(n)

    @dramatiq.actor(max_retries=0)
    def job(i: int) -> None:
        counter.hit()

    enqueue_s = timed(lambda: [job.send(i) for i in range(n)])
    flush(url)
    for i in range(n):
        job.send(i)
    worker = dramatiq.Worker(broker, worker_threads=8)
    started = time.perf_counter()
    worker.start()
    drain_s = wait_done(counter, started)
    worker.stop()
    broker.close()
    return {"enqueue_per_s": n / enqueue_s, "drain_s": drain_s, "workers": 8}


async def run_saq(url: str, n: int) -> dict[str, float]:
    from saq import Queue, Worker

    counter = Counter(n)

    async def job(ctx: object, *, i: int) -> None:
        counter.hit()

    queue = Queue.from_url(url, name="bench")
    await queue.connect()
    t0 = time.perf_counter()
    for i in range(n):
        await queue.enqueue("job", i=i, key=f"e{i}")
    enqueue_s = time.perf_counter() - t0
    flush(url)
    for i in range(n):
        await queue.enqueue("job", i=i, key=f"d{i}")
    worker = Worker(queue, functions=[("job", job)], concurrency=64)
    started = time.perf_counter()
    running = asyncio.ensure_future(worker.start())
    while not counter.done.is_set():
        if time.perf_counter() - started > DRAIN_TIMEOUT_S:
            raise SystemExit(f"drain timed out with {counter.count} of {counter.target} run")
        await asyncio.sleep(0.001)
    drain_s = time.perf_counter() - started
    await worker.stop()
    running.cancel()
    await queue.disconnect()
    return {"enqueue_per_s": n / enqueue_s, "drain_s": drain_s, "workers": 64}


def main() -> None:
    name, url, jobs = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if name == "huey":
        result = run_huey(url, jobs)
    elif name == "dramatiq":
        result = run_dramatiq(url, jobs)
    elif name == "saq":
        result = asyncio.run(run_saq(url, jobs))
    else:
        raise SystemExit(f"unknown peer {name!r}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
