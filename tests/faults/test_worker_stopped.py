"""A worker SIGSTOPped past its lease, then continued, beside a second worker.

The stopped worker's timers pass to the other once their leases lapse. When it wakes, what it
still holds is no longer its own: its late acks are refused (counted in its
``tickwheel_leases_lost`` metric). A timer it had sent before the stop may come again from the
other worker (at least once), but it fires none of those timers again after it wakes: a
callback that passed its lease check and then waited for a connection (the stop caught it
waiting) asks again, on the ready connection, whether the lease still holds, and is dropped.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
from service.e2e_helpers import Processes

from tickwheel.testing.receiver import Received, Receiver, Reply

from .harness import FaultReport, Stream, metrics_url, now_ms, report, scrape, settle

if TYPE_CHECKING:
    from conftest import RedisServer

pytestmark = pytest.mark.timeout(90)

LEASE_S = 2
STOPPED_S = 2 * LEASE_S + 1  # every lease it held has lapsed, renewed or not
REPLY_AFTER_S = 0.2  # callbacks stay in flight this long, so the stop catches some


async def _slow(received: Received) -> Reply:
    await asyncio.sleep(REPLY_AFTER_S)
    return Reply()


async def test_worker_stopped_past_its_lease_loses_it(
    start_redis: Callable[..., RedisServer],
    procs: Processes,
    record_fault: Callable[[FaultReport], None],
) -> None:
    server = start_redis()
    worker_args = ["worker", "--store", server.url, "--allow-private-targets"]
    worker_args += ["--lease", str(LEASE_S), "--metrics-port", "0"]
    async with Receiver(respond=_slow) as receiver:
        api = await procs.start(
            "serve", "--port", "0", "--store", server.url, "--no-worker", "--allow-private-targets"
        )
        sleeper = await procs.start(*worker_args)
        other = await procs.start(*worker_args)
        sleeper_metrics = metrics_url(sleeper.first_line)
        stream = Stream(api.url, receiver, prefix="stopped")
        stream.start()
        await asyncio.sleep(2.0)
        assert sleeper.process is not None
        # stop it while it holds timers, some of them with callbacks in flight
        for _ in range(100):
            if await scrape(sleeper_metrics, "tickwheel_in_flight") > 0:
                break
            await asyncio.sleep(0.02)
        sleeper.send_signal(signal.SIGSTOP)
        start_ms = now_ms()
        await asyncio.sleep(STOPPED_S)
        sleeper.send_signal(signal.SIGCONT)
        end_ms = now_ms()
        lost_leases = 0.0

        async def count_lost() -> None:
            nonlocal lost_leases
            lost_leases = await scrape(sleeper_metrics, "tickwheel_leases_lost_total")

        for _ in range(100):
            await count_lost()
            if lost_leases > 0:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(2.0)
        await stream.stop()
        await settle(stream, receiver, timeout_s=LEASE_S + 15)

        result = report("worker SIGSTOP past its lease", stream, receiver, start_ms, end_ms)
        record_fault(result)
        result.assert_nothing_lost_or_early()
        result.assert_no_stale_fires()
        result.assert_lateness_within_target()
        assert lost_leases > 0, f"the continued worker lost no lease:\n{sleeper.stderr()}"
        for process in (api, sleeper, other):
            assert await process.stop(signal.SIGTERM) == 0, process.stderr()
