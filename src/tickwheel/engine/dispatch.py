"""Claim due timers, hold them in a local wheel, hand each over on its due millisecond.

The store decides what is due; the wheel decides when, to the ms. A claim takes what falls due
within a lead (`ClaimLead`: the lookahead, more while claims are slow), so a timer is in hand
before its ms comes; between claims the loop sleeps until the store's next due time, or until
the store says something nearer was added.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable

from tickwheel.engine.claim_lead import ClaimLead
from tickwheel.engine.claim_room import PROBE_CLAIM, ClaimRoom
from tickwheel.engine.controls import Controls
from tickwheel.engine.held import Held, Holding
from tickwheel.engine.look_window import LookWindow
from tickwheel.engine.metrics import Metrics
from tickwheel.engine.renewals import Renewals
from tickwheel.engine.settings import WorkerSettings
from tickwheel.engine.settle import Settler, Throttled, jittered_pause
from tickwheel.engine.store_clock import StoreClock, sync_first, unless_stopping
from tickwheel.errors import StoreUnavailable
from tickwheel.runtime import AsyncScheduler
from tickwheel.stores import Lease, Store
from tickwheel.stores.base import ANY_QUEUE
from tickwheel.stores.checks import MAX_DUE_QUEUES

logger = logging.getLogger("tickwheel.engine")

HAND_BACK_CONCURRENCY = 64
DISCOVER_EVERY_S = 1.0
"""With every queue to serve, the longest wait between two listings of the store's queues."""
DISCOVER_SPACING_S = 0.05
"""The shortest: a change to a queue nobody waits on wakes the listing, at most this often."""
DEFAULT_QUEUE = "default"
MAX_CLAIM_LOOPS = 1024
"""Claim loops at once when serving every queue; past it, due queues take turns."""
DUE_QUEUES_PER_LOOK = 1000
"""Due queues one look at the index asks for beyond those served or paused already."""
FORGET_AFTER_S = 1.0
"""A discovered queue's loop ends when its next due time is this far off."""
REST_LOOK_S = 0.25
"""While hung queues rest, the look for due queues wakes for their turns at most this often."""
HUNG_CLAIM = 4
"""Timers a hung queue's turn claims at most: as many as a suspect target may be sent at once."""


