"""`Deadlines`: the requests of one client time out on shared loop timers, one per step.

A timer per request (`loop.call_at` when it is written, `cancel` when its answer is in) cost
about 1.5 µs of uvloop's a callback, most of it making and dropping a libuv timer. Requests
whose deadlines fall in one `STEP_S` step share one timer instead: it fails those still
running when it fires, up to a step after their deadline and never before it; a request that
ends first leaves its step's set.
"""

from __future__ import annotations

import asyncio
import math
from typing import Protocol

STEP_S = 0.01
"""Width of a deadline step: how much later than its deadline a request may time out."""


class Expiring(Protocol):
    """What `Deadlines` times out: a connection with a request in flight."""

    loop: asyncio.AbstractEventLoop

    def time_out(self) -> None:
        """Fail the request in flight: its deadline has passed."""


class Deadlines:
    """The requests in flight of one client, by the step their deadlines fall in."""

    def __init__(self) -> None:
        self._steps: dict[int, set[Expiring]] = {}

    def add(self, request: Expiring, deadline: float) -> int:
        """Time `request` out at loop time `deadline` (up to `STEP_S` after); return its step,
        to `discard` it by once it has ended."""
        step = math.ceil(deadline / STEP_S)
        running = self._steps.get(step)
        if running is None:
            running = self._steps[step] = set()
            request.loop.call_at(step * STEP_S, self._expire, step)
        running.add(request)
        return step

    def discard(self, request: Expiring, step: int) -> None:
        """Forget `request`, which ended before its step's timer fired."""
        running = self._steps.get(step)
        if running is not None:
            running.discard(request)

    def _expire(self, step: int) -> None:
        for request in self._steps.pop(step, ()):
            request.time_out()
