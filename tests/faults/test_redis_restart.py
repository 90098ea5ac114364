"""redis-server SIGKILLed (or SIGTERMed) under a steady stream of timers and restarted on its
AOF 2 s later.

The API (`serve --no-worker`) and a `tickwheel worker` keep running; POSTs made while Redis is
down fail (503) and are not acknowledged. Every acknowledged timer must still arrive, none early.

Timers due during the outage arrive within the lateness target: a claim whose reply the crash
swallowed is sent again (same request id) once Redis is back and returns its leases, and the
worker tries an unavailable store at least once a second.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
from service.e2e_helpers import Processes

from tickwheel.testing.receiver import Receiver

from .harness import FaultReport, Stream, now_ms, report, settle

if TYPE_CHECKING:
    from conftest import RedisServer

pytestmark = pytest.mark.timeout(90)

LEASE_S = 10
"""The workers' lease, longer than the lateness target: timers that came back only when a lease
lapsed would fail it."""
DOWN_S = 2.0
BEFORE_S = 3.0
AFTER_S = 3.0


@pytest.mark.parametrize(
    ("sig", "appendfsync"),
    [(signal.SIGKILL, "always"), (signal.SIGKILL, "everysec"), (signal.SIGTERM, "everysec")],
    ids=["SIGKILL-always", "SIGKILL-everysec", "SIGTERM-everysec"],
)
async def test_redis_killed_and_restarted_on_its_aof(
    sig: signal.Signals,
    appendfsync: str,
    start_redis: Callable[..., RedisServer],
    receiver: Receiver,
    procs: Processes,
    record_fault: Callable[[FaultReport], None],
) -> None:
    server = start_redis(appendonly=True, appendfsync=appendfsync)
    api = await procs.start(
        "serve", "--port", "0", "--store", server.url, "--no-worker", "--allow-private-targets"
    )
    worker = await procs.start(
        "worker", "--store", server.url, "--allow-private-targets", "--lease", str(LEASE_S)
    )
    stream = Stream(api.url, receiver, prefix=f"aof-{appendfsync}")
    stream.start()
    await asyncio.sleep(BEFORE_S)
    start_ms = now_ms()
    await asyncio.to_thread(server.kill, sig)
    await asyncio.sleep(DOWN_S)
    await asyncio.to_thread(server.start)
    end_ms = now_ms()
    await asyncio.sleep(AFTER_S)
    await stream.stop()
    await settle(stream, receiver, timeout_s=LEASE_S + 15)

    result = report(
        f"redis {sig.name} + restart (AOF {appendfsync})", stream, receiver, start_ms, end_ms
    )
    record_fault(result)
    result.assert_nothing_lost_or_early()
    result.assert_no_stale_fires()
    result.assert_no_duplicates()
    result.assert_lateness_within_target()
    for process in (api, worker):
        assert await process.stop(signal.SIGTERM) == 0, process.stderr()
