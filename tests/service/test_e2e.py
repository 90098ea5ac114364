"""End to end: real ``tickwheel`` processes fire real HTTP callbacks at a receiver on loopback.

SQLite: 500 timers due over ~3 s, 100 cancelled, the server restarted half way through; exactly
the other 400 arrive, once each, none before its due millisecond. Redis: an API-only server and
two worker processes share one Redis; every timer not cancelled arrives once, none early.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import redis

from tickwheel.testing.receiver import Received, Receiver, Reply

from .e2e_helpers import Processes, processes

if TYPE_CHECKING:
    from conftest import RedisServer

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[2]

TIMERS = 500
CANCELLED = 100
FIRST_DELAY_S = 1.0
SPREAD_S = 3.0
# a timer whose lease is lost comes back when the lease (60 s) lapses: at least once, late
ARRIVAL_TIMEOUT_S = 90.0
SETTLE_S = 1.5  # after the last expected arrival, wait this long for strays (duplicates)


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    async with Receiver() as started:
        yield started


@pytest.fixture
async def procs(tmp_path: Path) -> AsyncIterator[Processes]:
    async with processes(tmp_path) as started:
        yield started


DOOMED_DELAY_S = 60.0
"""Extra delay of the timers `_schedule` cancels: a slow machine's batch create and cancels
cannot race their claims, and waiting for the others takes no longer."""


def _timers(receiver: Receiver, prefix: str) -> list[dict[str, Any]]:
    return [
        {
            "id": f"{prefix}-{n}",
            "delay": round(
                FIRST_DELAY_S
                + SPREAD_S * n / TIMERS
                + (DOOMED_DELAY_S if n >= TIMERS - CANCELLED else 0),
                3,
            ),
            "callback": {"url": f"{receiver.url}/t/{n}", "body": str(n)},
        }
        for n in range(TIMERS)
    ]


async def _schedule(api: str, timers: list[dict[str, Any]]) -> set[str]:
    """Create `timers` in one batch, cancel the latest `CANCELLED`; return the cancelled ids."""
    async with httpx.AsyncClient(base_url=api, timeout=30) as client:
        answer = await client.post("/v1/timers/batch", json={"timers": timers})
        assert answer.status_code == 200, answer.text
        statuses = Counter(result["status"] for result in answer.json()["results"])
        assert statuses == {201: TIMERS}
        # the latest are due a minute or more from now: still scheduled, not yet claimed
        doomed = [timer["id"] for timer in timers[-CANCELLED:]]
        # 10 at a time: a hundred concurrent requests would need more than redis-py's
        # default pool of 100 connections (a 503 "Too many connections")
        slots = asyncio.Semaphore(10)

        async def cancel(timer_id: str) -> int:
            async with slots:
                return (await client.delete(f"/v1/timers/{timer_id}")).status_code

        assert await asyncio.gather(*map(cancel, doomed)) == [204] * CANCELLED
    return set(doomed)


async def _check_arrivals(receiver: Receiver, expected: set[str]) -> None:
    await receiver.wait_for(len(expected), ARRIVAL_TIMEOUT_S)
    await asyncio.sleep(SETTLE_S)
    arrived = Counter(received.timer_id for received in receiver.received)
    assert set(arrived) == expected, (
        f"missing {sorted(expected - set(arrived))[:10]}, unexpected "
        f"{sorted(str(i) for i in set(arrived) - expected)[:10]}"
    )
    duplicates = {timer_id: n for timer_id, n in arrived.items() if n > 1}
    assert not duplicates
    early = [
        (received.timer_id, received.due_ms - received.at_ms)
        for received in receiver.received
        if received.due_ms is None or received.at_ms < received.due_ms
    ]
    assert not early, f"fired early (timer, ms early): {early[:10]}"


async def _stats(api: str) -> dict[str, int]:
    async with httpx.AsyncClient(base_url=api, timeout=30) as client:
        answer = await client.get("/v1/stats")
    assert answer.status_code == 200, answer.text
    counts: dict[str, int] = answer.json()["counts"]
    return counts


async def test_sqlite_service_survives_a_restart(
    tmp_path: Path, receiver: Receiver, procs: Processes
) -> None:
    args = ["serve", "--port", "0", "--store", f"sqlite:///{tmp_path}/t.db"]
    args.append("--allow-private-targets")
    server = await procs.start(*args)
    timers = _timers(receiver, "sq")
    loop = asyncio.get_running_loop()
    started = loop.time()
    cancelled = await _schedule(server.url, timers)
    expected = {timer["id"] for timer in timers} - cancelled

    # restart half way: timers due while it is down fire on catch-up, late but never early
    await asyncio.sleep(max(0.0, FIRST_DELAY_S + SPREAD_S / 2 - (loop.time() - started)))
    assert 0 < receiver.count < len(expected), "the restart should fall among the arrivals"
    assert await server.stop(signal.SIGTERM) == 0, server.stderr()
    args[2] = server.url.rsplit(":", 1)[1]  # the same port, so the same API URL
    server = await procs.start(*args)

    await _check_arrivals(receiver, expected)
    counts = await _stats(server.url)
    assert counts == {"scheduled": 0, "leased": 0, "paused": 0, "done": len(expected), "dead": 0}
    assert await server.stop(signal.SIGTERM) == 0, server.stderr()


async def test_redis_api_and_two_workers(
    redis_server: RedisServer, receiver: Receiver, procs: Processes
) -> None:
    # a database of its own: the session's Redis is shared with other tests
    store = f"{redis_server.url}/9"
    with redis.Redis(port=redis_server.port, db=9, socket_timeout=5) as client:
        client.flushdb()
    api = await procs.start(
        "serve", "--port", "0", "--store", store, "--no-worker", "--allow-private-targets"
    )
    assert "worker off" in api.first_line
    workers = [
        await procs.start(
            "worker", "--store", store, "--allow-private-targets", "--metrics-port", "0"
        )
        for _ in range(2)
    ]
    timers = _timers(receiver, "rd")
    cancelled = await _schedule(api.url, timers)
    expected = {timer["id"] for timer in timers} - cancelled

    await _check_arrivals(receiver, expected)
    counts = await _stats(api.url)
    assert counts == {"scheduled": 0, "leased": 0, "paused": 0, "done": len(expected), "dead": 0}
    acked = 0.0
    async with httpx.AsyncClient(timeout=30) as client:
        for worker in workers:
            found = re.search(r"metrics (http://\S+)", worker.first_line)
            assert found, worker.first_line
            text = (await client.get(found[1])).text
            assert "tickwheel_in_flight" in text
            # a worker that acked nothing has no labelled sample yet
            pattern = r'^tickwheel_acked_total\{queue="default"\} (\S+)$'
            acked += sum(float(value) for value in re.findall(pattern, text, re.M))
    assert acked == len(expected)
    for process in [api, *workers]:
        assert await process.stop(signal.SIGTERM) == 0, process.stderr()


async def test_readme_session_runs_as_written(
    tmp_path: Path, receiver: Receiver, procs: Processes
) -> None:
    """The README's copy-paste session, on free ports instead of 8080 and 9000."""
    blocks = re.findall(r"```sh\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.DOTALL)
    (session,) = [
        block for block in blocks if block.startswith("curl -X POST localhost:8080/v1/timers")
    ]
    # `make test` provides both; a run without them must say so, not pass in silence
    assert (ROOT / ".venv" / "bin" / "tickwheel").exists(), "run `make setup` first"
    assert shutil.which("curl") is not None, "the session uses curl (`make tools` installs it)"
    server = await procs.start(
        "serve", "--port", "0", "--store", f"sqlite:///{tmp_path}/t.db", "--allow-private-targets"
    )
    api_port = server.url.rsplit(":", 1)[1]
    script = session.replace(":8080", f":{api_port}").replace(":9000", f":{receiver.port}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWHEEL_")}
    shell = await asyncio.create_subprocess_exec(
        "bash", "-euo", "pipefail", "-c", script,
        cwd=ROOT,
        env={**env, "TICKWHEEL_API": server.url},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    async with asyncio.timeout(60):
        output = (await shell.communicate())[0].decode()
    assert shell.returncode == 0, output
    assert "cancelled reminder-1" in output
    assert "replayed broken" in output
    assert re.search(r'tickwheel_acked_total\{queue="default"\} [12]\.0', output), output
    await receiver.wait_for(2, 10)
    assert sorted(received.path for received in receiver.received) == ["/hello", "/orders"]
    assert await server.stop() == 0, server.stderr()


async def test_second_signal_stops_without_waiting_for_callbacks(
    tmp_path: Path, procs: Processes
) -> None:
    async def slow(received: Received) -> Reply:
        await asyncio.sleep(30)
        return Reply()

    async with Receiver(respond=slow) as receiver:
        server = await procs.start(
            "serve",
            "--port",
            "0",
            "--store",
            f"sqlite:///{tmp_path}/t.db",
            "--allow-private-targets",
        )
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            body = {"id": "slow", "delay": 0, "callback": {"url": f"{receiver.url}/slow"}}
            assert (await client.post("/v1/timers", json=body)).status_code == 201
        await receiver.wait_for(1, 15)
        assert server.process is not None
        server.send_signal(signal.SIGTERM)
        await asyncio.sleep(1.0)
        assert server.process.returncode is None, "the first signal waits for the callback"
        started = asyncio.get_running_loop().time()
        assert await server.stop(signal.SIGTERM) == 0, server.stderr()
        assert asyncio.get_running_loop().time() - started < 5
        assert "stopping at once" in server.stderr()
        assert "Traceback" not in server.stderr(), server.stderr()


async def test_a_worker_stops_within_its_grace_and_hands_back_a_hung_callback(
    tmp_path: Path,
) -> None:
    from tickwheel.model import Callback, State, Timer
    from tickwheel.stores.sqlite import SqliteStore

    arrived = asyncio.Event()

    async def hang(received: Received) -> Reply:
        arrived.set()
        await asyncio.sleep(30)
        return Reply()

    url = f"sqlite:///{tmp_path / 'timers.db'}"
    async with Receiver(respond=hang) as receiver, processes(tmp_path) as started:
        store = SqliteStore(tmp_path / "timers.db")
        try:
            timer = await store.add(
                Timer(due_ms=store.now_ms(), callback=Callback(url=f"{receiver.url}/slow"))
            )
            worker = await started.start(
                "worker", "--store", url, "--allow-private-targets", "--grace", "0.5"
            )
            await asyncio.wait_for(arrived.wait(), 15)
            began = asyncio.get_running_loop().time()
            assert await worker.stop() == 0
            assert asyncio.get_running_loop().time() - began < 3  # 0.5 s grace, then out
            stored = await store.get(timer.id)
            assert stored is not None
            assert stored.state is State.SCHEDULED  # handed back, due now: nothing lost
            assert stored.due_ms <= store.now_ms()
        finally:
            await store.close()


async def test_a_plain_serve_fires_a_timer_of_another_queue(
    tmp_path: Path, receiver: Receiver, procs: Processes
) -> None:
    """No --queue: the worker fires every queue, one first seen after it started included."""
    server = await procs.start(
        "serve", "--port", "0", "--store", f"sqlite:///{tmp_path}/t.db", "--allow-private-targets"
    )
    assert "worker on · queues all" in server.first_line
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        for n, queue in enumerate(("emails", "default")):
            body = {
                "id": f"q-{queue}",
                "delay": 0.2,
                "queue": queue,
                "callback": {"url": f"{receiver.url}/{queue}", "body": str(n)},
            }
            answer = await client.post("/v1/timers", json=body)
            assert answer.status_code == 201, answer.text
    await receiver.wait_for(2, 15)
    assert sorted(received.path for received in receiver.received) == ["/default", "/emails"]
    counts = await _stats(server.url)
    assert counts == {"scheduled": 0, "leased": 0, "paused": 0, "done": 2, "dead": 0}
    assert await server.stop(signal.SIGTERM) == 0, server.stderr()
