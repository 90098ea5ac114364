"""A worker whose host clock runs ahead of Redis still fires nothing early.

A Redis store follows the server's clock. Before its first ``TIME`` it could only guess from
the host's wall clock, and its never-step-back rule then held on to that guess: a worker on a
host 3 s ahead fired timers up to 3 s early. The black-box test runs a real ``tickwheel
worker`` process under ``faketime`` against a real redis-server, and a real HTTP receiver
checks every arrival against its ``Tickwheel-Due`` header by this (unskewed) process's clock.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from engine.support import until

from tickwheel.model import Callback, RetryPolicy, Timer
from tickwheel.stores.redis import RedisStore
from tickwheel.stores.redis.clock import ServerClock
from tickwheel.testing.receiver import Receiver

RedisServer = Any  # the `start_redis` fixture's servers (tests/conftest.py)

FAKETIME = shutil.which("faketime")
SKEW = "+3s"
SKEW_MS = 3000
# libfaketime would also shift the monotonic clock, which asyncio's loop runs on
FAKETIME_ENV = {"FAKETIME_DONT_FAKE_MONOTONIC": "1"}


def server_time_at(epoch_ms: int) -> Callable[[], Any]:
    """A ``TIME`` that answers `epoch_ms`, as (seconds, µs)."""

    async def server_time() -> tuple[int, int]:
        seconds, ms = divmod(epoch_ms, 1000)
        return seconds, ms * 1000

    return server_time


async def test_a_reading_before_the_first_sync_does_not_hold_the_clock_ahead() -> None:
    clock = ServerClock()
    guessed = clock()  # this host's wall clock, here taken to run 3 s ahead of the server
    await clock.sync(server_time_at(guessed - SKEW_MS))
    assert clock() <= guessed - SKEW_MS + 100


async def test_a_synced_clock_still_never_steps_back() -> None:
    clock = ServerClock()
    await clock.sync(server_time_at(time.time_ns() // 1_000_000))
    before = clock()
    await clock.sync(server_time_at(before - SKEW_MS))
    assert clock() >= before


def _skewed(argv: list[str]) -> list[str]:
    assert FAKETIME is not None
    return [FAKETIME, "-f", SKEW, *argv]


def _check_faketime() -> None:
    """Make sure faketime shifts the child's wall clock by `SKEW` and leaves monotonic alone."""
    script = "import time; print(time.time(), time.monotonic())"
    before_wall, before_mono = time.time(), time.monotonic()
    shown = subprocess.run(
        _skewed([sys.executable, "-c", script]),
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
        env={**os.environ, **FAKETIME_ENV},
    ).stdout.split()
    after_wall, after_mono = time.time(), time.monotonic()
    wall, mono = float(shown[0]), float(shown[1])
    assert before_wall + SKEW_MS / 1000 <= wall <= after_wall + SKEW_MS / 1000, (wall, before_wall)
    assert before_mono <= mono <= after_mono, (mono, before_mono)


@pytest.fixture
def skewed_worker() -> Iterator[Callable[[str], subprocess.Popen[str]]]:
    """Start ``tickwheel worker`` processes under faketime; stopped (by process group) after."""
    if FAKETIME is None:
        pytest.skip("faketime is not installed (`make tools` installs it)")
    _check_faketime()
    started: list[subprocess.Popen[str]] = []

    def start(store_url: str) -> subprocess.Popen[str]:
        argv = [sys.executable, "-m", "tickwheel", "worker", "--store", store_url]
        process = subprocess.Popen(
            _skewed([*argv, "--allow-private-targets"]),
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, **FAKETIME_ENV},
            start_new_session=True,  # faketime runs the worker as its child: stop both
        )
        started.append(process)
        assert process.stdout is not None
        assert process.stdout.readline().startswith("tickwheel worker"), "no worker banner"
        return process

    yield start
    for process in started:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


async def test_a_worker_whose_clock_runs_3s_ahead_of_redis_fires_nothing_early(
    start_redis: Callable[..., RedisServer],
    skewed_worker: Callable[[str], subprocess.Popen[str]],
) -> None:
    server = start_redis()
    store = RedisStore.from_url(server.url)
    try:
        await store.sync_clock()
        async with Receiver() as receiver:
            await asyncio.to_thread(skewed_worker, f"{server.url}/0")
            callback = Callback(url=f"{receiver.url}/skewed")
            start_ms = store.now_ms() + 1000
            added = await store.add_many(
                [
                    Timer(due_ms=start_ms + n * 100, callback=callback, retry=RetryPolicy())
                    for n in range(21)
                ]
            )
            ids = {timer.id for timer in added}
            await until(lambda: ids <= {r.timer_id for r in receiver.received}, timeout_s=20)
    finally:
        await store.close()
    early = [
        (r.timer_id, r.due_ms, r.at_ms) for r in receiver.received if r.at_ms < (r.due_ms or 0)
    ]
    assert not early, f"{len(early)} of {len(receiver.received)} arrived early, e.g. {early[:3]}"
    lateness_ms = sorted(r.at_ms - (r.due_ms or 0) for r in receiver.received)
    assert lateness_ms[-1] < 1000, lateness_ms  # on time too, not just never early
