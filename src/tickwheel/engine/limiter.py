"""Flow control in the worker: grants for limited callbacks.

`Controls` (`controls.py`) keeps the store's queue settings and host limits as they change.
`Limiter` makes a callback to a limited host or queue wait for a grant from a token bucket
and a concurrency count (`Limit`), kept by a `Grants`: the store's, shared by every worker on
it, when it keeps them (`Store.limit_grants`), else this process's (`LocalGrants`,
`grants.py`). A `Retry-After` on a 429 or 503 holds the whole host in this worker until it has
passed.

A waiting timer keeps its lease (the dispatcher renews it) while its grant is expected within
`hold_s`; one expected later goes back to the store, due when its turn is expected, so a
backlog for one slow host neither sits in memory nor fills the room other queues need.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from tickwheel.engine.controls import REFRESH_S, Controls
from tickwheel.engine.grants import LocalGrants
from tickwheel.engine.metrics import Metrics
from tickwheel.errors import StoreUnavailable
from tickwheel.model import Callback, Timer
from tickwheel.stores import Store
from tickwheel.stores.base import Limit, QueueSettings
from tickwheel.stores.limit import Ask, Grants
from tickwheel.urls import InvalidUrl, parse_url

logger = logging.getLogger("tickwheel.engine")

HOLD_WAIT_S = 30.0
"""Longest a limited callback waits in the worker holding its lease, renewed meanwhile: each
one sent back to the store instead costs a claim (but no attempt: it is deferred)."""
MAX_HOLD_S = 60.0
"""Longest a `Retry-After` holds a host: one path of a shared host that answers 503 with a
huge `Retry-After` delays the host's other callbacks a minute at most (and then a probe
that meets the 503 again spends that one timer's attempt); its own timer's retry still
honours the header up to its `max_backoff_s`."""
MAX_HELD_HOSTS = 10_000
"""Hosts held for a `Retry-After` at once at most: a flood of hosts cannot grow the table."""
CONCURRENCY_POLL_S = 0.02
"""With shared grants, how often a batch waiting on another worker's concurrency asks again."""
SPARE_S = 0.01
"""With shared grants, how long spare grants serve callbacks arriving after them: a window of
a limit's callbacks may carry this long of its rate more than the bucket allows, and only
while the bucket is over half full."""
CALL_EVERY_S = 0.005
"""With shared grants, the least time between two calls for grants: callbacks that arrive or
finish meanwhile share the next call (one a callback cost a fifth of its CPU at 5,000 a
second), for at most this much more lateness."""
MAX_ASK = 1000
"""Most grants one group asks for in one call (bounds the script's work and arguments)."""
GRANT_MARGIN_S = 10.0
"""A shared concurrency grant outlives its callback's timeout by this, then lapses by itself."""

HOST = "host:"
QUEUE = "queue:"


def host_key(url: Callback | str) -> str | None:
    """Return the limit key of a callback's (or a bare URL's) host: ``host`` or ``host:port``
    when the port is not the scheme's default, lower case, IPv6 in brackets; None if the URL
    cannot be called. A callback's URL is the one it parsed already."""
    try:
        parsed = url.parsed_url if isinstance(url, Callback) else parse_url(url)
    except InvalidUrl:
        return None
    return parsed.host_header.lower()


def _member(timer: Timer) -> str:
    """Name one attempt's concurrency grant: a retry is a new member, a re-sent one the same."""
    return f"{timer.id}#{timer.attempt}"


Running = tuple[tuple[str, str], ...]  # (target key, member) of each concurrency unit held


@dataclass(frozen=True, slots=True)
class Admission:
    """What the limiter decided for one callback: go now, holding the concurrency units
    `running`, or go back to the store due at `defer_ms` (store clock)."""

    running: Running = ()
    defer_ms: int | None = None


GO = Admission()


@dataclass(slots=True)
class _Waiter:
    future: asyncio.Future[Admission]
    member: str
    hold_ms: int


@dataclass(slots=True)
class _Group:
    """Callbacks waiting for grants of the same targets, in arrival (so due) order."""

    keys: tuple[str, ...]
    waiters: deque[_Waiter] = field(default_factory=deque)
    ready_at: float = 0.0  # loop time before which asking again is pointless
    booked: float = 0.0  # loop time up to which turns were booked for callbacks sent back
    spare: int = 0  # shared grants had beforehand, for callbacks arriving until `spare_until`
    spare_until: float = 0.0


