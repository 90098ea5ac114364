"""Polling for a condition the test cannot await directly (a store's state, another process)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable


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