class Dispatcher:
    """Leases due timers of some queues and calls `deliver(held)` on their due ms.

    With `settings.queues` None it serves every queue with due work, however many: the store's
    due-queue index says which, and each gets a claim loop while it has work (up to
    `MAX_CLAIM_LOOPS` at once, then in turns; `_discover_loop`).

    A queue paused in the store is not claimed from: the store's settings are read before the
    first claim and every `REFRESH_S` after (`Controls`), so a pause holds from start and reaches
    a running dispatcher within that; timers already claimed fire. A queue with a rate limit is
    claimed at about its rate (`Controls.claim_bound`), so its backlog waits in the store.

    The owner (a worker or a consumer) gets each timer as a `Held`, fires it, settles it and
    releases it through that. `run` returns after `stop`: unfired timers go back to the store
    at once, timers being delivered get `grace_s` to settle before `abandon` is called and they
    go back too.
    """

    def __init__(
        self,
        store: Store,
        settings: WorkerSettings,
        deliver: Callable[[list[Held]], None],
        *,
        settler: Settler,
        metrics: Metrics,
        throttled: Throttled,
        abandon: Callable[[], None],
    ) -> None:
        self._store = store
        self._settings = settings
        self._deliver = deliver
        self._settler = settler
        self._metrics = metrics
        self._throttled = throttled
        self._abandon = abandon
        self._room = ClaimRoom(settings)
        self._lead = ClaimLead(settings)
        self._holding = Holding(store, settings.lease_ms, settler, metrics, self._room)
        self._held = self._holding.held
        # timers not yet delivered: one wheel entry per due ms (in claim order), not per timer
        self._waiting: dict[int, list[Held]] = {}
        self._renewals = Renewals(
            self._holding, settings.lease_ms, metrics=metrics, throttled=throttled
        )
        self._emptied = self._holding.emptied
        self._stopping = asyncio.Event()
        self._grace = True
        self._scheduler: AsyncScheduler | None = None
        # serving every queue: the claim loop of each queue served, and the due queues in line
        # for a loop (a dict as an ordered set)
        self._serving: dict[str, asyncio.Task[None]] = {}
        self._line: dict[str, None] = {}
        # hung queues due, each with the monotonic time of its turn to be claimed (`ClaimRoom`)
        self._resting: dict[str, float] = {}
        self._window = LookWindow()
        self._paused_of: object = None
        self._paused: set[str] = set()
        self.controls = Controls(store, metrics)

    def hung(self, queue: str, hangs: bool) -> None:
        """Note whether a timer of `queue` last went back unsent because its target hangs
        (True) or was answered (False): it decides the queue's room and line (`ClaimRoom`)."""
        self._room.note(queue, hangs=hangs)

    def paced(self, per_s: float) -> None:
        """Note that the consumer settles `per_s` deliveries a second: its room holds about a
        second of that (`ClaimRoom.pace`), and its lead covers the claims to fill it."""
        self._lead.cover(self._room.pace(per_s, len(self._held)))

    @property
    def stopping(self) -> bool:
        """Whether `stop` was called: nothing is claimed or settled in the background after."""
        return self._stopping.is_set()

    def stop(self, *, grace: bool = True) -> None:
        """Ask `run` to stop claiming, hand back what it holds and return.

        Without `grace`, timers being delivered go back at once instead of after `grace_s`.
        """
        self._grace = grace
        self._stopping.set()

    async def run(self) -> None:
        """Claim and deliver until `stop` (or cancellation), then hand everything back."""
        loops: set[asyncio.Task[None]] = set()
        try:
            loops.add(asyncio.create_task(self.controls.run(self._stopping)))
            await sync_first(self._store, self._stopping, self._metrics, self._throttled)
            # the wheel starts at the store's time: read it only once it is the server's
            self._scheduler = AsyncScheduler(clock=StoreClock(self._store))
            if self._settings.queues is None:
                loops.add(asyncio.create_task(self._discover_loop(loops)))
            else:
                loops |= {asyncio.create_task(self._claim_loop(q)) for q in self._settings.queues}
            loops.add(asyncio.create_task(self._renewals.run(self._stopping)))
            await self._stopping.wait()
        finally:
            # loops are asked to stop, not cancelled: a claim cancelled mid-call may still
            # commit in the store, and its leases would sit unfired until they lapse
            self._stopping.set()
            await asyncio.gather(*loops, return_exceptions=True)
            await self._wind_down()

    async def _wind_down(self) -> None:
        if self._scheduler is not None:
            self._scheduler.close()
        unfired = [held for batch in self._waiting.values() for held in batch if held.active]
        self._waiting.clear()
        await self._bounded(self._hand_back(unfired, due_ms=None), "handing back")
        if self._held and self._grace:
            self._emptied.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._settings.grace_s):
                    await self._emptied.wait()
        if self._held:
            interrupted = list(self._held.values())
            if self._grace:
                logger.warning("grace period over: handing back %d timers", len(interrupted))
            self._abandon()
            await self._bounded(
                self._hand_back(interrupted, due_ms=self._store.now_ms()), "handing back"
            )
        await self._bounded(self._settler.drain(), "acking")

    async def _bounded(self, settling: Awaitable[None], what: str) -> None:
        """Give store work at shutdown `grace_s`, so an unreachable store cannot hold up a stop.

        Nothing is lost when it runs out: the store hands the timers out again once their
        leases lapse.
        """
        task = asyncio.ensure_future(settling)
        done, _ = await asyncio.wait({task}, timeout=self._settings.grace_s)
        if not done:
            task.cancel()
            logger.warning(
                "stopping without finishing %s (store unreachable?): %d timers return when "
                "their leases lapse",
                what,
                len(self._held),
            )

    async def _hand_back(self, timers: Iterable[Held], due_ms: int | None) -> None:
        """Return held timers to the store, unfired ones at their own due time, no backoff."""
        limit = asyncio.Semaphore(HAND_BACK_CONCURRENCY)

        async def one(held: Held) -> None:
            async with limit:
                reason = "handed back by a stopping worker"
                if due_ms is None:  # never fired: no attempt spent
                    await held.defer(held.timer.due_ms, reason)
                else:  # interrupted: it may have been sent
                    await held.retry_at(due_ms, reason)
            held.release()

        await asyncio.gather(*(one(held) for held in timers))

    async def _discover_loop(self, loops: set[asyncio.Task[None]]) -> None:
        """Serve every queue the store's due-queue index lists, each in a claim loop of its own.

        The default queue's loop starts at once and stays. Another queue's loop starts when
        the index lists it as due within the lead, and ends once the queue has nothing due
        within `FORGET_AFTER_S`, or after a hung queue's claim (the index brings it back in
        its turn), so loops follow the queues with work, not every queue ever seen. Past
        `MAX_CLAIM_LOOPS` due queues take turns: a loop that claimed while others wait hands
        its turn on after one claim, and its queue joins the back of the line. A change to a
        queue no loop waits on (a new queue, from this process or another) wakes the look, so
        a new queue's first timer is claimed within tens of ms (while hung queues rest and
        looks find nothing new, within `REST_LOOK_S`); else it looks by the index's next
        head, at least every `DISCOVER_EVERY_S`. Most looks read only the entries that came
        due since the last (`LookWindow`); a hung queue whose turn comes unread is lined up.
        """
        self._serve(DEFAULT_QUEUE, loops)
        failures = 0
        spacing_s = DISCOVER_SPACING_S
        while not self._stopping.is_set():
            paused = self._paused_queues()
            resting = self._resting
            want = min(
                DUE_QUEUES_PER_LOOK + len(self._serving) + len(paused) + len(resting),
                MAX_DUE_QUEUES,
            )
            now_ms = self._store.now_ms()
            since_ms = self._window.since_ms(now_ms, paused)
            try:
                found = await self._store.due_queues(
                    now_ms + self._lead.ms, want, since_ms=since_ms
                )
                failures = 0
                if len(found.queues) == want:
                    self._window.read_all_next()  # cut at its limit: earlier ones may wait
            except StoreUnavailable as error:
                self._window.read_all_next()
                failures += 1
                self._metrics.store_errors["queues"] += 1
                self._throttled.warning(
                    "queues", "store unavailable, looking for due queues again soon: %s", error
                )
                await self._unless_stopping(jittered_pause(failures))
                continue
            except Exception:
                # policy: as in the claim loop, a surprise must not end the discovery
                self._window.read_all_next()
                failures += 1
                self._metrics.store_errors["queues"] += 1
                logger.exception("looking for due queues failed; trying again")
                await self._unless_stopping(jittered_pause(failures))
                continue
            if self._stopping.is_set():
                return  # `run` is gathering the loops: start none it would not wait for
            now_s = time.monotonic()
            found_new = False  # a due queue to serve that is not hung
            for queue in found.queues:
                if queue in self._serving or queue in paused or queue in self._line:
                    continue
                turn_s = resting.pop(queue, None)
                if turn_s is None and self._room.hung(queue):
                    turn_s = self._room.hung_turn()
                if turn_s is not None and turn_s > now_s:
                    resting[queue] = turn_s  # its targets hang: claimed in its turn
                    continue
                self._line[queue] = None
                found_new = found_new or turn_s is None
            if resting and not found_new:
                # nothing new, hung queues resting: their deferrals wake the look in vain,
                # so it looks ever less often, down to its pace for their turns
                spacing_s = min(2 * spacing_s, REST_LOOK_S)
            else:
                spacing_s = DISCOVER_SPACING_S
            for queue in [queue for queue, turn_s in resting.items() if turn_s <= now_s]:
                # not found: emptied meanwhile, or read before the window of this look
                del resting[queue]
                if since_ms is not None:
                    self._line[queue] = None
            self._metrics.queues_resting = len(resting)
            self._start_turns(loops)
            sleep_s = DISCOVER_EVERY_S
            if found.next_ms is not None:
                wake_ms = found.next_ms - self._lead.ms // 2
                sleep_s = min(sleep_s, max(0.0, (wake_ms - self._store.now_ms()) / 1000))
            if resting:
                sleep_s = min(sleep_s, max(REST_LOOK_S, min(resting.values()) - now_s))
            await self._unless_stopping(self._store.wait(ANY_QUEUE, sleep_s))
            await self._unless_stopping(asyncio.sleep(spacing_s))

    def _paused_queues(self) -> set[str]:
        """The queues paused in the settings last read (worked out once per read)."""
        settings = self.controls.queues
        if settings is not self._paused_of:
            self._paused_of = settings
            self._paused = {queue for queue, queued in settings.items() if queued.paused}
        return self._paused

    def _serve(self, queue: str, loops: set[asyncio.Task[None]]) -> None:
        """Start a claim loop for `queue`, kept in `loops` until it ends."""
        task = asyncio.create_task(self._claim_loop(queue, stays=queue == DEFAULT_QUEUE))
        self._serving[queue] = task
        loops.add(task)
        self._metrics.queues_served = len(self._serving)

        def ended(task: asyncio.Task[None]) -> None:
            if self._serving.get(queue) is task:
                del self._serving[queue]
                self._metrics.queues_served = len(self._serving)
            loops.discard(task)
            if not self._stopping.is_set():
                self._start_turns(loops)

        task.add_done_callback(ended)

    def _start_turns(self, loops: set[asyncio.Task[None]]) -> None:
        """Start loops for queues in line, oldest first, while there is room."""
        line = self._line
        while line and len(self._serving) < MAX_CLAIM_LOOPS:
            queue = next(iter(line))
            del line[queue]
            if queue not in self._serving and not self.controls.paused(queue):
                self._serve(queue, loops)
        self._metrics.queues_unserved = len(line)

    def _hand_on(self, queue: str, full: bool) -> bool:
        """Whether `queue`'s loop should end after a claim because other due queues wait for a
        loop. After a `full` claim (more may be due) its queue goes to the back of the line;
        else the due-queue index lists it again when its next timer is due."""
        if not self._line or len(self._serving) < MAX_CLAIM_LOOPS:
            return False
        if full:
            self._line.setdefault(queue, None)
        return True

    async def _claim_loop(self, queue: str, *, stays: bool = True) -> None:
        """Claim `queue` until stopping; unless it `stays`, until it is paused, has nothing
        due soon (`_discover_loop`), or hands its turn on to a queue waiting in line."""
        settings = self._settings
        controls = self.controls
        failures = 0
        while not self._stopping.is_set():
            if not controls.ready.is_set():  # a queue paused before we started stays paused
                await self._unless_stopping(controls.ready.wait())
                continue
            if controls.paused(queue):
                if not stays:
                    return  # the due-queue look starts a loop again once it is resumed
                await self._unless_stopping(controls.changed())
                continue
            room = self._room.room(queue, len(self._held))
            if room <= 0:
                # back-pressure: the worker is full, claim again once some settle
                await self._unless_stopping(self._room.wait(queue))
                continue
            limit = min(settings.batch, room)
            probing = not stays and self._room.probing(queue, len(self._held))
            if probing:
                limit = min(limit, PROBE_CLAIM)  # unknown, in a crowd: a probe of its targets
            elif not stays and self._room.hung(queue):
                limit = min(limit, HUNG_CLAIM)  # a probe of its targets: the rest wait stored
            rate = controls.queue_rate(queue)
            if rate is not None:
                limit = min(limit, controls.claim_bound(queue))
            try:
                # claims in flight at once, in lines: a thousand due queues must not take
                # every store connection at the same instant
                async with self._room.line(queue):
                    # claims that went before while this one waited may have taken the room
                    limit = min(limit, self._room.room(queue, len(self._held)))
                    if limit > 0:
                        horizon_ms = self._store.now_ms() + self._lead.ms
                        began = time.monotonic()
                        leases = await self._store.claim(
                            queue, horizon_ms, limit, settings.lease_ms
                        )
                        self._lead.took(time.monotonic() - began)
                if limit <= 0:
                    continue
                self._room.claimed(queue, leases)
                self._hold(controls.with_defaults(queue, await self._advance(leases)))
                if not stays and self._room.hung(queue):
                    # its targets hang: the due-queue index, which looks at every queue at
                    # once, brings it back when its next timer nears and its turn among hung
                    # queues has come, without a round trip per queue
                    return
                if not stays and self._hand_on(queue, len(leases) == limit):
                    return
                if len(leases) == limit:
                    if probing:
                        # more may be due: claimed once its callbacks tell what its targets do
                        await self._unless_stopping(self._room.verdict(queue))
                        if self._room.hung(queue):
                            return  # the due-queue index brings it back in its turn
                        continue
                    if rate is not None:
                        # a rate-limited queue is claimed at twice its rate at most: a backlog
                        # waits in the store, not in this worker's leases
                        await self._unless_stopping(asyncio.sleep(len(leases) / rate / 2))
                    continue  # there may be more due already
                next_due_ms = await self._store.next_due_ms(queue)
                sleep_s = self._lead.idle_s(next_due_ms, horizon_ms, self._store.now_ms())
                if not stays and sleep_s >= FORGET_AFTER_S:
                    return  # nothing due soon: the due-queue index brings the queue back
                if sleep_s > 0:
                    await self._unless_stopping(self._store.wait(queue, sleep_s))
                failures = 0
            except StoreUnavailable as error:
                failures += 1
                self._metrics.store_errors["claim"] += 1
                self._throttled.warning(
                    "claim", "store unavailable, claiming %s again soon: %s", queue, error
                )
                await self._unless_stopping(jittered_pause(failures))
            except Exception:
                # policy: a bug or a surprise from a store must not silently end the claiming
                failures += 1
                self._metrics.store_errors["claim"] += 1
                logger.exception("claiming %s failed; trying again", queue)
                await self._unless_stopping(jittered_pause(failures))

    async def _advance(self, leases: list[Lease]) -> list[Lease]:
        """Move the schedules of claimed occurrences on; return the leases to fire.

        This must happen before an occurrence fires, and soon: until it does, the series has
        no next occurrence. A store that does not answer is asked again while the leases
        hold; occurrences a misfire policy drops are gone from the store and are not held.
        """
        failures = 0
        while True:
            try:
                fire = await self._store.advance(leases)
                break
            except StoreUnavailable as error:
                failures += 1
                self._metrics.store_errors["advance"] += 1
                self._throttled.warning(
                    "advance", "store unavailable, recording schedules again soon: %s", error
                )
                if self._stopping.is_set():
                    return []  # the leases lapse and the next claim decides them
                await self._unless_stopping(jittered_pause(failures))
        kept = [lease for lease, go in zip(leases, fire, strict=True) if go]
        if len(kept) < len(leases):
            for lease, go in zip(leases, fire, strict=True):
                if not go:
                    self._metrics.skipped[lease.timer.queue] += 1
        return kept

    async def _unless_stopping(self, waiting: Awaitable[object]) -> None:
        await unless_stopping(waiting, self._stopping)

    def _hold(self, leases: list[Lease]) -> None:
        assert self._scheduler is not None
        self._metrics.claimed.observe(len(leases))
        if not leases:
            return
        waiting = self._waiting
        for held in self._holding.hold(leases):
            due_ms = held.lease.timer.due_ms
            batch = waiting.get(due_ms)
            if batch is None:
                batch = waiting[due_ms] = []
                self._scheduler.call_at_ms(due_ms, self._due, due_ms)
            batch.append(held)

    def _due(self, due_ms: int) -> None:
        """Deliver the timers due at `due_ms` that are still held (not lost nor claimed again)."""
        ready = [held for held in self._waiting.pop(due_ms, ()) if held.active]
        if ready:
            self._deliver(ready)
