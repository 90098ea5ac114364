"""`Fairness`: the worker's callback slots, shared so that targets that hang cannot take them all.

A callback holds a slot from the moment it is sent until its answer, or its timeout: a target
that accepts connections and never answers holds each slot it gets for the whole timeout. So
callbacks are admitted by what their target (`host[:port]`, its origin) has shown lately:

- *prompt*: it has answered (or failed) within `STUCK_S` a call; only the slots left limit it;
- *new*: it has not answered yet; all new origins together hold at most an eighth of the slots;
- *suspect*: it has calls in flight and has answered none of them for `STUCK_S`; suspect
  origins together start calls only while they hold less than a quarter of the slots, each at most
  `SUSPECT_PER_ORIGIN` at once, and their waiting callbacks go back to the store for a while.

A flood at targets that never answer holds at most three eighths of the slots (a quarter, plus
the new eighth that turns suspect), under the HTTP client's connections at the defaults (512
slots, 256 connections), so a prompt target finds both; a target new to the
worker competes with other new ones turn by turn, and is prompt after its first quick answer.
Waiting callbacks get slots in turns across origins, in order within one.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

STUCK_S = 1.0
"""An origin with calls in flight that has answered none for this long is suspect."""
NEW_SHARE = 8
"""Origins that never answered hold at most 1/NEW_SHARE of the slots together."""
SUSPECT_SHARE = 4
"""Suspect origins start calls only while they hold less than 1/SUSPECT_SHARE of the slots."""
SUSPECT_PER_ORIGIN = 4
"""Calls one suspect origin has in flight at most before it waits."""
RECOUNT_S = 0.05
"""Classes are counted again at most this often (a scan of the origins with calls in flight)."""
MIN_DEFER_S = 1.0
MAX_DEFER_S = 60.0


@dataclass(slots=True)
class _Origin:
    in_flight: int = 0
    busy_since: float = 0.0  # when in_flight last went from 0 to 1
    last_answer: float = -1.0  # when a call last came back within STUCK_S (-1: never)
    waiting: deque[asyncio.Future[None]] = field(default_factory=deque)


class Fairness:
    """Slots for callbacks, `total` at most, admitted by what each origin has shown."""

    def __init__(self, total: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.total = total
        self.used = 0
        self._clock = clock
        self._origins: dict[str, _Origin] = {}
        self._turns: deque[str] = deque()  # origins with waiters, in turn order
        self._new = 0  # calls in flight of new origins, as last counted
        self._suspect = 0  # and of suspect ones
        self._counted_at = -RECOUNT_S
        self._ticking: asyncio.TimerHandle | None = None

    def suspect(self, key: str) -> bool:
        """Whether the origin has calls in flight and has answered none for `STUCK_S`."""
        origin = self._origins.get(key)
        return origin is not None and self._is_suspect(origin, self._clock())

    def defer_s(self, key: str) -> float:
        """How long a callback to a suspect origin should wait in the store: as long as the
        origin has hung so far, within bounds, so a flood comes back ever more rarely."""
        origin = self._origins.get(key)
        if origin is None:
            return MIN_DEFER_S
        hung_s = self._clock() - max(origin.busy_since, origin.last_answer)
        return min(MAX_DEFER_S, max(MIN_DEFER_S, hung_s))

    async def take(self, key: str, patience_s: float) -> bool:
        """Wait for a slot for a call to origin `key`; True once the slot is the caller's (give
        it back with `give`), False once the origin is suspect and has waited `patience_s`:
        the call should rather wait in the store (`defer_s`)."""
        origin = self._origins.get(key)
        if origin is None:
            origin = self._origins[key] = _Origin()
        now = self._clock()
        if not origin.waiting and self._admits(origin, now):
            self._start(origin, now)
            return True
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        if not origin.waiting:
            self._turns.append(key)
        origin.waiting.append(waiter)
        if self._ticking is None:
            # classes change with time alone (a call that hangs makes its origin suspect and
            # frees the new origins' share): look at the waiters again while there are any
            self._ticking = loop.call_later(RECOUNT_S, self._tick)
        try:
            while True:
                await asyncio.wait({waiter}, timeout=patience_s)
                if waiter.done():
                    return True
                if self._is_suspect(origin, self._clock()):
                    return False
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.give(key, self._clock(), answered_promptly=False)  # granted as cancelled
            raise
        finally:
            if not waiter.done():
                waiter.cancel()
                self._forget_waiter(key, origin, waiter)

    def give(self, key: str, started: float, *, answered_promptly: bool) -> None:
        """Give back the slot of a call to `key` started at `started` (clock seconds)."""
        origin = self._origins[key]
        origin.in_flight -= 1
        self.used -= 1
        now = self._clock()
        if answered_promptly and now - started < STUCK_S:
            origin.last_answer = now
        if origin.in_flight == 0 and not origin.waiting and origin.last_answer < 0:
            del self._origins[key]  # a target that never answered keeps no entry when idle
        self._wake(now)

    def _tick(self) -> None:
        self._ticking = None
        self._wake(self._clock())
        if self._turns:
            self._ticking = asyncio.get_running_loop().call_later(RECOUNT_S, self._tick)

    def started(self) -> float:
        """The clock reading to pass to `give` for a call started now."""
        return self._clock()

    def _start(self, origin: _Origin, now: float) -> None:
        if origin.in_flight == 0:
            origin.busy_since = now
        if self._is_suspect(origin, now):
            self._suspect += 1
        elif origin.last_answer < 0:
            self._new += 1
        origin.in_flight += 1
        self.used += 1

    def _is_suspect(self, origin: _Origin, now: float) -> bool:
        return origin.in_flight > 0 and now - max(origin.busy_since, origin.last_answer) > STUCK_S

    def _recount(self, now: float) -> None:
        if now - self._counted_at < RECOUNT_S:
            return
        self._counted_at = now
        new = suspect = 0
        for origin in self._origins.values():
            if self._is_suspect(origin, now):
                suspect += origin.in_flight
            elif origin.last_answer < 0:
                new += origin.in_flight
        self._new, self._suspect = new, suspect

    def _admits(self, origin: _Origin, now: float) -> bool:
        if self.used >= self.total:
            return False
        self._recount(now)
        if self._is_suspect(origin, now):
            return (
                origin.in_flight < SUSPECT_PER_ORIGIN
                and self._suspect < self.total // SUSPECT_SHARE
            )
        if origin.last_answer < 0:
            return self._new < max(1, self.total // NEW_SHARE)
        return True

    def _wake(self, now: float) -> None:
        """Hand free slots to waiters: each origin in turn gives its first waiter one."""
        turns = self._turns
        passed = 0  # origins in a row that could not be admitted: a full round ends the pass
        while turns and self.used < self.total and passed < len(turns):
            key = turns[0]
            origin = self._origins[key]
            if not self._admits(origin, now):
                turns.rotate(-1)
                passed += 1
                continue
            self._start(origin, now)
            origin.waiting.popleft().set_result(None)
            if origin.waiting:
                turns.rotate(-1)
            else:
                turns.popleft()
            passed = 0

    def _forget_waiter(self, key: str, origin: _Origin, waiter: asyncio.Future[None]) -> None:
        try:
            origin.waiting.remove(waiter)
        except ValueError:
            return
        if not origin.waiting:
            self._turns.remove(key)
            if origin.in_flight == 0 and origin.last_answer < 0:
                del self._origins[key]
