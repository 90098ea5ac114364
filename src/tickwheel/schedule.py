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

import hashlib
import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tickwheel.errors import InvalidArgument
from tickwheel.model import DEFAULT_RETRY, MAX_ID_CHARS, Callback, RetryPolicy, Timer
from tickwheel.recurrence import Cron, Recurrence, every_seconds, upcoming, zone

MAX_SCHEDULE_ID_CHARS = MAX_ID_CHARS - 16
"""Room for the occurrence's ``:<epoch ms>`` suffix within a timer id."""
MAX_RUNS = 1_000_000_000
MAX_JITTER_S = 3600.0
MAX_CATCH_UP = 100
"""Missed occurrences ``misfire: all`` fires one by one before the rest fold into one."""
DEFAULT_GRACE_MS = 1000
"""How late an occurrence may come up and still count as on time."""
UPCOMING = 5


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
        rule: Recurrence
        if self.cron is not None:
            rule = Cron(self.cron, self.timezone)
        else:
            assert self.every_s is not None
            rule = every_seconds(self.every_s, self.start_ms)
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
        return f"{self.id}:{nominal_ms}"

    def due_ms(self, nominal_ms: int) -> int:
        """The occurrence's due time: its nominal time plus its fixed share of the jitter."""
        if not self.jitter_s:
            return nominal_ms
        digest = hashlib.blake2b(self.occurrence_id(nominal_ms).encode(), digest_size=8).digest()
        return nominal_ms + int.from_bytes(digest, "big") % (round(self.jitter_s * 1000) + 1)

    def occurrence(self, nominal_ms: int) -> Timer:
        """The timer that carries the occurrence at `nominal_ms`: the same every time."""
        return Timer(
            id=self.occurrence_id(nominal_ms),
            due_ms=self.due_ms(nominal_ms),
            queue=self.queue,
            callback=self.callback,
            payload=self.payload,
            retry=self.retry,
        )

    def come_up(
        self, nominal_ms: int, now_ms: int, runs: int, grace_ms: int = DEFAULT_GRACE_MS
    ) -> Turn:
        """Decide the occurrence at `nominal_ms`, coming up at `now_ms` after `runs` fired runs."""
        late = now_ms - self.due_ms(nominal_ms) > grace_ms
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


@dataclass(frozen=True, slots=True)
class Turn:
    """What to do with an occurrence that came up: fire it or not, and the one to create next."""

    fire: bool
    next_ms: int | None


def _check_ms(argument: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgument(argument, f"must be non-negative integer epoch ms, got {value!r}")
