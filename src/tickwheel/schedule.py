"""A durable schedule: a rule (cron or every), a target as a timer has, and what each occurrence
becomes — an ordinary timer whose id is derived from the schedule and the occurrence.

This module decides, purely, what happens to one occurrence when it comes up: whether it fires,
which occurrence follows it, and the timer that carries it. Because the occurrence's id and due
time are functions of the schedule and the nominal time alone (jitter included), creating an
occurrence twice is a no-op in every store: no crash or competing worker can double it.

Misfire, for an occurrence that comes up more than `grace_ms` after its nominal time (the
service was down, or the schedule paused):

- ``skip``: it does not fire; the next occurrence is the first one after now;
- ``once`` (the default): it fires once, late, for all the missed ones; then the first after now;
- ``all``: it fires, and so does each missed one after it, oldest first, up to `MAX_CATCH_UP`
  in a row; past that bound the rest fold into one, as with ``once``.
"""

from __future__ import annotations

import functools
import hashlib
import math
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from tickwheel.errors import InvalidArgument
from tickwheel.model import (
    DEFAULT_RETRY,
    MAX_ID_CHARS,
    Callback,
    RetryPolicy,
    State,
    Timer,
    occurrence_id,
    restore,
)
from tickwheel.recurrence import Cron, Recurrence, every_seconds, upcoming, zone

MAX_SCHEDULE_ID_CHARS = MAX_ID_CHARS - 16
"""Room for the occurrence's ``@<epoch ms>`` suffix within a timer id."""
MAX_RUNS = 1_000_000_000
MAX_JITTER_S = 3600.0
MAX_CATCH_UP = 100
"""Missed occurrences ``misfire: all`` fires one by one before the rest fold into one."""
DEFAULT_GRACE_MS = 1000
"""How late an occurrence may come up and still count as on time."""
UPCOMING = 5
RECENT_RUNS = 10
"""Occurrences a schedule remembers, newest first, for `GET /v1/schedules/{id}/runs`."""


class Misfire(StrEnum):
    """What becomes of occurrences missed while nothing ran."""

    SKIP = "skip"
    ONCE = "once"
    ALL = "all"


