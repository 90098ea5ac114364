"""Leases against a callback that takes long: renewed in steps while the worker lives, lapsing
within one lease period once it dies.

A worker that extended its lease to cover a callback's whole timeout (600 s here) and was then
killed left the timer leased, and so unfired, for those 600 s. Everything here is real: a
redis-server, worker processes (tests/engine/worker_main.py) killed with SIGKILL, and an HTTP
receiver on loopback.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from engine.support import until

from tickwheel.model import Callback, RetryPolicy, State, Timer
from tickwheel.stores.redis import RedisStore
from tickwheel.testing.receiver import Received, Receiver, Reply

RedisServer = Any  # the `start_redis` fixture's servers (tests/conftest.py)

LEASE_MS = 2000
LONG_TIMEOUT = RetryPolicy(max_attempts=3, timeout_s=600)


@pytest.fixture
def redis_url(start_redis: Callable[..., RedisServer]) -> str:
    """A private redis-server, so that the workers see only this test's timers."""
    url: str = start_redis().url
    return url


@pytest.fixture
async def store(redis_url: str) -> AsyncIterator[RedisStore]:
    opened = RedisStore.from_url(redis_url)
    await opened.sync_clock()
    yield opened
    await opened.close()


async def test_a_killed_worker_s_hanging_callback_is_claimable_within_a_lease(
    redis_url: str, store: RedisStore, worker_process: Callable[[str, int], subprocess.Popen[str]]
) -> None:
    answer = asyncio.Event()

    async def never_answer(received: Received) -> Reply:
        await answer.wait()
        return Reply()

    async with Receiver(respond=never_answer) as receiver:
        try:
            callback = Callback(url=f"{receiver.url}/hangs")
            timer = await store.add(
                Timer(due_ms=store.now_ms(), callback=callback, retry=LONG_TIMEOUT)
            )
            worker = worker_process(redis_url, LEASE_MS)
            await until(lambda: receiver.count >= 1, timeout_s=15, every_s=0.005)
            os.kill(worker.pid, signal.SIGKILL)
            worker.wait(timeout=10)
            loop = asyncio.get_running_loop()
            killed = loop.time()

            claimed = []
            while not claimed and loop.time() - killed < LEASE_MS / 1000 + 5:
                await asyncio.sleep(0.05)
                claimed = await store.claim("default", store.now_ms(), 1, 60_000)
            back_after_s = loop.time() - killed
        finally:
            answer.set()
    assert claimed, f"still leased {back_after_s:.1f} s after its worker was killed"
    assert claimed[0].timer.id == timer.id
    assert back_after_s <= LEASE_MS / 1000 + 1, back_after_s


async def test_a_callback_lasting_several_leases_fires_once_while_its_worker_lives(
    redis_url: str, store: RedisStore, worker_process: Callable[[str, int], subprocess.Popen[str]]
) -> None:
    answer_after_s = 3.5 * LEASE_MS / 1000

    async def slow(received: Received) -> Reply:
        await asyncio.sleep(answer_after_s)
        return Reply()

    async with Receiver(respond=slow) as receiver:
        # a second worker claims whatever lease the first lets lapse
        worker_process(redis_url, LEASE_MS)
        worker_process(redis_url, LEASE_MS)
        callback = Callback(url=f"{receiver.url}/slow")
        timer = await store.add(Timer(due_ms=store.now_ms(), callback=callback, retry=LONG_TIMEOUT))

        async def done() -> bool:
            stored = await store.get(timer.id)
            return stored is not None and stored.state is State.DONE

        await until(done, timeout_s=answer_after_s + 10, every_s=0.05)
        await asyncio.sleep(0.5)  # a second firing would show by now
    assert [r.attempt for r in receiver.received] == [1]
