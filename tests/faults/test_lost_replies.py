"""A worker's command runs in its store (Redis, or a committed PostgreSQL transaction) but its
reply never reaches the worker (the connection drops), as a crash or a network cut can leave it.

A lost claim reply would leave the claimed timers leased to nobody the worker knows of until the
lease lapsed; the worker sends the claim again (same request id) and gets those leases back
(PostgreSQL: it reads back the rows its claim id leased), so the timers due then are on time, well
before the 10 s lease would lapse.
A lost ack reply makes the worker ack again: the timers were done, none may fire twice, the ack
sent again counts as landed (no lease reported lost), and the timers due then are on time.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
from service.e2e_helpers import Processes

from tickwheel.testing.receiver import Receiver

from .harness import FaultReport, Stream, metrics_url, report, scrape, settle
from .proxy import ReplyDropper

if TYPE_CHECKING:
    from conftest import RedisServer
    from pg_server import PostgresServer

pytestmark = pytest.mark.timeout(90)

LEASE_S = 10
"""Longer than the lateness target: timers back only when a lease lapses would fail it."""
BEFORE_S = 2.0
AFTER_S = 2.0
WINDOW_MS = 1000  # timers due within this of the lost reply count as due during the fault


@pytest.fixture(params=["redis", "postgres"])
def store_server(
    request: pytest.FixtureRequest, start_redis: Callable[..., RedisServer]
) -> tuple[str, int]:
    """A store's URL and port, for a test of its own: a private Redis, or a schema of its own
    on the session's PostgreSQL."""
    if request.param == "redis":
        server = start_redis()
        return server.url, server.port
    pg: PostgresServer = request.getfixturevalue("postgres_server")
    schema = f"lost_{request.node.name.split('[')[0][-12:]}_{pg.port}"
    return f"{pg.url}?schema={schema}", pg.port


async def _through_lost_reply(
    what: str,
    store_server: tuple[str, int],
    receiver: Receiver,
    procs: Processes,
) -> tuple[FaultReport, float, float]:
    """Run a stream through a worker behind a `ReplyDropper` that loses the reply `what`
    names ("claim" or "ack") once, mid-run; return the report, the worker's failed store
    calls of that kind and the leases it reported lost."""
    url, port = store_server
    pg = url.startswith("postgresql")
    prefix = f"lost-{what}"
    async with ReplyDropper(port) as proxy:
        api = await procs.start(
            "serve", "--port", "0", "--store", url, "--no-worker", "--allow-private-targets"
        )
        worker = await procs.start(
            "worker",
            "--store",
            url.replace(f"127.0.0.1:{port}", f"127.0.0.1:{proxy.port}", 1),
            "--allow-private-targets",
            "--lease",
            str(LEASE_S),
            "--metrics-port",
            "0",
        )
        stream = Stream(api.url, receiver, prefix=prefix)
        stream.start()
        await asyncio.sleep(BEFORE_S)
        if what == "claim":
            # only a claim's reply carries timers, hence their callback URL
            # (PostgreSQL: cut once the transaction committed, as `COMMIT`'s completion says)
            proxy.arm_reply(f"{receiver.url}/t".encode(), cut_at=b"COMMIT\x00" if pg else None)
        else:
            # only an ack's request names timers (claims name a queue)
            proxy.arm_request(f"{prefix}-".encode())
        async with asyncio.timeout(10):
            await proxy.dropped.wait()
        await asyncio.sleep(AFTER_S)
        await stream.stop()
        await settle(stream, receiver, timeout_s=LEASE_S + 15)
        metrics = metrics_url(worker.first_line)
        failed = await scrape(metrics, f'tickwheel_store_errors_total{{operation="{what}"}}')
        leases_lost = await scrape(metrics, "tickwheel_leases_lost_total")
        for process in (api, worker):
            assert await process.stop(signal.SIGTERM) == 0, process.stderr()
    start_ms = proxy.dropped_at_ms
    fault = f"{what} reply lost"
    return report(fault, stream, receiver, start_ms, start_ms + WINDOW_MS), failed, leases_lost


async def test_claim_reply_lost(
    store_server: tuple[str, int],
    receiver: Receiver,
    procs: Processes,
    record_fault: Callable[[FaultReport], None],
) -> None:
    result, failed, _ = await _through_lost_reply("claim", store_server, receiver, procs)
    record_fault(result)
    assert failed >= 1, "the worker saw no claim fail"
    result.assert_nothing_lost_or_early()
    result.assert_no_stale_fires()
    result.assert_no_duplicates()
    result.assert_lateness_within_target()


async def test_ack_reply_lost(
    store_server: tuple[str, int],
    receiver: Receiver,
    procs: Processes,
    record_fault: Callable[[FaultReport], None],
) -> None:
    result, failed, leases_lost = await _through_lost_reply("ack", store_server, receiver, procs)
    record_fault(result)
    assert failed >= 1, "the worker saw no ack fail"
    assert leases_lost == 0, "the ack sent again was taken for a lost lease"
    result.assert_nothing_lost_or_early()
    result.assert_no_stale_fires()
    result.assert_no_duplicates()
    result.assert_lateness_within_target()