class Limiter:
    """Makes callbacks to limited hosts and queues wait for their grants, in due order.

    `targets` is the cheap first step (no limit and no hold: an empty tuple, and the callback
    goes at once); `admit` waits. One pump task asks the grants for every waiting group in one
    call, hands out what it got, and sleeps until a token is due, a callback arrives or one
    finishes (`release`). A group's waiters whose turn is expected more than `hold_s` away go
    back to the store instead (`Admission.defer_ms`). The grants are `shared` ones, kept in
    the store for every worker on it, or without them this process's own (`LocalGrants`),
    taken at once when no one waits.
    """

    def __init__(
        self,
        controls: Controls,
        metrics: Metrics,
        *,
        now_ms: Callable[[], int],
        hold_s: float,
        shared: Grants | None = None,
    ) -> None:
        self._controls = controls
        self._metrics = metrics
        self._now_ms = now_ms
        self._hold_s = hold_s
        self._grants: Grants
        self._local: LocalGrants | None
        if shared is None:
            self._grants = self._local = LocalGrants()
        else:
            self._grants, self._local = shared, None
        self._shared = shared is not None
        self._held_until: dict[str, float] = {}  # host -> loop time (Retry-After)
        self._groups: dict[tuple[str, ...], _Group] = {}
        self._releases: list[tuple[str, str]] = []
        self._wake = asyncio.Event()
        self._pump: asyncio.Task[None] | None = None
        self._last_call = -CALL_EVERY_S
        self._found: dict[tuple[str, ...], Mapping[str, Limit]] = {}
        self._read_hosts: Mapping[str, Limit] = {}
        self._read_queues: Mapping[str, QueueSettings] = {}

    def targets(self, timer: Timer) -> tuple[str, ...]:
        """Return the limit keys `timer`'s callback needs grants from (usually none)."""
        controls = self._controls
        keys: tuple[str, ...] = ()
        if controls.hosts or self._held_until:
            callback = timer.callback
            host = None if callback is None else host_key(callback)
            if host is not None and (host in controls.hosts or host in self._held_until):
                keys = (HOST + host,)
        if controls.queues and controls.queue_limit(timer.queue) is not None:
            keys += (QUEUE + timer.queue,)
        return keys

    def queue_targets(self, queue: str) -> tuple[str, ...]:
        """Return the limit key of `queue` if it has a limit: all a consumer's delivery needs
        (a consumer calls no host)."""
        controls = self._controls
        if controls.queues and controls.queue_limit(queue) is not None:
            return (QUEUE + queue,)
        return ()

    def hold(self, timer: Timer, seconds: float) -> None:
        """Hold every callback to `timer`'s host for `seconds`, at most `MAX_HOLD_S`."""
        callback = timer.callback
        host = None if callback is None else host_key(callback)
        if host is None or not 0 < seconds < math.inf:
            return
        now = asyncio.get_running_loop().time()
        held = self._held_until
        if host not in held and len(held) >= MAX_HELD_HOSTS:
            for name in [name for name, until in held.items() if until <= now]:
                del held[name]
            if len(held) >= MAX_HELD_HOSTS:
                return  # so many hosts asking to wait: their own backoff still applies
        until = now + min(seconds, MAX_HOLD_S)
        if until > held.get(host, 0.0):
            held[host] = until

    def held_s(self, host: str) -> float:
        """How much longer callbacks to `host` are held (0 when they are not)."""
        until = self._held_until.get(host, 0.0)
        return max(0.0, until - asyncio.get_running_loop().time())

    async def admit(self, timer: Timer, keys: tuple[str, ...]) -> Admission:
        """Wait until `timer`'s callback may go, or it is better sent back to the store."""
        loop = asyncio.get_running_loop()
        group = self._groups.get(keys)
        if group is None:
            group = self._groups[keys] = _Group(keys)
        if not group.waiters:
            now = loop.time()
            if self._local is not None:
                admission = self._at_once(keys, timer, now)
            elif group.spare > 0 and group.spare_until > now and not self._held(keys, now):
                group.spare -= 1
                admission = GO
            else:
                admission = None
            if admission is not None:
                self._metrics.observe_limited(timer.queue, 0.0)
                return admission
        hold_ms = round((timer.retry.timeout_s + GRANT_MARGIN_S) * 1000)
        waiter = _Waiter(loop.create_future(), _member(timer), hold_ms)
        group.waiters.append(waiter)
        self._kick()
        since = loop.time()
        admission = await waiter.future
        if admission.defer_ms is None:
            self._metrics.observe_limited(timer.queue, loop.time() - since)
        else:
            self._metrics.limit_deferred[timer.queue] += 1
        return admission

    def _at_once(self, keys: tuple[str, ...], timer: Timer, now: float) -> Admission | None:
        """Grant one callback from local grants now, if it need not wait: no task switch, no
        future, for the common case of a limit that does not bind."""
        assert self._local is not None
        if self._held_until and self._held(keys, now):
            return None
        found = self._limits(keys)
        releases = self._releases
        if releases:
            self._releases = []
        if not self._local.take_one(found, releases):
            return None
        counted = [key for key, limit in found.items() if limit.concurrency]
        if not counted:
            return GO
        member = _member(timer)
        return Admission(running=tuple((key, member) for key in counted))

    def _held(self, keys: tuple[str, ...], now: float) -> bool:
        return self._held_for(keys) > now

    def _held_for(self, keys: tuple[str, ...]) -> float:
        """Until when (loop time) a `Retry-After` holds the host among `keys`, or 0."""
        key = keys[0]
        return self._held_until.get(key[len(HOST) :], 0.0) if key.startswith(HOST) else 0.0

    def release(self, admission: Admission) -> None:
        """Give back the concurrency `admission` held: its callback is over."""
        if not admission.running:
            return
        if self._local is None:
            self._releases.extend(admission.running)
            self._kick()
            return
        # a local count is given back at once; the pump is woken only if someone waits
        self._local.give_back(admission.running)
        if any(group.waiters for group in self._groups.values()):
            self._kick()

    def send_back_all(self) -> None:
        """Send every waiting callback back to the store, due now (it is due already): the
        worker is stopping and should not hold timers that wait for their turn."""
        now_ms = self._now_ms()
        for group in self._groups.values():
            while group.waiters:
                waiter = group.waiters.popleft()
                if not waiter.future.done():
                    waiter.future.set_result(Admission(defer_ms=now_ms))

    async def close(self) -> None:
        """Stop the pump; callbacks still waiting are cancelled with their tasks."""
        pump, self._pump = self._pump, None
        if pump is not None:
            pump.cancel()
            await asyncio.gather(pump, return_exceptions=True)

    def _kick(self) -> None:
        self._wake.set()
        if self._pump is None or self._pump.done():
            self._pump = asyncio.create_task(self._run())

    def _limits(self, keys: tuple[str, ...]) -> Mapping[str, Limit]:
        """The limits `keys` have now (a limit may have been lifted while they waited).

        Kept per `keys` until the controls read other settings (a refresh replaces their
        tables only when something changed), so a callback does not rebuild them."""
        controls = self._controls
        if controls.hosts is not self._read_hosts or controls.queues is not self._read_queues:
            self._read_hosts, self._read_queues = controls.hosts, controls.queues
            self._found.clear()
        found = self._found.get(keys)
        if found is not None:
            return found
        found = {}
        for key in keys:
            if key.startswith(HOST):
                limit = controls.hosts.get(key[len(HOST) :])
            else:
                limit = controls.queue_limit(key[len(QUEUE) :])
            if limit is not None:
                found[key] = limit
        if len(self._found) < MAX_HELD_HOSTS:
            self._found[keys] = found
        return found

    async def _run(self) -> None:
        """Hand out grants while anything waits or has concurrency to give back."""
        loop = asyncio.get_running_loop()
        failures = 0
        while True:
            if self._shared:
                gap = self._last_call + CALL_EVERY_S - loop.time()
                if gap > 0:
                    await asyncio.sleep(gap)
            self._wake.clear()
            now = loop.time()
            for host, until in list(self._held_until.items()):
                if until <= now:
                    del self._held_until[host]
            limits: dict[str, Limit] = {}
            asks: list[Ask] = []
            asking: list[tuple[_Group, Mapping[str, Limit]]] = []
            for keys, group in list(self._groups.items()):
                waiters = group.waiters
                while waiters and waiters[0].future.done():  # its task was cancelled
                    waiters.popleft()
                if not waiters:
                    if group.booked <= now and group.spare_until <= now:
                        del self._groups[keys]
                    continue
                held = self._held_for(keys)
                if held > now:
                    group.ready_at = held
                    self._send_back(group, now, rate=None)
                    continue
                if group.ready_at > now:
                    continue
                found = self._limits(keys)
                if not found:
                    self._grant(group, len(waiters), ())
                    continue
                limits.update(found)
                want = min(len(waiters), MAX_ASK)
                firsts = [waiters[n] for n in range(want)]
                hold_ms = max(waiter.hold_ms for waiter in firsts)
                counted = any(limit.concurrency for limit in found.values())
                members = [w.member for w in firsts] if counted else []
                spare = 0 if counted or not self._shared else want
                asks.append((want, hold_ms, tuple(found), members, spare))
                asking.append((group, found))
            releases, self._releases = self._releases, []
            if asks or releases:
                self._last_call = loop.time()
                try:
                    answers = await self._grants.take(limits, releases, asks)
                    failures = 0
                except Exception as error:
                    # policy: the pump must outlive a failure, or its waiters would wait for
                    # good holding their leases; a surprise is logged, an outage only counted
                    failures += 1
                    self._metrics.store_errors["limit"] += 1
                    if isinstance(error, StoreUnavailable):
                        logger.warning("store unavailable, asking for grants again soon: %s", error)
                    else:
                        logger.exception("asking for grants failed; trying again")
                    self._releases[:0] = releases  # not given back yet
                    await asyncio.sleep(min(1.0, 0.05 * 2**failures))
                    continue
                now = loop.time()
                for (group, found), (granted, wait_ms, spare) in zip(asking, answers, strict=True):
                    running = tuple(key for key, limit in found.items() if limit.concurrency)
                    self._grant(group, granted, running)
                    group.spare, group.spare_until = spare, now + SPARE_S
                    if not group.waiters:
                        continue
                    if wait_ms < 0:  # a full concurrency count: a release wakes a local pump
                        group.ready_at = now + CONCURRENCY_POLL_S if self._shared else 0.0
                    else:
                        group.ready_at = now + max(wait_ms, 1) / 1000
                        rates = [limit.rate for limit in found.values() if limit.rate]
                        self._send_back(group, now, rate=min(rates, default=None))
            elif not self._groups:
                return
            await self._sleep(loop)

    async def _sleep(self, loop: asyncio.AbstractEventLoop) -> None:
        """Sleep until a group may ask again or something changes (an arrival, a release);
        at most `REFRESH_S`, as a raised limit lets waiting callbacks go."""
        now = loop.time()
        timeout = REFRESH_S
        for group in self._groups.values():
            if group.waiters and group.ready_at > now:
                timeout = min(timeout, group.ready_at - now)
        if self._releases and self._shared:
            timeout = min(timeout, CALL_EVERY_S)
        if not any(group.waiters for group in self._groups.values()) and not self._releases:
            timeout = REFRESH_S  # only bookings left: forget them once they are past
        wake = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({wake}, timeout=timeout)
        finally:
            wake.cancel()

    def _grant(self, group: _Group, count: int, running: tuple[str, ...]) -> None:
        waiters = group.waiters
        for _ in range(min(count, len(waiters))):
            waiter = waiters.popleft()
            held = tuple((key, waiter.member) for key in running)
            if waiter.future.done():  # cancelled meanwhile: give its concurrency back
                self._releases.extend(held)
            else:
                waiter.future.set_result(Admission(running=held) if held else GO)

    def _send_back(self, group: _Group, now: float, rate: float | None) -> None:
        """Send back to the store the waiters whose turn is expected beyond `hold_s` from now.

        With a rate the n-th waiter's turn is about n / rate after the group's `ready_at`; the
        waiters on a held host all wait for the hold's end. Each one sent back is booked the
        turn after the last one booked, so they do not all come due together.
        """
        waiters = group.waiters
        step = 0.0 if rate is None else 1 / rate
        horizon = now + self._hold_s
        if group.ready_at > horizon:
            keep = 0
        elif step == 0:
            return
        else:
            keep = int((horizon - group.ready_at) / step) + 1
            if keep >= len(waiters):
                return
        sent = [waiters.pop() for _ in range(len(waiters) - keep)]
        sent.reverse()
        now_ms = self._now_ms()
        base = max(group.booked, group.ready_at + keep * step)
        for n, waiter in enumerate(sent):
            if not waiter.future.done():
                turn_ms = math.ceil((base + n * step - now) * 1000)
                waiter.future.set_result(Admission(defer_ms=now_ms + turn_ms))
        group.booked = base + len(sent) * step


def store_limiter(store: Store, controls: Controls, metrics: Metrics) -> Limiter:
    """A `Limiter` whose grants are the ones `store` keeps for every worker on it, if it keeps
    any (`Store.limit_grants`), else this process's."""
    return Limiter(
        controls, metrics, now_ms=store.now_ms, hold_s=HOLD_WAIT_S, shared=store.limit_grants()
    )
