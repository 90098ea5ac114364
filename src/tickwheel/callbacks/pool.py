"""Connection slots, and one origin's pool of connections that earns its slots by answering.

A catch-up burst must not overflow a small receiver's listen backlog, and endpoints that never
answer must not hold every connection: an origin starts with a few slots and earns more only
while it answers promptly, as TCP's slow start opens its window; whether it answers promptly
also decides which other slots it may take (`shares.py`).
"""

from __future__ import annotations

import asyncio
from collections import deque

from tickwheel.callbacks.connection import Connection
from tickwheel.callbacks.deadlines import Deadlines

# an origin starts with this many requests at once and earns more with prompt answers
INITIAL_PER_HOST = 4
# connections to one origin opening at once (until their first answer): a receiver that has not
# accept()ed them yet holds them in a listen queue that may be as short as Python's 5; past it
# the kernel drops handshakes, or with SYN cookies the request itself, and the client waits
# out retransmissions of 1 s, 3 s, 7 s ... for a connection it believes open
OPENING_PER_HOST = 4
# prompt: within twice the origin's fastest response so far, plus this
PROMPT_MARGIN_S = 0.25
PROVEN_WITHIN_S = 2.0
"""An origin is proven prompt while its last answer came within this and none of its requests
has been running longer: only such origins take the connections kept in reserve."""

Origin = tuple[str, str, int]  # scheme, host (IDNA, IPv6 without brackets), port


class PoolTimeout(Exception):
    """No connection slot for the origin came free within `waited_s`."""

    def __init__(self, waited_s: float) -> None:
        super().__init__(f"no free connection within {waited_s:g} s")
        self.waited_s = waited_s


def _end_wait(waiter: asyncio.Future[bool]) -> None:
    if not waiter.done():
        waiter.set_result(False)


class Slots:
    """A counting semaphore that hands a freed slot straight to its first waiter.

    `asyncio.Semaphore` wakes waiters to compete for the count again; direct hand-over costs a
    future per wait and nothing when a slot is free. `free` goes below zero when the count is
    cut while slots are taken: slots given back then pay off the debt first.
    """

    def __init__(self, count: int) -> None:
        self.free = count
        self._waiters: deque[asyncio.Future[bool]] = deque()
        self._deadlines = Deadlines(_end_wait)

    async def take(self, deadline: float) -> bool:
        """Wait for a slot until loop time `deadline` (`Deadlines`: within a step after it);
        True if it is now the caller's.

        Only for when `free` is not positive: a caller takes a free slot itself, without
        a coroutine per slot.
        """
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[bool] = loop.create_future()
        self._waiters.append(waiter)
        step = self._deadlines.add(loop, waiter, deadline)
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled() and waiter.result():
                self.give()  # handed over just as we were cancelled: pass it on
            raise
        finally:
            self._deadlines.discard(waiter, step)

    def give(self) -> None:
        """Free a slot: the first waiter still waiting gets it, unless the count was cut."""
        if self.free >= 0:
            waiters = self._waiters
            while waiters:
                waiter = waiters.popleft()
                if not waiter.done():
                    waiter.set_result(True)
                    return
        self.free += 1


class Pool:
    """One origin's connections, its slots and how many of them it has earned so far.

    The allowed concurrency (`limit`) grows by one for each prompt answer that came back while
    every slot was taken, up to `most`, and halves (to no less than one) on a timeout, a failed
    connect, or a 429 or 503 answer. At most `OPENING_PER_HOST` connections open at once, so a
    slot more is earned only while one of those is free: a server that closes every connection
    keeps a limit it can use.
    """

    def __init__(self, origin: Origin, most: int) -> None:
        self.origin = origin
        self.idle: list[Connection] = []  # most recently used last
        self.live: set[Connection] = set()
        self.users = 0
        self.last_used = 0.0
        self.most = most
        self.limit = min(INITIAL_PER_HOST, most)
        self.fastest_s = float("inf")
        self.slots = Slots(self.limit)
        self.opening = Slots(OPENING_PER_HOST)
        self.proven = False  # its last answer came within PROVEN_WITHIN_S
        self.timed_out = False  # its last request ended in its timeout, unanswered
        self.started: list[float] = []  # loop times its requests in flight began, oldest first

    def prompt(self, now: float) -> bool:
        """Whether the origin answers promptly now: its last answer came within
        `PROVEN_WITHIN_S` and none of its requests has been running longer."""
        started = self.started
        return self.proven and (not started or now - started[0] <= PROVEN_WITHIN_S)

    def probing(self) -> bool:
        """Whether a request now would be the origin's only one in flight, its last one not
        having timed out: a first call, which the last part of an address's share is kept
        for, so that the calls of origins that hang cannot take it."""
        return not self.started and not self.timed_out

    def take_idle(self) -> Connection | None:
        idle = self.idle
        while idle:
            connection = idle.pop()
            if not connection.closed:
                return connection
        return None

    def answered(self, status: int, took_s: float) -> None:
        """Learn from a response that took `took_s`; call while still holding its slot."""
        self.proven = took_s <= PROVEN_WITHIN_S
        self.timed_out = False
        if status in (429, 503):
            self.shrink()
            return
        prompt = took_s <= 2 * self.fastest_s + PROMPT_MARGIN_S
        if took_s < self.fastest_s:
            self.fastest_s = took_s
        # earned only while every slot is taken and one more could open a connection now
        busy = self.slots.free <= 0 and self.opening.free > 0
        if prompt and status < 500 and busy and self.limit < self.most:
            self.limit += 1
            self.slots.give()

    def shrink(self) -> None:
        cut = self.limit - max(1, self.limit // 2)
        self.limit -= cut
        self.slots.free -= cut
