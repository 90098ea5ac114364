"""A Redis Cluster of three masters and three replicas loses a master to SIGKILL mid-run.

Its replica takes over after the node timeout (2 s). POSTs to the dead master's slots fail
(503) until then and are not acknowledged; every acknowledged timer must still arrive, none
early. A write the master acknowledged but had not yet sent to its replica would be lost by
design (asynchronous replication); on loopback the replica trails by microseconds. An ack lost
so makes its timer fire again: a duplicate, which at least once allows.

Timers due during the failover arrive within the lateness target: a claim whose reply the dying
master swallowed is sent again (same request id) and returns the leases the replica took over.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
from service.e2e_helpers import Processes

from tickwheel.testing.receiver import Receiver

from .harness import FaultReport, Stream, now_ms, report, settle, wait_until

if TYPE_CHECKING:
    from conftest import RedisClusterProcesses, RedisServer

pytestmark = pytest.mark.timeout(120)

LEASE_S = 10
"""As in the restart test: short enough to wait for a claim orphaned by the crash."""
BEFORE_S = 3.0
AFTER_S = 3.0


def _busiest_master(cluster: RedisClusterProcesses) -> RedisServer:
    """The master holding the most keys: the timers' shards live there."""
    masters = []
    for node in cluster.nodes:
        with node.client() as client:
            if client.info("replication")["role"] == "master":
                masters.append((client.dbsize(), node))
    return max(masters, key=lambda pair: pair[0])[1]


def _replica_of(cluster: RedisClusterProcesses, master: RedisServer) -> RedisServer:
    for node in cluster.nodes:
        with node.client() as client:
            if client.info("replication").get("master_port") == master.port:
                return node
    raise AssertionError(f"no replica follows the master on {master.port}")


def _took_over(replica: RedisServer) -> bool:
    """Whether `replica` is a master now and the cluster serves every slot again."""
    with replica.client() as client:
        promoted = client.info("replication")["role"] == "master"
        return promoted and "cluster_state:ok" in str(client.execute_command("CLUSTER", "INFO"))


async def test_cluster_master_killed_fails_over(
    replicated_cluster: RedisClusterProcesses,
    receiver: Receiver,
    procs: Processes,
    record_fault: Callable[[FaultReport], None],
) -> None:
    store = replicated_cluster.url
    api = await procs.start(
        "serve", "--port", "0", "--store", store, "--no-worker", "--allow-private-targets"
    )
    worker = await procs.start(
        "worker", "--store", store, "--allow-private-targets", "--lease", str(LEASE_S)
    )
    stream = Stream(api.url, receiver, prefix="failover")
    stream.start()
    await asyncio.sleep(BEFORE_S)
    victim = _busiest_master(replicated_cluster)
    replica = _replica_of(replicated_cluster, victim)
    start_ms = now_ms()
    victim.kill(signal.SIGKILL)
    await wait_until(lambda: _took_over(replica), 20, "the failover")
    end_ms = now_ms()
    await asyncio.sleep(AFTER_S)
    await stream.stop()
    await settle(stream, receiver, timeout_s=LEASE_S + 15)

    result = report("Cluster 3+3, a master SIGKILLed", stream, receiver, start_ms, end_ms)
    record_fault(result)
    result.assert_nothing_lost_or_early()
    result.assert_no_stale_fires()
    # no assert_no_duplicates: an ack the dying master took but had not sent to its replica
    # is lost with it, and that timer fires again from the replica (at least once)
    result.assert_lateness_within_target()
    for process in (api, worker):
        assert await process.stop(signal.SIGTERM) == 0, process.stderr()
