"""The `Store` protocol every timer store implements, and the records it passes around."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from tickwheel.errors import InvalidArgument
from tickwheel.model import State, Timer
from tickwheel.schedule import Schedule, ScheduleState
from tickwheel.stores import attempt_record as history
from tickwheel.stores.attempt_record import Attempt
from tickwheel.stores.limit import MAX_LIMITS, Grants
from tickwheel.stores.limit import Limit as Limit  # re-exported: the protocol speaks of it
from tickwheel.stores.operations import QueueOperations
from tickwheel.stores.queue_defaults import QueueDefaults
from tickwheel.stores.queue_pages import QueuePages

DAY_MS = 86_400_000
HOUR_MS = 3_600_000
ANY_QUEUE = "*"
"""`Store.wait` on this hears of changes to queues no one waits on: a queue that is new, say.
No queue can have this name (queue names are ids)."""


def wall_ms() -> int:
    """The wall clock in epoch ms: the clock of the stores that live on this host."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class Lease:
    """A claimed timer: its holder may fire it until `deadline_ms`, then ack, retry or kill it.

    `token` is the timer's claim count (its `attempt`) after this claim: it only rises, even
    when a claim is deferred, so settling with a stale token raises `LeaseLost` and a worker
    that paused past its deadline cannot undo another's work.
    """

    timer: Timer
    token: int
    deadline_ms: int


_set_timer, _set_token, _set_deadline = (
    getattr(Lease, name).__set__ for name in ("timer", "token", "deadline_ms")
)


Deferral = tuple[Lease, int, str]
"""A lease to hand back unsent, the due time (epoch ms) it goes back to, and why."""


def new_lease(timer: Timer, token: int, deadline_ms: int) -> Lease:
    """`Lease(timer, token, deadline_ms)` at half the cost (slot setters skip the frozen
    ``__setattr__``): a claim builds one per timer."""
    lease = object.__new__(Lease)
    _set_timer(lease, timer)
    _set_token(lease, token)
    _set_deadline(lease, deadline_ms)
    return lease


@dataclass(frozen=True, slots=True)
class Page:
    """One page of `Store.list`; pass `cursor` back for the next, None at the end."""

    timers: list[Timer]
    cursor: str | None


@dataclass(frozen=True, slots=True)
class SchedulePage:
    """One page of `Store.list_schedules`; pass `cursor` back for the next, None at the end."""

    schedules: list[ScheduleState]
    cursor: str | None


@dataclass(frozen=True, slots=True)
class LimitPage:
    """One page of `Store.list_limits`: (host, limit) pairs by host; pass `cursor` back for the
    next, None at the end."""

    limits: list[tuple[str, Limit]]
    cursor: str | None


@dataclass(frozen=True, slots=True)
class Stats:
    """Counts per state and the earliest due time among scheduled timers."""

    counts: dict[State, int] = field(default_factory=dict)
    earliest_due_ms: int | None = None


MAX_SCHEDULES = 100_000
"""Schedules one store holds at most by default: ten times what a big deployment needs."""


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueSettings:
    """What an operator set on a queue: paused (workers claim nothing from it), a limit, and
    the defaults its timers take when they fire."""

    paused: bool = False
    limit: Limit | None = None
    defaults: QueueDefaults | None = None


@dataclass(frozen=True, slots=True)
class QueueInfo:
    """One queue as `Store.queue_infos` sees it: counts per state, the earliest due time among
    its scheduled timers (overdue when before now), and its settings."""

    name: str
    counts: dict[State, int]
    earliest_due_ms: int | None
    settings: QueueSettings


@dataclass(frozen=True, slots=True)
class DueQueues:
    """What `Store.due_queues` found: queues that may hold work to claim, earliest first, and
    the earliest time another queue may (None: no other queue holds anything)."""

    queues: list[str]
    next_ms: int | None


