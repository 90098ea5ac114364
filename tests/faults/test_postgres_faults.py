"""PostgreSQL under a steady stream of timers: the server SIGKILLed and restarted 2 s later, and
a worker's connections cut by ``pg_terminate_backend``.

The API (`serve --no-worker`) and a `tickwheel worker` keep running on a ``postgresql://`` store;
POSTs made while the server is down fail and are not acknowledged. Every acknowledged timer must
still arrive, none early, and those due during the fault within the lateness target: the pool
replaces its broken connections, and the worker tries an unavailable store at least once a
second.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Iterator

import psycopg
import pytest
from pg_server import PostgresServer
from service.e2e_helpers import Processes

from tickwheel.testing.receiver import Receiver

from .harness import FaultReport, Stream, now_ms, report, settle

# lateness bounded by the clock through a fault: `make test` runs these after the rest
pytestmark = [pytest.mark.timeout(120), pytest.mark.latency]

LEASE_S = 10
"""The worker's lease, longer than the lateness target: timers that came back only when a lease
lapsed would fail it."""
DOWN_S = 2.0
BEFORE_S = 3.0
AFTER_S = 3.0
WORKER_APP = "tickwheel-fault-worker"


@pytest.fixture
def durable_postgres() -> Iterator[PostgresServer]:
    """A private server with fsync and synchronous commit on: a crash loses no commit."""
    server = PostgresServer(durable=True)
    try:
        server.start()
        yield server
    finally:
        server.remove()


async def _start(
    procs: Processes, server: PostgresServer, receiver: Receiver, prefix: str
) -> tuple[Stream, list[object]]:
    api = await procs.start(
        "serve", "--port", "0", "--store", server.url, "--no-worker", "--allow-private-targets"
    )
    worker = await procs.start(
        "worker",
        "--store",
        f"{server.url}?application_name={WORKER_APP}",
        "--allow-private-targets",
        "--lease",
        str(LEASE_S),
    )
    stream = Stream(api.url, receiver, prefix=prefix)
    stream.start()
    return stream, [api, worker]


def _terminate_worker_backends(server: PostgresServer) -> int:
    with psycopg.connect(server.url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = %s",
            (WORKER_APP,),
        ).fetchone()
    return 0 if row is None else int(row[0])


async def _finish(
    stream: Stream,
    receiver: Receiver,
    processes: list[object],
    result: FaultReport,
    record_fault: Callable[[FaultReport], None],
) -> None:
    record_fault(result)
    result.assert_nothing_lost_or_early()
    result.assert_no_stale_fires()
    result.assert_no_duplicates()
    result.assert_lateness_within_target()
    for process in processes:
        assert await process.stop(signal.SIGTERM) == 0, process.stderr()  # type: ignore[attr-defined]


async def test_postgres_killed_and_restarted(
    durable_postgres: PostgresServer,
    receiver: Receiver,
    procs: Processes,
    record_fault: Callable[[FaultReport], None],
) -> None:
    stream, processes = await _start(procs, durable_postgres, receiver, "pg-kill")
    await asyncio.sleep(BEFORE_S)
    start_ms = now_ms()
    await asyncio.to_thread(durable_postgres.kill)
    await asyncio.sleep(DOWN_S)
    await asyncio.to_thread(durable_postgres.start)
    end_ms = now_ms()
    await asyncio.sleep(AFTER_S)
    await stream.stop()
    await settle(stream, receiver, timeout_s=LEASE_S + 15)
    result = report("postgres SIGKILL + restart", stream, receiver, start_ms, end_ms)
    await _finish(stream, receiver, processes, result, record_fault)


async def test_a_workers_connections_terminated(
    durable_postgres: PostgresServer,
    receiver: Receiver,
    procs: Processes,
    record_fault: Callable[[FaultReport], None],
) -> None:
    stream, processes = await _start(procs, durable_postgres, receiver, "pg-terminate")
    await asyncio.sleep(BEFORE_S)
    start_ms = now_ms()
    terminated = 0
    for _ in range(3):  # the pool's and the listener's, again as they come back
        terminated += await asyncio.to_thread(_terminate_worker_backends, durable_postgres)
        await asyncio.sleep(0.7)
    end_ms = now_ms()
    assert terminated >= 2
    await asyncio.sleep(AFTER_S)
    await stream.stop()
    await settle(stream, receiver, timeout_s=LEASE_S + 15)
    result = report("postgres pg_terminate_backend (worker)", stream, receiver, start_ms, end_ms)
    await _finish(stream, receiver, processes, result, record_fault)
