"""Redis stops answering for a few seconds (``DEBUG SLEEP``) under a steady stream of timers.

Every command waits, none fails: the store's 5 s socket timeout outlasts the stall. POSTs
made meanwhile are answered late; timers due meanwhile fire once Redis answers again.
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

SLOW_S = 3
BEFORE_S = 3.0
AFTER_S = 3.0


async def test_redis_answering_slowly(
    start_redis: Callable[..., RedisServer],
    receiver: Receiver,
    procs: Processes,
    record_fault: Callable[[FaultReport], None],
) -> None:
    server = start_redis(options=["--enable-debug-command", "local"])
    api = await procs.start(
        "serve", "--port", "0", "--store", server.url, "--no-worker", "--allow-private-targets"
    )
    worker = await procs.start("worker", "--store", server.url, "--allow-private-targets")
    stream = Stream(api.url, receiver, prefix="slow")
    stream.start()
    await asyncio.sleep(BEFORE_S)

    def stall() -> None:
        with server.client() as client:
            client.execute_command("DEBUG", "SLEEP", SLOW_S)

    start_ms = now_ms()
    await asyncio.to_thread(stall)
    end_ms = now_ms()
    await asyncio.sleep(AFTER_S)
    await stream.stop()
    await settle(stream, receiver, timeout_s=15)

    result = report(f"Redis stalled {SLOW_S} s (DEBUG SLEEP)", stream, receiver, start_ms, end_ms)
    record_fault(result)
    result.assert_nothing_lost_or_early()
    result.assert_no_stale_fires()
    result.assert_no_duplicates()
    result.assert_lateness_within_target()
    for process in (api, worker):
        assert await process.stop(signal.SIGTERM) == 0, process.stderr()
