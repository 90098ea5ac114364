"""A worker's claim runs in Redis but its reply never reaches the worker (the connection drops).

The claimed timers are leased to nobody the worker knows of. Today they come back only when
that lease lapses: late by a lease, but not lost and not early. Issue 17's claim recovery is to
bring them within a few seconds; this test measures how late they are.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
from service.e2e_helpers import Processes

from tickwheel.testing.receiver import Receiver

from .harness import FaultReport, Stream, report, settle
from .proxy import ReplyDropper

if TYPE_CHECKING:
    from conftest import RedisServer

pytestmark = pytest.mark.timeout(90)

LEASE_S = 10
"""As in the restart test: short enough to wait for the orphaned leases."""
BEFORE_S = 3.0
AFTER_S = 2.0
WINDOW_MS = 1000  # timers due within this of the lost reply count as due during the fault


async def test_claim_reply_lost(
    start_redis: Callable[..., RedisServer],
    receiver: Receiver,
    procs: Processes,
    record_fault: Callable[[FaultReport], None],
) -> None:
    server = start_redis()
    async with ReplyDropper(server.port) as proxy:
        api = await procs.start(
            "serve", "--port", "0", "--store", server.url, "--no-worker", "--allow-private-targets"
        )
        worker = await procs.start(
            "worker", "--store", proxy.url, "--allow-private-targets", "--lease", str(LEASE_S)
        )
        stream = Stream(api.url, receiver, prefix="lost-claim")
        stream.start()
        await asyncio.sleep(BEFORE_S)
        # only a claim's reply carries timer records, hence their callback URL
        proxy.arm(f"{receiver.url}/t".encode())
        async with asyncio.timeout(10):
            await proxy.dropped.wait()
        await asyncio.sleep(AFTER_S)
        await stream.stop()
        await settle(stream, receiver, timeout_s=LEASE_S + 15)

        start_ms = proxy.dropped_at_ms
        result = report("a claim's reply lost", stream, receiver, start_ms, start_ms + WINDOW_MS)
        record_fault(result)
        result.assert_nothing_lost_or_early()
        result.assert_no_duplicates()
        for process in (api, worker):
            assert await process.stop(signal.SIGTERM) == 0, process.stderr()
