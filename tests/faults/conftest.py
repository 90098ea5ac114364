"""Fault fixtures: a receiver, tickwheel processes, a Cluster with replicas to crash a master
of, and a summary of every fault's figures at the end of the run."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from service.e2e_helpers import Processes, processes

from tickwheel.testing.receiver import Receiver

from .harness import FaultReport

if TYPE_CHECKING:
    from conftest import RedisClusterProcesses

CLUSTER_NODE_TIMEOUT_MS = 2000
_FAULT_PROPERTY = "fault"


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    async with Receiver() as started:
        yield started


@pytest.fixture
async def procs(tmp_path: Path) -> AsyncIterator[Processes]:
    async with processes(tmp_path) as started:
        yield started


@pytest.fixture
def replicated_cluster(
    start_redis_cluster: Callable[..., RedisClusterProcesses],
) -> RedisClusterProcesses:
    """Three masters with a replica each in sync, node timeout 2 s: a master may die."""
    return start_redis_cluster(
        replicas=1, options=["--cluster-node-timeout", str(CLUSTER_NODE_TIMEOUT_MS)]
    )


@pytest.fixture
def record_fault(request: pytest.FixtureRequest) -> Callable[[FaultReport], None]:
    """Print a fault's figures now and again in the run's summary (seen without `-s`).

    The line travels as a user property of the test's report: under pytest-xdist the test runs
    in a worker and only its reports reach the process that writes the summary.
    """

    def record(report: FaultReport) -> None:
        print(report.line())
        request.node.user_properties.append((_FAULT_PROPERTY, report.line()))

    return record


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    lines = [
        value
        for reports in terminalreporter.stats.values()
        for report in reports
        if getattr(report, "when", None) == "call"
        for name, value in getattr(report, "user_properties", ())
        if name == _FAULT_PROPERTY
    ]
    if lines:
        terminalreporter.section("faults (issue 17)")
        for line in lines:
            terminalreporter.write_line(line)
