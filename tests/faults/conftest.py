"""Fault fixtures: a receiver, tickwheel processes, private Redis servers and a Cluster with
replicas to crash, and a summary of every fault's figures at the end of the run."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path

import pytest
from conftest import RedisClusterProcesses, RedisServer
from service.e2e_helpers import Processes, processes

from tickwheel.testing.receiver import Receiver

from .harness import FaultReport

CLUSTER_NODE_TIMEOUT_MS = 2000
_REPORTS = pytest.StashKey[list[FaultReport]]()


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    async with Receiver() as started:
        yield started


@pytest.fixture
async def procs(tmp_path: Path) -> AsyncIterator[Processes]:
    async with processes(tmp_path) as started:
        yield started


@pytest.fixture
def own_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., RedisServer]]:
    """Start private Redis servers (`appendonly`, `appendfsync`, `options`) to crash; all are
    stopped after the test."""
    started: list[RedisServer] = []

    def start(
        *, appendonly: bool = False, appendfsync: str = "always", options: Sequence[str] = ()
    ) -> RedisServer:
        server = RedisServer(
            tmp_path_factory.mktemp("redis-fault"),
            appendonly=appendonly,
            appendfsync=appendfsync,
            options=options,
        )
        started.append(server)
        server.start()
        return server

    try:
        yield start
    finally:
        for server in started:
            server.stop()


@pytest.fixture
def replicated_cluster(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RedisClusterProcesses]:
    """Three masters with a replica each, node timeout 2 s, replicas in sync: a master may die."""
    cluster = RedisClusterProcesses(
        tmp_path_factory.mktemp("redis-cluster-ha"),
        replicas=1,
        options=["--cluster-node-timeout", str(CLUSTER_NODE_TIMEOUT_MS)],
    )
    try:
        cluster.start()
        deadline = time.monotonic() + 20
        while not all(_synced(node) for node in cluster.nodes):
            if time.monotonic() > deadline:
                raise RuntimeError("the replicas did not sync with their masters")
            time.sleep(0.1)
        yield cluster
    finally:
        cluster.stop()


def _synced(node: RedisServer) -> bool:
    with node.client() as client:
        info = client.info("replication")
    return info["role"] == "master" or info.get("master_link_status") == "up"


@pytest.fixture
def record_fault(request: pytest.FixtureRequest) -> Callable[[FaultReport], None]:
    """Print a fault's figures now and again in the run's summary (seen without `-s`)."""

    def record(report: FaultReport) -> None:
        print(report.line())
        request.config.stash.setdefault(_REPORTS, []).append(report)

    return record


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    reports = terminalreporter.config.stash.get(_REPORTS, [])
    if reports:
        terminalreporter.section("faults (issue 17)")
        for report in reports:
            terminalreporter.write_line(report.line())
