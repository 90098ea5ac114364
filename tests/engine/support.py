"""What the engine tests share: the wall clock in ms, polling for a condition, running a worker
for a block."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from tickwheel.engine import Worker


def wall_ms() -> int:
    """The wall clock in epoch ms: the clock of a scripted store that keeps none of its own."""
    return time.time_ns() // 1_000_000


async def until(
    condition: Callable[[], bool | Awaitable[bool]], timeout_s: float = 10.0, every_s: float = 0.01
) -> None:
    """Return once `condition()` holds; raise TimeoutError after `timeout_s`."""
    async with asyncio.timeout(timeout_s):
        while True:
            result = condition()
            if await result if inspect.isawaitable(result) else result:
                return
            await asyncio.sleep(every_s)


@contextlib.asynccontextmanager
async def running(worker: Worker) -> AsyncIterator[asyncio.Task[None]]:
    """Run `worker` for the block, then stop it and wait until it has handed everything back."""
    task = asyncio.create_task(worker.run())
    try:
        yield task
    finally:
        worker.stop()
        async with asyncio.timeout(15):
            await task
