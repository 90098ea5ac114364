"""`Fairness`: the worker's callback slots, shared so that targets that hang cannot take them all.

A callback holds a slot from the moment it is sent until its answer, or its timeout: a target
that accepts connections and never answers holds each slot it gets for the whole timeout. So a
call is admitted by what its target (`host[:port]`, an *origin*) has shown:

- *prompt*: it has answered before and is not suspect: any free slot is its;
- *new*: it has never answered: one call at a time (a probe), and a host (the origin without
  its port) has at most `total // 4` new or suspect origins at once;
- *suspect*: a probe unanswered for `PROBE_S`, or calls in flight and none answered for
  `STUCK_S`: at most `SUSPECT_PER_ORIGIN` calls, its host's suspect origins `total // 8` calls
  together; its waiting callbacks go back to the store for as long as it has hung.

New and suspect origins together hold at most half of the slots, whatever their number, so a
flood at targets that never answer leaves half to prompt ones. A target new to the worker waits
only while its host already has a quarter of the slots' worth of new or suspect origins, or
while new and suspect calls hold half the slots. Waiting callbacks get slots in turns across
origins, in order within one.

A callback under a rate limit waits for a free slot without taking it (`wait_free`), then for
its grant, then takes the slot (`take_now`): granted first, it would wait here with its grant
and go out with the others granted meanwhile, faster than the limit.
"""

from __future__ import annotations

import asyncio
import math
import time
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

PROBE_S = 1.0
"""A new origin whose first call is unanswered this long is suspect: long enough that a loop
busy for a moment (with the flood itself) does not take a prompt target for a hung one."""
STUCK_S = 2.0
"""An origin with calls in flight that has answered none for this long is suspect."""
SUSPECT_PER_ORIGIN = 4
"""Calls one suspect origin has in flight at most."""
RECOUNT_S = 0.02
"""Classes are counted again at most this often (a scan of the origins with calls in flight),
and waiters looked at again this often while any wait: classes change with time alone."""
SEND_BACK_PER_TICK = 64
"""Waiters sent back to the store at most per look (every `RECOUNT_S`): each wakes a task, and
thousands woken at once (a flood's targets turning suspect together) would run before any
timer falling due meanwhile."""
MIN_DEFER_S = 2.0
MAX_DEFER_S = 60.0


@dataclass(slots=True)
class _Origin:
    host: str
    in_flight: int = 0
    busy_since: float = 0.0  # when in_flight last went from 0 to 1
    last_answer: float = -1.0  # when a call last came back answered (-1: never)
    # each waiter, resolved True with a slot (or, when it takes none, once one is free) or
    # False to go wait in the store; the loop time from which it may give up while its origin
    # is suspect; whether it takes the slot
    waiting: deque[tuple[asyncio.Future[bool], float, bool]] = field(default_factory=deque)


@dataclass(slots=True)
class _Host:
    risky_origins: int = 0  # new or suspect origins with calls in flight
    suspect_calls: int = 0