@dataclass(frozen=True, slots=True, kw_only=True)
class Schedule:
    """A recurring timer: `cron` (5 fields, or 6 with seconds) in `timezone`, or `every_s`.

    Occurrences run from `start_ms` (for `every`, the first occurrence; for cron, no earlier)
    to `end_ms` (exclusive), `max_runs` at most. `jitter_s` delays each occurrence by a fixed
    pseudo-random amount up to it (never earlier), the same whenever it is computed. Each
    occurrence is a timer of `queue` with the `callback` or `payload` and the `retry` policy.
    """

    id: str
    cron: str | None = None
    every_s: float | None = None
    timezone: str = "UTC"
    start_ms: int
    end_ms: int | None = None
    max_runs: int | None = None
    jitter_s: float = 0.0
    misfire: Misfire = Misfire.ONCE
    queue: str = "default"
    callback: Callback | None = None
    payload: Any = None
    retry: RetryPolicy = DEFAULT_RETRY
    paused: bool = False
    rule: Recurrence = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or len(self.id) > MAX_SCHEDULE_ID_CHARS:
            raise InvalidArgument(
                "id", f"must be a string of at most {MAX_SCHEDULE_ID_CHARS} characters"
            )
        if self.callback is None and self.payload is None:
            raise InvalidArgument(
                "callback", "a schedule needs a callback (HTTP) or a payload (for a consumer)"
            )
        if (self.cron is None) == (self.every_s is None):
            raise InvalidArgument("cron", "give exactly one of cron and every")
        _check_ms("start", self.start_ms)
        if self.end_ms is not None:
            _check_ms("end", self.end_ms)
            if self.end_ms <= self.start_ms:
                raise InvalidArgument("end", "must be after start")
        if self.max_runs is not None and (
            isinstance(self.max_runs, bool)
            or not isinstance(self.max_runs, int)
            or not 1 <= self.max_runs <= MAX_RUNS
        ):
            raise InvalidArgument("max_runs", f"must be an integer from 1 to {MAX_RUNS}")
        if (
            isinstance(self.jitter_s, bool)
            or not isinstance(self.jitter_s, int | float)
            or not math.isfinite(self.jitter_s)
            or not 0 <= self.jitter_s <= MAX_JITTER_S
        ):
            raise InvalidArgument("jitter", f"must be from 0 to {MAX_JITTER_S:g} seconds")
        if not isinstance(self.misfire, Misfire):
            raise InvalidArgument("misfire", f"must be one of {[m.value for m in Misfire]}")
        if not isinstance(self.paused, bool):
            raise InvalidArgument("paused", "must be a bool")
        zone(self.timezone)
        rule = _rule(self.cron, self.every_s, self.timezone, self.start_ms)
        object.__setattr__(self, "rule", rule)
        # the target is checked as a timer would check it, under an occurrence's id
        self.occurrence(self.start_ms)

    def next_after(self, after_ms: int, runs: int = 0) -> int | None:
        """The first occurrence after `after_ms` within start, end and `max_runs` (`runs` so
        far), or None when the schedule has ended."""
        if self.max_runs is not None and runs >= self.max_runs:
            return None
        nominal = self.rule.next_after(max(after_ms, self.start_ms - 1))
        if nominal is None or (self.end_ms is not None and nominal >= self.end_ms):
            return None
        return nominal

    def upcoming(self, after_ms: int, runs: int = 0, count: int = UPCOMING) -> list[int]:
        """The next `count` occurrences after `after_ms`, as `next_after` walks them."""
        found: list[int] = []
        for nominal in upcoming(self.rule, max(after_ms, self.start_ms - 1), count):
            if self.max_runs is not None and runs + len(found) >= self.max_runs:
                break
            if self.end_ms is not None and nominal >= self.end_ms:
                break
            found.append(nominal)
        return found

    def occurrence_id(self, nominal_ms: int) -> str:
        return occurrence_id(self.id, nominal_ms)

    def spec(self) -> tuple[object, ...]:
        """What the caller asked for but `paused`: the same spec makes a create idempotent."""
        return (
            self.cron,
            self.every_s,
            self.timezone,
            self.start_ms,
            self.end_ms,
            self.max_runs,
            self.jitter_s,
            self.misfire,
            self.queue,
            self.callback,
            self.payload,
            self.retry,
        )

    def due_ms(self, nominal_ms: int) -> int:
        """The occurrence's due time: its nominal time plus its fixed share of the jitter."""
        if not self.jitter_s:
            return nominal_ms
        digest = hashlib.blake2b(self.occurrence_id(nominal_ms).encode(), digest_size=8).digest()
        return nominal_ms + int.from_bytes(digest, "big") % (round(self.jitter_s * 1000) + 1)

    def occurrence(self, nominal_ms: int) -> Timer:
        """The timer that carries the occurrence at `nominal_ms`: the same every time."""
        return Timer(**self.occurrence_fields(nominal_ms))

    def occurrence_fields(self, nominal_ms: int) -> dict[str, Any]:
        """What the occurrence's timer asks for: id, due time and the schedule's target."""
        return {
            "id": self.occurrence_id(nominal_ms),
            "due_ms": self.due_ms(nominal_ms),
            "queue": self.queue,
            "callback": self.callback,
            "payload": self.payload,
            "retry": self.retry,
        }

    def come_up(
        self,
        nominal_ms: int,
        now_ms: int,
        runs: int,
        grace_ms: int = DEFAULT_GRACE_MS,
        taken_ms: int | None = None,
    ) -> Turn:
        """Decide the occurrence at `nominal_ms`, coming up at `now_ms` after `runs` fired runs.

        It is late if it was first taken (`taken_ms`, else `now_ms`) more than `grace_ms`
        after its due time.
        """
        taken = now_ms if taken_ms is None else taken_ms
        late = taken - self.due_ms(nominal_ms) > grace_ms
        if not late:
            return Turn(fire=True, next_ms=self.next_after(nominal_ms, runs + 1))
        if self.misfire is Misfire.SKIP:
            return Turn(fire=False, next_ms=self.next_after(now_ms, runs))
        if self.misfire is Misfire.ALL:
            behind = self.upcoming(nominal_ms, runs + 1, MAX_CATCH_UP + 1)
            missed = [ms for ms in behind if ms <= now_ms]
            if len(missed) <= MAX_CATCH_UP:
                return Turn(fire=True, next_ms=self.next_after(nominal_ms, runs + 1))
        return Turn(fire=True, next_ms=self.next_after(now_ms, runs + 1))


