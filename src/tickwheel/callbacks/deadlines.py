"""`Deadlines`: waits of one client that end on shared loop timers, one per step.

A timer per wait (`loop.call_at` when it starts, `cancel` when it ends first) cost about 1.5 µs
of uvloop's, most of it making and dropping a libuv timer: once per callback for its request's
deadline, and again for each wait for a connection slot while the worker is behind. Waits whose
deadlines fall in one `STEP_S` step share one timer instead: it ends those still waiting when it
fires, up to a step after their deadline and never before it; a wait that ends first leaves its
step's set.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import Generic, TypeVar

STEP_S = 0.01
"""Width of a deadline step: how much later than its deadline a wait may end."""

T = TypeVar("T")


class Deadlines(Generic[T]):
    """Waits (requests in flight, waiters for a slot) by the step their deadlines fall in;
    `end` is called on each one still waiting once its step is over."""

    def __init__(self, end: Callable[[T], None]) -> None:
        self._end = end
        self._steps: dict[int, set[T]] = {}

    def add(self, loop: asyncio.AbstractEventLoop, wait: T, deadline: float) -> int:
        """End `wait` at loop time `deadline` (up to `STEP_S` after) unless it is discarded
        first; return its step, to `discard` it by."""
        step = math.ceil(deadline / STEP_S)
        waiting = self._steps.get(step)
        if waiting is None:
            waiting = self._steps[step] = set()
            loop.call_at(step * STEP_S, self._expire, step)
        waiting.add(wait)
        return step

    def discard(self, wait: T, step: int) -> None:
        """Forget `wait`, which ended before its step did."""
        waiting = self._steps.get(step)
        if waiting is not None:
            waiting.discard(wait)

    def _expire(self, step: int) -> None:
        end = self._end
        for wait in self._steps.pop(step, ()):
            end(wait)