class Fairness:
    """Slots for callbacks, `total` at most, admitted by what each origin has shown."""

    def __init__(self, total: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.total = total
        self.used = 0
        self._clock = clock
        self._origins: dict[str, _Origin] = {}
        self._turns: deque[str] = deque()  # origins with waiters, in turn order
        self._hosts: dict[str, _Host] = {}  # as last counted, with starts since
        self._risky_calls = 0  # calls of new or suspect origins, as last counted
        self._counted_at = -RECOUNT_S
        self._ticking: asyncio.TimerHandle | None = None

    def come_back_ms(self, key: str, queue: str, now_ms: int) -> int:
        """When a callback to a suspect origin `key` of `queue` should come back from the
        store: after as long as the origin has hung so far (whole seconds, within bounds), so
        a flood comes back ever more rarely; at an instant within twice that which is
        `queue`'s own, so a queue's deferred timers come back together, to one claim, and
        queues one after another, as a trickle rather than a wave."""
        origin = self._origins.get(key)
        hung_s = 0.0
        if origin is not None:
            hung_s = self._clock() - max(origin.busy_since, origin.last_answer)
        period_ms = 1000 * math.ceil(min(MAX_DEFER_S, max(MIN_DEFER_S, hung_s)))
        earliest_ms = now_ms + period_ms
        phase_ms = zlib.crc32(queue.encode()) % period_ms
        return earliest_ms + (phase_ms - earliest_ms) % period_ms

    def answering(self, key: str) -> bool:
        """Whether origin `key` is prompt: it has answered and is not suspect."""
        origin = self._origins.get(key)
        return (
            origin is not None
            and origin.last_answer >= 0
            and not self._is_suspect(origin, self._clock())
        )

    def take_now(self, key: str, *, in_turn: bool = False) -> bool:
        """Take a slot for a call to origin `key` (``host[:port]``) if one is the caller's
        without waiting; True if it is (give it back with `give`). Else `take` waits for one.
        `in_turn`: the caller had its turn (`free_now`, `wait_free`), so waiters of `key`
        queued since do not go first."""
        return self._now(key, take=True, in_turn=in_turn)

    def free_now(self, key: str) -> bool:
        """Whether `take_now` would take a slot for `key` now (taking none)."""
        return self._now(key, take=False, in_turn=False)

    async def take(self, key: str, patience_s: float) -> bool:
        """Wait for a slot for a call to origin `key` (``host[:port]``); True once the slot is
        the caller's (give it back with `give`), False when the origin is suspect and has no
        slot for it now, or turns suspect and has waited `patience_s`: the call should rather
        wait in the store (`defer_s`)."""
        return self.take_now(key) or await self._wait(key, patience_s, take=True)

    async def wait_take(self, key: str, patience_s: float) -> bool:
        """As `take`, for a caller whose `take_now` just said no: it waits at once."""
        return await self._wait(key, patience_s, take=True)

    async def wait_free(self, key: str, patience_s: float) -> bool:
        """As `take`, but taking no slot: True once one is free for `key` in its turn (a
        callback to take it with `take_now` once it holds its grant)."""
        return self.free_now(key) or await self._wait(key, patience_s, take=False)

    def _now(self, key: str, *, take: bool, in_turn: bool) -> bool:
        origin = self._origins.get(key)
        if origin is None:
            origin = self._origins[key] = _Origin(_host_of(key))
        if origin.waiting and not in_turn:
            return False
        now = self._clock()
        suspect = self._is_suspect(origin, now)
        if origin.last_answer >= 0 and not suspect:  # prompt
            if self.used < self.total:  # any free slot is its
                if take:
                    self._occupy(origin, now)
                return True
            return False
        if self._admits(origin, now, suspect):
            if take:
                self._start(origin, now)
            return True
        return False

    async def _wait(self, key: str, patience_s: float, *, take: bool) -> bool:
        origin = self._origins[key]
        now = self._clock()
        if self._is_suspect(origin, now):
            return False  # its calls hang: waiting here would only hold the timer and its lease
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[bool] = loop.create_future()
        if not origin.waiting:
            self._turns.append(key)
        origin.waiting.append((waiter, loop.time() + patience_s, take))
        if self._ticking is None:
            self._ticking = loop.call_later(RECOUNT_S, self._tick)
        try:
            return await waiter
        except asyncio.CancelledError:
            if take and waiter.done() and not waiter.cancelled() and waiter.result():
                self.give(key, self._clock(), answered=False)  # granted as it was cancelled
            raise
        finally:
            if waiter.cancelled():
                self._forget_waiter(key, origin, waiter)

    def started(self) -> float:
        """The clock reading to pass to `give` for a call started now."""
        return self._clock()

    def give(self, key: str, started: float, *, answered: bool) -> None:
        """Give back the slot of a call to `key` started at `started` (clock seconds);
        `answered`: the target responded (any status), rather than the call timing out."""
        origin = self._origins[key]
        now = self._clock()
        if origin.last_answer < 0 or self._is_suspect(origin, now):
            self._counted_at = -RECOUNT_S  # a new or suspect call ends: count them again
        origin.in_flight -= 1
        self.used -= 1
        if answered:
            origin.last_answer = now
        if origin.in_flight == 0 and not origin.waiting and origin.last_answer < 0:
            del self._origins[key]  # a target that never answered keeps no entry when idle
        if self._turns:
            self._wake(now)

    def _tick(self) -> None:
        self._ticking = None
        now = self._clock()
        self._wake(now)
        self._send_to_store(now)
        if self._turns:
            self._ticking = asyncio.get_running_loop().call_later(RECOUNT_S, self._tick)

    def _send_to_store(self, now: float) -> None:
        """Resolve False the waiters of suspect origins that have waited their patience, up to
        `SEND_BACK_PER_TICK`; the rest at the next looks."""
        loop_now = asyncio.get_running_loop().time()
        budget = SEND_BACK_PER_TICK
        for key in list(self._turns):
            origin = self._origins[key]
            if not self._is_suspect(origin, now):
                continue
            waiting = origin.waiting
            while budget and waiting and waiting[0][1] <= loop_now:
                waiter, _, _ = waiting.popleft()
                if not waiter.done():
                    waiter.set_result(False)
                    budget -= 1
            if not waiting:
                self._turns.remove(key)
            if not budget:
                return

    def _start(self, origin: _Origin, now: float) -> None:
        if self._is_suspect(origin, now):
            host = self._host(origin.host)
            host.suspect_calls += 1
            self._risky_calls += 1
        elif origin.last_answer < 0:
            self._host(origin.host).risky_origins += 1
            self._risky_calls += 1
        self._occupy(origin, now)

    def _occupy(self, origin: _Origin, now: float) -> None:
        """Count a call to `origin` started at `now` in its slots and the worker's."""
        if origin.in_flight == 0:
            origin.busy_since = now
        origin.in_flight += 1
        self.used += 1

    def _host(self, name: str) -> _Host:
        host = self._hosts.get(name)
        if host is None:
            host = self._hosts[name] = _Host()
        return host

    def _is_suspect(self, origin: _Origin, now: float) -> bool:
        if origin.in_flight == 0:
            return False
        if origin.last_answer < 0:
            return now - origin.busy_since > PROBE_S
        return now - max(origin.busy_since, origin.last_answer) > STUCK_S

    def _recount(self, now: float) -> None:
        if now - self._counted_at < RECOUNT_S:
            return
        self._counted_at = now
        hosts: dict[str, _Host] = {}
        risky_calls = 0
        for origin in self._origins.values():
            suspect = self._is_suspect(origin, now)
            if not suspect and (origin.in_flight == 0 or origin.last_answer >= 0):
                continue
            host = hosts.get(origin.host)
            if host is None:
                host = hosts[origin.host] = _Host()
            host.risky_origins += 1
            risky_calls += origin.in_flight
            if suspect:
                host.suspect_calls += origin.in_flight
        self._hosts, self._risky_calls = hosts, risky_calls

    def _admits(self, origin: _Origin, now: float, suspect: bool) -> bool:
        if self.used >= self.total:
            return False
        if not suspect and origin.last_answer >= 0:
            return True  # prompt
        self._recount(now)
        if self._risky_calls >= max(1, self.total // 2):
            return False
        host = self._hosts.get(origin.host) or _Host()
        if suspect:
            return origin.in_flight < SUSPECT_PER_ORIGIN and host.suspect_calls < max(
                1, self.total // 8
            )
        return origin.in_flight == 0 and host.risky_origins < max(1, self.total // 4)

    def _wake(self, now: float) -> None:
        """Hand free slots to waiters: each origin in turn gives its first waiter one (a
        waiter that takes none counts as taking one, so a slot freed wakes one waiter)."""
        turns = self._turns
        room = self.total - self.used
        passed = 0  # origins in a row that could not be admitted: a full round ends the pass
        while turns and room > 0 and passed < len(turns):
            key = turns[0]
            origin = self._origins[key]
            waiting = origin.waiting
            while waiting and waiting[0][0].done():  # cancelled, not yet forgotten
                waiting.popleft()
            if not waiting:
                turns.popleft()
                continue
            if not self._admits(origin, now, self._is_suspect(origin, now)):
                turns.rotate(-1)
                passed += 1
                continue
            waiter, _, take = waiting.popleft()
            if take:
                self._start(origin, now)
            room -= 1
            waiter.set_result(True)
            if waiting:
                turns.rotate(-1)
            else:
                turns.popleft()
            passed = 0

    def _forget_waiter(self, key: str, origin: _Origin, waiter: asyncio.Future[bool]) -> None:
        waiting = origin.waiting
        for at, (waiting_one, _, _) in enumerate(waiting):
            if waiting_one is waiter:
                del waiting[at]
                break
        if waiting:
            return
        if key in self._turns:
            self._turns.remove(key)
        if origin.in_flight == 0 and origin.last_answer < 0:
            self._origins.pop(key, None)


def _host_of(key: str) -> str:
    """The host of a ``host[:port]`` key (IPv6 in brackets keeps its colons)."""
    if key.startswith("["):
        return key[: key.find("]") + 1]
    return key.rsplit(":", 1)[0]
