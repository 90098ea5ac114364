"""`MemoryStore`: the reference behaviour of the `Store` protocol, on the core delay heap."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from tickwheel.core import DelayHeap
from tickwheel.errors import CapReached, Closed, LeaseLost, ScheduleExists, TimerExists
from tickwheel.model import State, Timer, occurrence_id, occurrence_of, truncate_error
from tickwheel.schedule import (
    Schedule,
    ScheduleState,
    Step,
    plan_advance,
    plan_create,
    plan_update,
)
from tickwheel.stores.base import (
    ANY_QUEUE,
    Deferral,
    DueQueues,
    Lease,
    Limit,
    LimitPage,
    Page,
    QueueInfo,
    QueueSettings,
    SchedulePage,
    Stats,
    StoreSettings,
    wall_ms,
)
from tickwheel.stores.checks import (
    check_claim,
    check_due,
    check_due_queues,
    check_host,
    check_lease,
    check_list,
    check_list_filters,
    check_queue_limit,
    check_queue_pause,
    check_queue_settings,
    check_timeout,
)
from tickwheel.stores.rebuild import as_scheduled
from tickwheel.stores.wake import Wakeups


class MemoryStore:
    """Timers in this process only: lost on exit. For tests, and as the model the others follow."""

    def __init__(
        self, settings: StoreSettings | None = None, *, clock: Callable[[], int] = wall_ms
    ) -> None:
        self.settings = settings or StoreSettings()
        self._clock = clock
        self._timers: dict[str, Timer] = {}
        self._due: dict[str, DelayHeap[str, None]] = {}
        self._leases: DelayHeap[str, None] = DelayHeap()
        # the same leases by queue, for next_due_ms
        self._queue_leases: dict[str, DelayHeap[str, None]] = {}
        # queue -> a time by which it may hold something to claim (due_queues): lowered by
        # whatever schedules or leases a timer, set right by each claim of the queue
        self._heads: DelayHeap[str, int] = DelayHeap()
        self._wakeups = Wakeups()
        self._expiry: DelayHeap[str, None] = DelayHeap()
        self._schedules: dict[str, ScheduleState] = {}
        self._queue_settings: dict[str, QueueSettings] = {}
        self._limits: dict[str, Limit] = {}
        self._queue_settings_version = 0
        self._limits_version = 0
        self._closed = False

    def now_ms(self) -> int:
        return self._clock()

    async def add(self, timer: Timer, *, replace: bool = False) -> Timer:
        self._open()
        now = self._clock()
        check_due(timer.due_ms, now, self.settings)
        existing = self._live(timer.id, now)
        attempt = deferrals = 0
        if existing is not None:
            if not replace:
                if existing.spec() == timer.spec():
                    return existing
                raise TimerExists(timer.id)
            self._forget(existing)
            # the attempt (the lease token) carries over: a lease on the replaced timer must
            # never match a claim of the new one
            attempt, deferrals = existing.attempt, existing.deferrals
        stored = as_scheduled(timer, now, attempt, deferrals)
        self._schedule(stored)
        return stored

    async def add_many(self, timers: Sequence[Timer], *, replace: bool = False) -> list[Timer]:
        stored = []
        conflicts = []
        for timer in timers:
            try:
                stored.append(await self.add(timer, replace=replace))
            except TimerExists as conflict:
                conflicts.append(conflict)
        if conflicts:
            raise conflicts[0]
        return stored

    async def get(self, timer_id: str) -> Timer | None:
        self._open()
        return self._live(timer_id, self._clock())

    async def cancel(self, timer_id: str) -> bool:
        self._open()
        timer = self._timers.get(timer_id)
        if timer is None or timer.state not in (State.SCHEDULED, State.PAUSED):
            return False
        self._forget(timer)
        return True

    async def reschedule(self, timer_id: str, due_ms: int) -> bool:
        self._open()
        now = self._clock()
        check_due(due_ms, now, self.settings)
        timer = self._timers.get(timer_id)
        if timer is None or timer.state not in (State.SCHEDULED, State.PAUSED):
            return False
        self._timers[timer_id] = timer.evolve(due_ms=due_ms, updated_ms=now, first_claimed_ms=None)
        if timer.state is State.SCHEDULED:  # a paused timer is in no heap until resumed
            self._due[timer.queue].reschedule(timer_id, due_ms)
            self._lower_head(timer.queue, due_ms)
            self._wakeups.notify(timer.queue)
        return True

    async def claim(self, queue: str, horizon_ms: int, limit: int, lease_ms: int) -> list[Lease]:
        self._open()
        check_claim(limit, lease_ms, self.settings)
        self._wakeups.mark(queue)
        now = self._clock()
        for timer_id, _ in self._leases.pop_due(now):
            timer = self._timers[timer_id]
            self._queue_leases[timer.queue].cancel(timer_id)
            self._schedule(timer.evolve(state=State.SCHEDULED, updated_ms=now))
        heap = self._due.get(queue)
        if heap is None:
            return []
        leases = []
        for timer_id, _ in heap.pop_due(horizon_ms, limit):
            timer = self._timers[timer_id]
            leased = timer.evolve(
                state=State.LEASED,
                attempt=timer.attempt + 1,
                updated_ms=now,
                first_claimed_ms=now if timer.first_claimed_ms is None else timer.first_claimed_ms,
            )
            self._timers[timer_id] = leased
            self._lease(leased, now + lease_ms)
            leases.append(Lease(leased, leased.attempt, now + lease_ms))
        self._fix_head(queue)
        return leases

    async def extend(self, lease: Lease, lease_ms: int) -> Lease:
        check_lease(lease_ms)
        timer = self._settle(lease)
        deadline = self._clock() + lease_ms
        self._lease(timer, deadline)
        return Lease(lease.timer, lease.token, deadline)

    async def next_due_ms(self, queue: str) -> int | None:
        self._open()
        self._wakeups.mark(queue)
        return self._next_due(queue)

    async def due_queues(self, horizon_ms: int, limit: int) -> DueQueues:
        self._open()
        check_due_queues(horizon_ms, limit)
        self._wakeups.mark(ANY_QUEUE)
        heads = self._heads
        due = heads.pop_due(horizon_ms, limit)
        next_ms = heads.next_due_ms()
        for queue, at_ms in due:
            heads.push(queue, at_ms, at_ms)
        return DueQueues([queue for queue, _ in due], next_ms)

    async def queues(self) -> list[str]:
        self._open()
        self._wakeups.mark(ANY_QUEUE)
        held = (*self._due.items(), *self._queue_leases.items())
        return sorted({queue for queue, heap in held if heap})

    async def wait(self, queue: str, timeout_s: float) -> bool:
        self._open()
        check_timeout(timeout_s)
        return await self._wakeups.wait(queue, timeout_s)

    async def ack(self, lease: Lease) -> None:
        timer = self._settle(lease)
        now = self._clock()
        self._timers[timer.id] = timer.evolve(state=State.DONE, updated_ms=now)
        self._expiry.push(timer.id, now + self.settings.retention_of(timer.id), None)

    async def ack_many(self, leases: Sequence[Lease]) -> list[bool]:
        acked = []
        for lease in leases:
            try:
                await self.ack(lease)
            except LeaseLost:
                acked.append(False)
            else:
                acked.append(True)
        return acked

    async def retry(self, lease: Lease, due_ms: int, error: str) -> None:
        check_due(due_ms, self._clock(), self.settings)
        timer = self._settle(lease)
        self._schedule(
            timer.evolve(
                state=State.SCHEDULED,
                due_ms=due_ms,
                updated_ms=self._clock(),
                last_error=truncate_error(error),
            )
        )

    async def defer_many(self, deferrals: Sequence[Deferral]) -> list[bool]:
        deferred = []
        for lease, due_ms, reason in deferrals:
            try:
                await self.defer(lease, due_ms, reason)
            except LeaseLost:
                deferred.append(False)
            else:
                deferred.append(True)
        return deferred

    async def defer(self, lease: Lease, due_ms: int, reason: str) -> None:
        check_due(due_ms, self._clock(), self.settings)
        timer = self._settle(lease)
        self._schedule(
            timer.evolve(
                state=State.SCHEDULED,
                due_ms=due_ms,
                updated_ms=self._clock(),
                last_error=truncate_error(reason),
                deferrals=timer.deferrals + 1,
                # no attempt made yet: the run of attempts has not begun
                first_claimed_ms=timer.first_claimed_ms if timer.attempts_spent > 1 else None,
            )
        )

    async def kill(self, lease: Lease, error: str) -> None:
        timer = self._settle(lease)
        self._timers[timer.id] = timer.evolve(
            state=State.DEAD, updated_ms=self._clock(), last_error=truncate_error(error)
        )

    async def replay(self, timer_id: str) -> bool:
        self._open()
        timer = self._timers.get(timer_id)
        if timer is None or timer.state is not State.DEAD:
            return False
        now = self._clock()
        self._schedule(
            timer.evolve(state=State.SCHEDULED, due_ms=now, updated_ms=now, first_claimed_ms=None)
        )
        return True

    async def add_schedule(self, schedule: Schedule) -> ScheduleState:
        self._open()
        existing = self._schedules.get(schedule.id)
        if existing is not None:
            if existing.schedule.spec() == schedule.spec():
                return existing
            raise ScheduleExists(schedule.id)
        if len(self._schedules) >= self.settings.max_schedules:
            raise CapReached("schedules", self.settings.max_schedules, "id")
        now = self._clock()
        step = plan_create(schedule, now)
        if step.add is not None:
            check_due(step.add.due_ms, now, self.settings)
        self._apply(step, now)
        return self._schedules[schedule.id]

    async def get_schedule(self, schedule_id: str) -> ScheduleState | None:
        self._open()
        return self._schedules.get(schedule_id)

    async def list_schedules(self, limit: int = 100, cursor: str | None = None) -> SchedulePage:
        self._open()
        check_list(limit)
        ids = sorted(i for i in self._schedules if cursor is None or i > cursor)
        page = [self._schedules[i] for i in ids[:limit]]
        return SchedulePage(page, ids[limit - 1] if len(ids) > limit else None)

    async def update_schedule(self, schedule: Schedule) -> ScheduleState | None:
        self._open()
        state = self._schedules.get(schedule.id)
        if state is None:
            return None
        now = self._clock()
        pending = self._pending(state, now)
        step = plan_update(state, schedule, now, pending)
        if step.add is not None:
            check_due(step.add.due_ms, now, self.settings)
        if pending is not None and pending.state is State.SCHEDULED:
            self._forget(pending)
        return self._apply(step, now)

    async def delete_schedule(self, schedule_id: str) -> bool:
        self._open()
        state = self._schedules.pop(schedule_id, None)
        if state is None:
            return False
        pending = self._pending(state, self._clock())
        if pending is not None and pending.state is State.SCHEDULED:
            self._forget(pending)
        return True

    async def advance(self, leases: Sequence[Lease]) -> list[bool]:
        self._open()
        now = self._clock()
        fire = []
        for lease in leases:
            occurrence = occurrence_of(lease.timer.id)
            if occurrence is None:
                fire.append(True)
                continue
            timer = self._timers.get(lease.timer.id)
            if timer is None or timer.state is not State.LEASED or timer.attempt != lease.token:
                fire.append(False)  # no longer this lease's: its holder decides
                continue
            schedule_id, nominal_ms = occurrence
            step = plan_advance(
                self._schedules.get(schedule_id), nominal_ms, now, timer.first_claimed_ms
            )
            self._apply(step, now)
            if not step.fire:
                self._forget(timer)
            fire.append(step.fire)
        return fire

    async def pause(self, timer_id: str) -> bool:
        self._open()
        timer = self._timers.get(timer_id)
        if timer is None or timer.state is not State.SCHEDULED or occurrence_of(timer_id):
            return False
        self._due[timer.queue].cancel(timer_id)
        self._timers[timer_id] = timer.evolve(state=State.PAUSED, updated_ms=self._clock())
        return True

    async def resume(self, timer_id: str) -> bool:
        self._open()
        timer = self._timers.get(timer_id)
        if timer is None or timer.state is not State.PAUSED:
            return False
        self._schedule(timer.evolve(state=State.SCHEDULED, updated_ms=self._clock()))
        return True

    async def queue_settings(self) -> dict[str, QueueSettings]:
        self._open()
        return dict(self._queue_settings)

    async def set_queue(self, queue: str, settings: QueueSettings) -> None:
        self._open()
        check_queue_settings(queue, settings)
        self._store_queue(queue, settings)

    async def pause_queue(self, queue: str, paused: bool) -> bool:
        self._open()
        check_queue_pause(queue, paused)
        settings = self._queue_settings.get(queue, QueueSettings())
        self._store_queue(queue, dataclasses.replace(settings, paused=paused))
        return settings.paused != paused

    async def set_queue_limit(self, queue: str, limit: Limit | None) -> bool:
        self._open()
        check_queue_limit(queue, limit)
        settings = self._queue_settings.get(queue, QueueSettings())
        self._store_queue(queue, dataclasses.replace(settings, limit=limit))
        return settings.limit is not None

    async def queue_infos(self) -> list[QueueInfo]:
        self._open()
        self._expire_done(self._clock())
        counts: dict[str, dict[State, int]] = {}
        for timer in self._timers.values():
            per_state = counts.get(timer.queue)
            if per_state is None:
                per_state = counts[timer.queue] = dict.fromkeys(State, 0)
            per_state[timer.state] += 1
        infos = []
        for queue in sorted(counts.keys() | self._queue_settings.keys()):
            heap = self._due.get(queue)
            infos.append(
                QueueInfo(
                    queue,
                    counts.get(queue) or dict.fromkeys(State, 0),
                    None if heap is None else heap.next_due_ms(),
                    self._queue_settings.get(queue, QueueSettings()),
                )
            )
        return infos

    async def limits(self) -> dict[str, Limit]:
        self._open()
        return dict(self._limits)

    async def list_limits(self, limit: int = 100, cursor: str | None = None) -> LimitPage:
        self._open()
        check_list(limit)
        hosts = sorted(h for h in self._limits if cursor is None or h > cursor)
        page = [(host, self._limits[host]) for host in hosts[:limit]]
        return LimitPage(page, hosts[limit - 1] if len(hosts) > limit else None)

    async def set_limit(self, host: str, limit: Limit) -> None:
        self._open()
        check_host(host)
        cap = self.settings.max_limits
        if host not in self._limits and len(self._limits) >= cap:
            raise CapReached("limits", cap, "host")
        self._limits[host] = limit
        self._limits_version += 1

    async def delete_limit(self, host: str) -> bool:
        self._open()
        self._limits_version += 1
        return self._limits.pop(host, None) is not None

    async def settings_versions(self) -> tuple[int, int]:
        self._open()
        return self._queue_settings_version, self._limits_version

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
        self._open()
        check_list(limit)
        check_list_filters(queue, due_from_ms, due_to_ms)
        self._expire_done(self._clock())
        ids = sorted(
            timer_id
            for timer_id, timer in self._timers.items()
            if (cursor is None or timer_id > cursor)
            and (state is None or timer.state is state)
            and (queue is None or timer.queue == queue)
            and (due_from_ms is None or timer.due_ms >= due_from_ms)
            and (due_to_ms is None or timer.due_ms < due_to_ms)
        )
        timers = [self._timers[timer_id] for timer_id in ids[: limit + 1]]
        if len(timers) > limit:
            return Page(timers[:limit], timers[limit - 1].id)
        return Page(timers, None)

    async def stats(self) -> Stats:
        self._open()
        now = self._clock()
        self._expire_done(now)
        counts = dict.fromkeys(State, 0)
        for timer in self._timers.values():
            counts[timer.state] += 1
        dues = [due for heap in self._due.values() if (due := heap.next_due_ms()) is not None]
        return Stats(counts, min(dues, default=None))

    async def close(self) -> None:
        self._closed = True

    def _pending(self, state: ScheduleState, now: int) -> Timer | None:
        if state.next_ms is None:
            return None
        return self._live(occurrence_id(state.schedule.id, state.next_ms), now)

    def _apply(self, step: Step, now: int) -> ScheduleState | None:
        """Write a schedule step: its state, and its new occurrence unless one is pending."""
        if step.add is not None:
            existing = self._live(step.add.id, now)
            if existing is None:
                self._schedule(as_scheduled(step.add, now))
            elif existing.state in (State.DONE, State.DEAD):
                # its attempt carries over, as a replaced timer's does: a lease on the finished
                # timer must never match a claim of the new one
                self._forget(existing)
                self._schedule(as_scheduled(step.add, now, existing.attempt, existing.deferrals))
        if step.state is not None:
            self._schedules[step.state.schedule.id] = step.state
        return step.state

    def _store_queue(self, queue: str, settings: QueueSettings) -> None:
        """Keep `queue`'s settings (forget them when the defaults) and wake its waiters."""
        if settings == QueueSettings():
            self._queue_settings.pop(queue, None)
        else:
            self._queue_settings[queue] = settings
        self._queue_settings_version += 1
        self._wakeups.notify(queue)

    def _schedule(self, timer: Timer) -> None:
        self._timers[timer.id] = timer
        self._due.setdefault(timer.queue, DelayHeap()).push(timer.id, timer.due_ms, None)
        self._lower_head(timer.queue, timer.due_ms)
        self._wakeups.notify(timer.queue)

    def _lease(self, timer: Timer, deadline_ms: int) -> None:
        self._leases.push(timer.id, deadline_ms, None)
        self._queue_leases.setdefault(timer.queue, DelayHeap()).push(timer.id, deadline_ms, None)
        self._lower_head(timer.queue, deadline_ms)

    def _next_due(self, queue: str) -> int | None:
        heaps = (self._due.get(queue), self._queue_leases.get(queue))
        dues = [heap.next_due_ms() for heap in heaps if heap is not None]
        return min((due for due in dues if due is not None), default=None)

    def _lower_head(self, queue: str, at_ms: int) -> None:
        head = self._heads.due_ms(queue)
        if head is None or at_ms < head:
            self._heads.push(queue, at_ms, at_ms)

    def _fix_head(self, queue: str) -> None:
        at_ms = self._next_due(queue)
        if at_ms is None:
            self._heads.cancel(queue)
            self._due.pop(queue, None)  # an empty queue's heap goes with it
        else:
            self._heads.push(queue, at_ms, at_ms)

    def _forget(self, timer: Timer) -> None:
        del self._timers[timer.id]
        if timer.queue in self._due:
            self._due[timer.queue].cancel(timer.id)
        self._unlease(timer)
        self._expiry.cancel(timer.id)

    def _settle(self, lease: Lease) -> Timer:
        self._open()
        timer = self._timers.get(lease.timer.id)
        if timer is None or timer.state is not State.LEASED or timer.attempt != lease.token:
            raise LeaseLost(lease.timer.id, lease.token)
        self._unlease(timer)
        return timer

    def _unlease(self, timer: Timer) -> None:
        self._leases.cancel(timer.id)
        if timer.queue in self._queue_leases:
            self._queue_leases[timer.queue].cancel(timer.id)

    def _live(self, timer_id: str, now: int) -> Timer | None:
        self._expire_done(now)
        return self._timers.get(timer_id)

    def _expire_done(self, now: int) -> None:
        for timer_id, _ in self._expiry.pop_due(now):
            del self._timers[timer_id]

    def _open(self) -> None:
        if self._closed:
            raise Closed("store is closed")
