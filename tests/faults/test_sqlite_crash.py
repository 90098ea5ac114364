"""`tickwheel serve` on SQLite SIGKILLed with a batch in flight, and started again on its file.

Batches (``POST /v1/timers/batch``) keep coming; the one the kill interrupts has no answer and
counts as not acknowledged (its timers may or may not be stored). Every timer of an answered
batch must arrive after the restart, none early. One the dead worker had claimed comes back
when its lease lapses; one it had fired but not yet acked fires again then (at least once).
With the default lease (6 s) those come back within the lateness target.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from service.e2e_helpers import Processes

from tickwheel.testing.receiver import Receiver

from .harness import FaultReport, Stream, now_ms, report, settle

pytestmark = pytest.mark.timeout(90)

LEASE_S = 6
"""The default lease, which the crash lets lapse: the test waits that long for those timers."""
BEFORE_S = 3.0
AFTER_S = 3.0
BIG_BATCH = 500


async def test_sqlite_serve_killed_mid_batch_and_restarted(
    tmp_path: Path,
    receiver: Receiver,
    procs: Processes,
    record_fault: Callable[[FaultReport], None],
) -> None:
    args = ["serve", "--port", "0", "--store", f"sqlite:///{tmp_path}/t.db"]
    args += ["--allow-private-targets"]
    server = await procs.start(*args)
    stream = Stream(server.url, receiver, prefix="sqlite", batch=20, rate=200, posters=2)
    stream.start()
    await asyncio.sleep(BEFORE_S)
    big = [
        {"id": f"in-flight-{n}", "delay": 1.0, "callback": {"url": f"{receiver.url}/t"}}
        for n in range(BIG_BATCH)
    ]
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        posting = asyncio.create_task(client.post("/v1/timers/batch", json={"timers": big}))
        await asyncio.sleep(0.02)  # the request is out; its answer is not
        start_ms = now_ms()
        assert server.process is not None
        server.send_signal(signal.SIGKILL)
        with pytest.raises(httpx.HTTPError):
            await posting
    assert await server.stop() == -signal.SIGKILL
    args[2] = server.url.rsplit(":", 1)[1]  # the same port, so the same API URL
    server = await procs.start(*args)
    end_ms = now_ms()
    await asyncio.sleep(AFTER_S)
    await stream.stop()
    await settle(stream, receiver, timeout_s=LEASE_S + 15)

    result = report("serve on SQLite SIGKILLed mid-batch", stream, receiver, start_ms, end_ms)
    record_fault(result)
    result.assert_nothing_lost_or_early()
    result.assert_no_stale_fires()
    result.assert_lateness_within_target()
    stored = {r.timer_id for r in receiver.received if (r.timer_id or "").startswith("in-flight")}
    print(f"of the batch the kill interrupted, {len(stored)} of {BIG_BATCH} timers were stored")
    assert await server.stop(signal.SIGTERM) == 0, server.stderr()
