"""`tickwheel serve` on SQLite SIGKILLed while its worker acks a stream of callbacks: the file
read afterwards holds no settle without its attempt and no attempt without its settle."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx
import pytest
from service.e2e_helpers import Processes

from tickwheel.model import State
from tickwheel.stores.sqlite import SqliteStore
from tickwheel.testing.receiver import Receiver

pytestmark = pytest.mark.timeout(90)

TIMERS = 3000


async def test_a_kill_leaves_every_settle_with_its_attempt(
    tmp_path: Path, receiver: Receiver, procs: Processes
) -> None:
    args = ["serve", "--port", "0", "--store", f"sqlite:///{tmp_path}/t.db"]
    server = await procs.start(*args, "--allow-private-targets")
    timers = [
        {"id": f"t{n}", "delay": 0.5 + n / TIMERS * 2, "callback": {"url": f"{receiver.url}/t"}}
        for n in range(TIMERS)
    ]
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        for start in range(0, TIMERS, 1000):
            answer = await client.post("/v1/timers/batch", json={"timers": timers[start:][:1000]})
            assert answer.status_code == 200, answer.text
    await receiver.wait_for(TIMERS // 3, 20)  # about a third fired: acks are in flight
    server.send_signal(signal.SIGKILL)
    assert await server.stop() == -signal.SIGKILL

    store = SqliteStore(tmp_path / "t.db")
    try:
        done = 0
        for n in range(TIMERS):
            timer = await store.get(f"t{n}")
            assert timer is not None
            attempts = await store.attempts(timer.id)
            if timer.state is State.DONE:
                done += 1
                [attempt] = attempts
                assert (attempt.attempt, attempt.outcome, attempt.status) == (1, "ack", 200)
            else:  # not settled: fired or not, nothing is recorded of it
                assert timer.state in (State.SCHEDULED, State.LEASED), timer
                assert attempts == [], timer
        assert 0 < done < TIMERS
    finally:
        await store.close()