def restore_schedule(**values: Any) -> Schedule:
    """Rebuild a schedule a store wrote, from every field but `rule`, without checking it again.

    A worker rebuilds the schedule of each occurrence it claims; the checks (the target's
    URL, the cron fields) cost more than the rest of the step.
    """
    rule = _rule(values["cron"], values["every_s"], values["timezone"], values["start_ms"])
    return restore(Schedule, **values, rule=rule)


def _rule(cron: str | None, every_s: float | None, timezone: str, start_ms: int) -> Recurrence:
    if cron is not None:
        return _cron(cron, timezone)
    assert every_s is not None
    return every_seconds(every_s, start_ms)


@functools.lru_cache(maxsize=1024)
def _cron(expression: str, timezone: str) -> Cron:
    """One `Cron` per rule and zone: it is immutable, and schedules share a few rules."""
    return Cron(expression, timezone)


@dataclass(frozen=True, slots=True)
class Turn:
    """What to do with an occurrence that came up: fire it or not, and the one to create next."""

    fire: bool
    next_ms: int | None


def _check_ms(argument: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgument(argument, f"must be non-negative integer epoch ms, got {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleState:
    """A schedule as a store keeps it: its definition and where its series is.

    `next_ms` is the nominal time of the pending occurrence (the one to come up next; its timer
    exists unless the schedule is paused), None once the schedule has ended. `runs` counts the
    occurrences fired; `recent` holds the latest ones' nominal times, newest first.
    """

    schedule: Schedule
    next_ms: int | None
    runs: int = 0
    recent: tuple[int, ...] = ()
    created_ms: int
    updated_ms: int
    held_to_ms: int | None = None
    """Occurrences up to this nominal time fell due while a worker held the series (it took
    one in time and died before moving on): none of them counts as missed."""

    def upcoming(self, count: int = UPCOMING) -> list[int]:
        """The next `count` nominal times from the pending occurrence on."""
        if self.next_ms is None:
            return []
        rest = self.schedule.upcoming(self.next_ms, self.runs + 1, count - 1)
        return [self.next_ms, *rest]


@dataclass(frozen=True, slots=True)
class Step:
    """A change a store applies atomically: the state to write (None: none), the occurrence
    to create (None: none), and whether the occurrence that came up fires."""

    state: ScheduleState | None
    add: Timer | None = None
    fire: bool = True


def plan_create(schedule: Schedule, now_ms: int) -> Step:
    """A new schedule: its first occurrence is the first from `now_ms` (and from its start).

    A start up to `DEFAULT_GRACE_MS` before `now_ms` is the caller's "now", read a moment
    before the store's: an occurrence at the start itself still comes first.
    """
    after = now_ms - 1
    if now_ms - DEFAULT_GRACE_MS <= schedule.start_ms <= now_ms:
        after = schedule.start_ms - 1
    next_ms = schedule.next_after(after)
    state = ScheduleState(schedule=schedule, next_ms=next_ms, created_ms=now_ms, updated_ms=now_ms)
    return Step(state, _pending(schedule, next_ms))


def plan_advance(
    state: ScheduleState | None, nominal_ms: int, now_ms: int, taken_ms: int | None = None
) -> Step:
    """An occurrence at `nominal_ms`, first claimed at `taken_ms`, is decided at `now_ms`.

    Only the pending occurrence moves the series on. Any other one fires without changing
    anything: it was decided before (its claimer died after recording its successor), or it
    was in flight when its schedule changed or was deleted, and it runs to its end. A paused
    schedule's in-flight occurrence fires and moves the series on, creating no successor.

    One claimed in time but decided late was held by a worker that died before deciding it:
    it fires, and so does each occurrence that fell due meanwhile (`held_to_ms`), as none was
    missed while nothing ran.
    """
    if state is None or state.next_ms != nominal_ms:
        return Step(None)
    schedule = state.schedule
    held_to = state.held_to_ms
    due = schedule.due_ms(nominal_ms)
    if held_to is not None and nominal_ms <= held_to:
        taken_ms = due
    if schedule.paused:
        turn = Turn(fire=True, next_ms=schedule.next_after(nominal_ms, state.runs + 1))
    else:
        turn = schedule.come_up(nominal_ms, now_ms, state.runs, taken_ms=taken_ms)
        # decided late yet fired with its successor already due: a held series catching up,
        # whose next occurrences were held too
        caught_up = turn.next_ms is not None and turn.next_ms <= now_ms
        if turn.fire and caught_up and now_ms - due > DEFAULT_GRACE_MS:
            held_to = max(held_to or 0, now_ms)
    runs, recent = state.runs, state.recent
    if turn.fire:
        runs += 1
        recent = (nominal_ms, *recent[: RECENT_RUNS - 1])
    moved = replace(
        state,
        next_ms=turn.next_ms,
        runs=runs,
        recent=recent,
        updated_ms=now_ms,
        held_to_ms=held_to,
    )
    return Step(moved, _pending(schedule, turn.next_ms), turn.fire)


def plan_update(
    state: ScheduleState, schedule: Schedule, now_ms: int, pending: Timer | None
) -> Step:
    """Replace `state`'s definition by `schedule`, given the pending occurrence's timer.

    A change of `paused` alone keeps the series where it is: pausing cancels the pending
    occurrence, resuming creates it again at its own time, so when that passed while paused
    it comes up late and `misfire` decides. Any other change recomputes the pending occurrence
    as the first after now. The store cancels the old pending timer when it is scheduled; one
    in flight (leased) runs to its end, and the new pending occurrence comes after it.
    """
    in_flight = pending is not None and pending.state is not State.SCHEDULED
    if schedule.spec() == state.schedule.spec():
        next_ms = state.next_ms
    else:
        after = max(now_ms, state.next_ms or 0) if in_flight else now_ms
        next_ms = schedule.next_after(after, state.runs)
    changed = replace(state, schedule=schedule, next_ms=next_ms, updated_ms=now_ms)
    if in_flight and next_ms == state.next_ms:
        return Step(changed)  # its timer exists: it moves the series on when it comes up
    return Step(changed, _pending(schedule, next_ms))


def _pending(schedule: Schedule, next_ms: int | None) -> Timer | None:
    """The timer of the pending occurrence: none while paused or once ended.

    Built without checking it again: the schedule checked its target when it was made (as an
    occurrence's, under the longest id one can have), and a worker builds one per occurrence.
    """
    if schedule.paused or next_ms is None:
        return None
    return restore(
        Timer,
        **schedule.occurrence_fields(next_ms),
        attempt=0,
        state=State.SCHEDULED,
        created_ms=0,
        updated_ms=0,
        last_error=None,
        first_claimed_ms=None,
        trace_parent=None,
        trace_state=None,
    )
