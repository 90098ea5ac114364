"""Queue defaults and a purge end to end: a real ``tickwheel serve`` on SQLite and a receiver on
loopback. Defaults are set through the API, and the worker of the same process fires with them:
a timer without its own policy goes dead after the queue's two attempts on a receiver that
answers 503, a hanging receiver is given up on after the queue's timeout, and the queue's
headers arrive. A purge through the API leaves the leased timer that is being fired."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tickwheel.testing.receiver import Received, Receiver, Reply

from .e2e_helpers import Processes, processes

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def procs(tmp_path: Path) -> AsyncIterator[Processes]:
    async with processes(tmp_path) as started:
        yield started


async def state_of(api: httpx.AsyncClient, timer_id: str) -> str:
    answer = await api.get(f"/v1/timers/{timer_id}")
    assert answer.status_code == 200, answer.text
    state: str = answer.json()["state"]
    return state


async def until_state(api: httpx.AsyncClient, timer_id: str, state: str, timeout_s: float) -> None:
    async with asyncio.timeout(timeout_s):
        while True:
            if await state_of(api, timer_id) == state:
                return
            await asyncio.sleep(0.05)


async def test_queue_defaults_reach_the_callbacks_of_a_running_service(
    tmp_path: Path, procs: Processes
) -> None:
    async def respond(received: Received) -> Reply:
        if received.path == "/hang":
            await asyncio.sleep(30)
        return Reply(status=503 if received.path == "/fail" else 200)

    async with Receiver(respond=respond) as receiver:
        server = await procs.start(
            "serve",
            "--port",
            "0",
            "--store",
            f"sqlite:///{tmp_path}/t.db",
            "--allow-private-targets",
        )
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as api:
            defaults = {
                "retry": {
                    "max_attempts": 2,
                    "min_backoff": 0.05,
                    "max_backoff": 0.1,
                    "timeout": 0.5,
                },
                "headers": {"Authorization": "Bearer from-the-queue", "X-Team": "ops"},
            }
            answer = await api.put("/v1/queues/billing/defaults", json=defaults)
            assert answer.status_code == 200, answer.text
            await asyncio.sleep(1.5)  # the worker reads settings each second
            for timer_id, path, headers in [
                ("fails", "/fail", {}),
                ("hangs", "/hang", {}),
                ("fine", "/fine", {"x-team": "mine"}),
            ]:
                body = {
                    "id": timer_id,
                    "delay": 0,
                    "queue": "billing",
                    "callback": {"url": f"{receiver.url}{path}", "headers": headers},
                }
                assert (await api.post("/v1/timers", json=body)).status_code == 201
            started = time.monotonic()
            await until_state(api, "fails", "dead", 15)
            await until_state(api, "hangs", "dead", 15)
            await until_state(api, "fine", "done", 15)
            assert time.monotonic() - started < 10  # the built-in timeout alone is 10 s a try
            dead = (await api.get("/v1/timers/fails")).json()
            assert dead["last_error"] == "gave up after attempt 2: HTTP 503"
            assert dead["retry"]["max_attempts"] == 10  # as created: defaults apply when fired
        assert await server.stop() == 0, server.stderr()
    by_path: dict[str, list[Received]] = {}
    for received in receiver.received:
        by_path.setdefault(received.path, []).append(received)
    assert sorted(r.attempt or 0 for r in by_path["/fail"]) == [1, 2]
    assert sorted(r.attempt or 0 for r in by_path["/hang"]) == [1, 2]
    fine = by_path["/fine"][0].headers
    assert fine["authorization"] == "Bearer from-the-queue"
    assert fine["x-team"] == "mine"
    assert by_path["/fail"][0].headers["x-team"] == "ops"


async def test_a_purge_leaves_the_timer_a_worker_is_firing(
    tmp_path: Path, procs: Processes
) -> None:
    answered = asyncio.Event()

    async def respond(received: Received) -> Reply:
        await answered.wait()  # held until the purge is over
        return Reply()

    async with Receiver(respond=respond) as receiver:
        server = await procs.start(
            "serve",
            "--port",
            "0",
            "--store",
            f"sqlite:///{tmp_path}/t.db",
            "--allow-private-targets",
        )
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as api:
            hook = {"url": f"{receiver.url}/held"}
            body = {"id": "held", "delay": 0, "queue": "q", "callback": hook}
            assert (await api.post("/v1/timers", json=body)).status_code == 201
            later = [
                {"id": f"later-{n}", "delay": 3600, "queue": "q", "callback": hook}
                for n in range(5)
            ]
            assert (await api.post("/v1/timers/batch", json={"timers": later})).status_code == 200
            await receiver.wait_for(1, 10)  # the worker holds "held" and is firing it
            assert await state_of(api, "held") == "leased"
            for state in ("scheduled", "paused", "dead"):
                answer = await api.delete("/v1/queues/q/timers", params={"state": state})
                assert answer.status_code == 200, answer.text
                assert answer.json()["purged"] == (5 if state == "scheduled" else 0)
            assert await state_of(api, "held") == "leased"
            answered.set()
            await until_state(api, "held", "done", 15)  # its worker's ack landed
            counts = (await api.get("/v1/queues/q")).json()["counts"]
            assert counts == {"scheduled": 0, "leased": 0, "paused": 0, "done": 1, "dead": 0}
        assert await server.stop() == 0, server.stderr()
