"""A careless neighbour's queues against `tickwheel serve`: far-future timers in hundreds of
queues named to sort first must not keep another queue's due timer from firing.

Before the due-queue index a worker served the first 256 queues it listed, in name order, for
good: one batch of 256 junk timers starved every later queue, and cancelling them did not help.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli.cli_support import Service

from tickwheel.testing import Receiver

DAY_S = 86_400


def post(url: str, body: Any) -> Any:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


@pytest.fixture(params=["sqlite", "redis"])
def service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Service]:
    if request.param == "sqlite":
        store = f"sqlite:///{tmp_path}/t.db"
    else:
        server = request.getfixturevalue("redis_server")
        store = f"{server.url}?prefix=neighbours-{tmp_path.name}"
    started = Service(tmp_path, "--store", store, "--allow-private-targets")
    try:
        yield started
    finally:
        started.stop()


async def test_a_due_timer_fires_behind_256_far_queues_named_first(service: Service) -> None:
    async with Receiver() as receiver:
        junk = [
            {
                "id": f"junk-{n}",
                "delay": 30 * DAY_S,
                "queue": f"{n:04d}",
                "callback": {"url": receiver.url},
            }
            for n in range(256)
        ]
        answer = post(f"{service.url}/v1/timers/batch", {"timers": junk})
        assert all(item["status"] == 201 for item in answer["results"]), answer
        await asyncio.sleep(1.5)  # the worker has looked at its queues since
        post(
            f"{service.url}/v1/timers",
            {"id": "pay", "delay": 1, "queue": "payments", "callback": {"url": receiver.url}},
        )
        await receiver.wait_for(1, timeout_s=4.0)
        assert [r.timer_id for r in receiver.received] == ["pay"]
        assert receiver.received[0].due_ms is not None
        assert receiver.received[0].at_ms >= receiver.received[0].due_ms  # never early
