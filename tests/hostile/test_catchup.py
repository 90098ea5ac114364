"""Catching up after downtime against a small receiver: every overdue callback arrives, once.

The receiver is Python's `http.server.ThreadingHTTPServer`: a listen backlog of 5, a thread per
connection, HTTP/1.0 (a connection per request). Opening dozens of connections at it at once
overflows its accept queue; the kernel then drops handshakes and the client waits out SYN
retransmissions (1 s, 3 s, ...) or times out on a connection the server never accepted.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from engine.support import running, until

from tickwheel.callbacks.http import HttpTarget
from tickwheel.callbacks.settings import HttpSettings
from tickwheel.engine import Worker, WorkerSettings
from tickwheel.model import Callback, RetryPolicy, Timer
from tickwheel.stores import MemoryStore

COUNT = 300
DEADLINE_S = 5.0  # from starting the worker (overdue) or from the due instant (burst)


class SmallReceiver:
    """A `ThreadingHTTPServer` on loopback that answers 200 to POST and counts timer ids."""

    def __init__(self) -> None:
        self.arrived: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()
        arrived, lock = self.arrived, self._lock

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    arrived[self.headers.get("Tickwheel-Timer-Id") or "?"] += 1
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass  # quiet: 300 lines of access log help nobody

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.05,))

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self.arrived.values())

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join()


@pytest.fixture
def small_receiver() -> Iterator[SmallReceiver]:
    receiver = SmallReceiver()
    receiver.start()
    try:
        yield receiver
    finally:
        receiver.stop()


@pytest.fixture
async def memory_store() -> AsyncIterator[MemoryStore]:
    store = MemoryStore()
    yield store
    await store.close()


def callbacks(url: str, due_ms: int) -> list[Timer]:
    """`COUNT` timers due at `due_ms` with the default timeout and prompt retries."""
    retry = RetryPolicy(min_backoff_s=0.1, max_backoff_s=0.5)
    return [
        Timer(id=f"t{i:03}", due_ms=due_ms, callback=Callback(url=url, body="{}"), retry=retry)
        for i in range(COUNT)
    ]


async def deliver_all(
    store: MemoryStore, receiver: SmallReceiver, added: list[Timer], started: float
) -> float:
    """Run a worker until every timer has arrived once; return the seconds from `started`."""
    target = HttpTarget(HttpSettings(allow_private_targets=True))
    worker = Worker(store, target, WorkerSettings(lookahead_ms=200, lease_ms=30_000))
    try:
        async with running(worker):
            await until(lambda: receiver.total >= COUNT, timeout_s=DEADLINE_S + 10, every_s=0.005)
            took_s = time.monotonic() - started
            await until(lambda: sum(worker.metrics.acked.values()) >= COUNT, timeout_s=5)
    finally:
        await target.close()
    assert receiver.arrived == dict.fromkeys((t.id for t in added), 1)
    stored = [await store.get(t.id) for t in added]
    assert [(t.id, t.attempt, t.last_error) for t in stored if t and t.last_error] == []
    return took_s


async def test_overdue_timers_all_arrive_once_within_seconds(
    small_receiver: SmallReceiver, memory_store: MemoryStore
) -> None:
    overdue_ms = memory_store.now_ms() - 60_000  # a minute of downtime
    added = await memory_store.add_many(callbacks(small_receiver.url, overdue_ms))
    took_s = await deliver_all(memory_store, small_receiver, added, time.monotonic())
    assert took_s < DEADLINE_S, f"the last callback arrived after {took_s:.2f} s"


async def test_a_burst_due_at_one_instant_all_arrives_once_within_seconds(
    small_receiver: SmallReceiver, memory_store: MemoryStore
) -> None:
    lead_s = 1.0
    due_ms = memory_store.now_ms() + round(lead_s * 1000)
    added = await memory_store.add_many(callbacks(small_receiver.url, due_ms))
    took_s = await deliver_all(memory_store, small_receiver, added, time.monotonic() + lead_s)
    assert took_s < DEADLINE_S, f"the last callback arrived {took_s:.2f} s after the due time"