SINCE_EVER_MS = -(1 << 63)
"""The lowest 64-bit integer: `due_queues` in SQL from the first entry on."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreSettings:
    """Limits and policies shared by every store: how long done timers are kept (a schedule's
    done occurrences at most `occurrence_retention_ms`), how many attempts a timer's history
    keeps (0: none) and how long, and caps on what it holds."""

    retention_ms: int = DAY_MS
    max_horizon_ms: int = 10 * 365 * DAY_MS
    max_claim: int = 10_000
    occurrence_retention_ms: int = HOUR_MS
    max_schedules: int = MAX_SCHEDULES
    max_limits: int = MAX_LIMITS
    attempt_history: int = history.DEFAULT_ATTEMPT_HISTORY
    attempt_retention_ms: int = history.DEFAULT_ATTEMPT_RETENTION_MS

    def __post_init__(self) -> None:
        for name in ("retention_ms", "occurrence_retention_ms", "attempt_retention_ms"):
            if getattr(self, name) < 0:
                raise InvalidArgument(name, "must not be negative")
        if not 0 <= self.attempt_history <= history.MAX_ATTEMPT_HISTORY:
            raise InvalidArgument("attempt_history", f"must be 0 to {history.MAX_ATTEMPT_HISTORY}")
        for name in ("max_schedules", "max_limits"):
            if getattr(self, name) < 1:
                raise InvalidArgument(name, "must be at least 1")
        if self.max_horizon_ms <= 0:
            raise InvalidArgument("max_horizon_ms", "must be positive")
        if self.max_claim < 1:
            raise InvalidArgument("max_claim", "must be at least 1")

    def occurrence_retention(self) -> int:
        """How long a schedule's done occurrence is kept, in ms: the shorter retention (a
        schedule firing each second would otherwise keep 86,400 a day)."""
        return min(self.retention_ms, self.occurrence_retention_ms)

    def retention_of(self, timer_id: str) -> int:
        """How long the done timer `timer_id` is kept, in ms (an occurrence's id holds '@')."""
        return self.occurrence_retention() if "@" in timer_id else self.retention_ms


class Store(QueueOperations, QueuePages, history.AttemptHistory, Protocol):
    """Where timers wait until they fire; every method is atomic and safe to call concurrently."""

    settings: StoreSettings
    """Its limits and policies: the engine reads the horizon (how far ahead a retry may go)
    and whether attempts are recorded (`attempt_history` 0: no history kept)."""

    def now_ms(self) -> int:
        """Return the store's clock in epoch ms: the one that decides what is due."""
        ...

    async def add(self, timer: Timer, *, replace: bool = False, due_checked: bool = False) -> Timer:
        """Store a scheduled timer and return it as stored.

        The same id with the same spec returns the stored timer (idempotent); another spec
        raises `TimerExists` unless `replace`. A due time past the store's horizon raises
        `InvalidTimer`, unless the caller says with `due_checked` that it compared it with the
        horizon from a `now_ms()` read before the call (as the API does, naming its field).
        """
        ...

    async def add_many(
        self, timers: Sequence[Timer], *, replace: bool = False, due_checked: bool = False
    ) -> list[Timer]:
        """Add many timers in few round trips or transactions; return them as stored, in order.

        Each timer is added as by `add`; the batch as a whole is not atomic. An id held by a
        timer with another spec raises `TimerExists` once the rest are stored.
        """
        ...

    async def get(self, timer_id: str) -> Timer | None:
        """Return the timer, finished ones included while retained, or None."""
        ...

    async def cancel(self, timer_id: str) -> bool:
        """Delete a scheduled or paused timer; return whether one was there to delete."""
        ...

    async def reschedule(self, timer_id: str, due_ms: int, *, due_checked: bool = False) -> bool:
        """Move a scheduled or paused timer to `due_ms`; return whether it was either.

        A paused timer stays paused (no claim takes it) and fires at `due_ms` once resumed.
        `due_ms` is checked as `add` checks a timer's, and also for being integer epoch ms
        (`due_checked`: the caller checked it whole).
        """
        ...

    async def claim(self, queue: str, horizon_ms: int, limit: int, lease_ms: int) -> list[Lease]:
        """Lease up to `limit` timers of `queue` due by `horizon_ms`, earliest first.

        Expired leases return to scheduled first, so their timers are claimed again with the
        attempt (and token) one higher.
        """
        ...

    async def extend(self, lease: Lease, lease_ms: int) -> Lease:
        """Push the lease deadline to now + `lease_ms`, for a callback still running: the new
        lease (same timer and token); `LeaseLost` if `lease` no longer holds the timer (it
        expired and was reclaimed, or was settled)."""
        ...

    async def extend_many(self, leases: Sequence[Lease], lease_ms: int) -> list[Lease | None]:
        """`extend` many leases in few round trips: per lease, the renewed one, or None if it
        no longer held its timer (nothing changed for it; lost leases raise nothing)."""
        ...

    async def next_due_ms(self, queue: str) -> int | None:
        """Return the earliest time `claim(queue, ...)` could return something, or None.

        That is the earlier of the queue's earliest scheduled due time and the earliest lease
        deadline among its leased timers (an expired lease comes back). An index probe.
        """
        ...

    async def queues(self) -> list[str]:
        """Return the queues that hold scheduled or leased timers, sorted.

        A worker asks it to find the queues it should claim from. A queue whose last timer
        was just settled or cancelled may still be listed for a moment (Redis keeps it while
        a stale entry of a cancelled timer due more than an hour ahead remains in its wheel).
        """
        ...

    async def due_queues(
        self, horizon_ms: int, limit: int, *, since_ms: int | None = None
    ) -> DueQueues:
        """Return up to `limit` queues that may hold a timer to claim by `horizon_ms`, earliest
        first, read from an index of queues by their earliest due time or lease deadline.
        With `since_ms`, queues whose entry is earlier may be left out: a cheaper look for a
        caller that has seen those before.

        The index never runs late: a queue whose claim by `horizon_ms` would take something
        is listed (or `limit` earlier ones are). It may run early: a queue whose timers were
        cancelled or leases renewed may be listed until a `claim` of it sets its entry right;
        a queue that holds nothing drops out then. Like `queues()`, it marks `ANY_QUEUE`
        for `wait`. The cost grows with `limit`, not with the number of queues.
        """
        ...

    async def wait(self, queue: str, timeout_s: float) -> bool:
        """Block until something may have made `next_due_ms(queue)` earlier, or `timeout_s`.

        Returns True after an add, reschedule, retry or replay into `queue` since the call
        began, or since the last `next_due_ms(queue)` or `claim(queue, ...)` on this store
        began if that was earlier (so nothing slips in between a look at the queue and the
        wait), from this process and from others where the store can tell; False on timeout.
        A store may skip a change that cannot bring the next due time forward (Redis wakes
        only for a timer that becomes the earliest of its queue in its shard). A True may be
        spurious; the caller just claims again.

        `queue` may be `ANY_QUEUE`: then a change to any queue that no task waits on wakes it,
        counted since the last `queues()` began, so a worker hears of a queue that appears.
        """
        ...

    async def ack(self, lease: Lease, attempt: Attempt | None = None) -> None:
        """Mark the leased timer done (kept for the retention period), recording `attempt`."""
        ...

    async def ack_many(
        self, leases: Sequence[Lease], attempts: Sequence[Attempt | None] = ()
    ) -> list[bool]:
        """Ack many leases in few round trips or transactions (`attempts`: one per lease, or none).

        Returns, per lease in order, True if acked, False if its lease was lost (nothing
        changed for that one); lost leases raise nothing.
        """
        ...

    async def retry(
        self, lease: Lease, due_ms: int, error: str, attempt: Attempt | None = None
    ) -> None:
        """Return the leased timer to scheduled at `due_ms`, recording `error` and `attempt`."""
        ...

    async def defer(self, lease: Lease, due_ms: int, reason: str) -> None:
        """Hand the leased timer back unsent, scheduled at `due_ms`, without spending an attempt.

        As `retry` (recording `reason`), but the timer's `deferrals` rises by one with its
        `attempt`, so `attempts_spent` is what it was before the claim. `attempt` itself, the
        lease token, never goes down: a lease from before the deferral never matches a later
        claim. A timer with no attempt spent yet loses its `first_claimed_ms`: its run of
        attempts (which `RetryPolicy.max_retry_s` bounds) has not begun. A defer sent again
        after its reply was lost reports its landing as success.
        """
        ...

    async def defer_many(self, deferrals: Sequence[Deferral]) -> list[bool]:
        """`defer` many leases in few round trips or transactions, each `(lease, due_ms,
        reason)`.

        Returns, per deferral in order, True if deferred, False if its lease was lost (nothing
        changed for that one); lost leases raise nothing.
        """
        ...

    async def kill(self, lease: Lease, error: str, attempt: Attempt | None = None) -> None:
        """Move the leased timer to the dead letters, recording `error` and `attempt`."""
        ...

    async def replay(self, timer_id: str) -> bool:
        """Schedule a dead timer again, due now; return whether it was dead."""
        ...

    async def add_schedule(self, schedule: Schedule) -> ScheduleState:
        """Store a schedule and, in the same atomic step, its first occurrence's timer.

        The same id with the same spec returns the stored schedule, paused or not
        (idempotent); another spec raises `ScheduleExists`. A new one raises `CapReached`
        when the store holds `settings.max_schedules` (on Redis, concurrent adds in different
        shards may pass the cap by as many as there are).
        """
        ...

    async def get_schedule(self, schedule_id: str) -> ScheduleState | None:
        """Return the schedule, or None."""
        ...

    async def list_schedules(self, limit: int = 100, cursor: str | None = None) -> SchedulePage:
        """Return a page of schedules; following `cursor` to the end returns each once (by id
        on memory and SQLite, shard by shard on Redis)."""
        ...

    async def update_schedule(self, schedule: Schedule) -> ScheduleState | None:
        """Replace the definition of the schedule `schedule.id` and move its pending occurrence
        as `schedule.plan_update` says, atomically; None if there is no such schedule.

        Pause and resume are updates of `paused`.
        """
        ...

    async def delete_schedule(self, schedule_id: str) -> bool:
        """Delete a schedule and cancel its pending occurrence unless in flight; return whether
        it existed."""
        ...

    async def advance(self, leases: Sequence[Lease]) -> list[bool]:
        """Move the series of every claimed occurrence among `leases` on; say which to fire.

        For each pending occurrence, atomically with recording its schedule's progress, the
        next occurrence's timer is created, or (misfire ``skip``) the occurrence is deleted and
        False returned for it. Leases of other timers return True and change nothing. Called by
        whoever holds the leases, before firing: a claimer that dies before it leaves the
        occurrence pending, to be decided by the next claim; one that dies after has recorded
        the successor, and the reclaimed occurrence just fires.
        """
        ...

    async def pause(self, timer_id: str) -> bool:
        """Stop a scheduled timer from firing, keeping its id, attempt and history; return
        whether it was scheduled (a leased, paused or finished one is left as it is, and so is
        a schedule's occurrence, which its schedule owns)."""
        ...

    async def resume(self, timer_id: str) -> bool:
        """Schedule a paused timer again at its own due time (claimable at once if that has
        passed); return whether it was paused."""
        ...

    async def queue_settings(self) -> dict[str, QueueSettings]:
        """Return the settings of every queue that has any (paused or limited), by name."""
        ...

    async def set_queue(self, queue: str, settings: QueueSettings) -> None:
        """Store `queue`'s settings; the default `QueueSettings()` removes them. Waiters on
        the queue (`wait`) are woken, so a worker sees a resume at once."""
        ...

    async def pause_queue(self, queue: str, paused: bool) -> bool:
        """Pause or resume `queue` alone, atomically, leaving its limit as it is; return
        whether that changed it. Waiters on the queue are woken, as by `set_queue`."""
        ...

    async def set_queue_limit(self, queue: str, limit: Limit | None) -> bool:
        """Set (None: remove) `queue`'s limit alone, atomically, leaving its pause as it is;
        return whether it had a limit before. Waiters on the queue are woken."""
        ...

    async def queue_infos(self) -> list[QueueInfo]:
        """Return every queue that holds timers in any state or has settings, sorted by name."""
        ...

    async def limits(self) -> dict[str, Limit]:
        """Return the limit of every callback host that has one (``host`` or ``host:port``)."""
        ...

    async def list_limits(self, limit: int = 100, cursor: str | None = None) -> LimitPage:
        """Return a page of host limits by host, reading no more than the page; following
        `cursor` to the end returns each host once."""
        ...

    async def set_limit(self, host: str, limit: Limit) -> None:
        """Store the limit on callbacks to `host`, replacing any it had.

        Raises:
            CapReached: `host` has no limit and the store holds `settings.max_limits`.
        """
        ...

    async def delete_limit(self, host: str) -> bool:
        """Remove `host`'s limit; return whether it had one."""
        ...

    def limit_grants(self) -> Grants | None:
        """Return the grants of limited callbacks kept in the store, shared by every worker on
        it (Redis), or None: then each worker keeps its own."""
        ...

    async def sync_clock(self) -> None:
        """Measure the store's clock now, if it follows a server's (Redis), so that a worker
        trusts it before its first claim; raises `StoreUnavailable` if the server is down.
        A store on this host's clock has nothing to measure."""
        ...

    async def settings_versions(self) -> tuple[int, int]:
        """Return the versions of the queue settings and of the host limits: each changes with
        every write of its table, atomically with it (and may change with none), so a worker
        asks this each second and reads a table again only when its version moved."""
        ...

    async def list(
        self,
        state: State | None = None,
        limit: int = 100,
        cursor: str | None = None,
        *,
        queue: str | None = None,
        due_from_ms: int | None = None,
        due_to_ms: int | None = None,
    ) -> Page:
        """Return a page of timers, filtered by state, queue and due time (from inclusive, to
        exclusive); following `cursor` to the end returns every matching timer once. The order
        is the store's: memory and SQLite by id (creation order for generated ids), Redis shard
        by shard (an index by id would cost it memory for every pending timer)."""
        ...

    async def stats(self) -> Stats:
        """Count timers per state and find the earliest due one."""
        ...

    async def close(self) -> None:
        """Release connections and files; idempotent."""
        ...
