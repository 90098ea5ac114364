"""The JSON bodies of the schedule routes: a schedule to create or change, and a schedule and
its runs as the API shows them.

The fields mirror a timer's: times as RFC 3339 with an offset or epoch seconds, durations in
seconds, the same `callback`, `payload` and `retry`. Each error names the request's field.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any
from urllib.parse import quote

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, JsonValue, WithJsonSchema

from tickwheel.errors import InvalidArgument
from tickwheel.model import DEFAULT_RETRY, State, Timer
from tickwheel.recurrence import MAX_CRON_CHARS, MAX_EVERY_MS, MIN_EVERY_MS, zone
from tickwheel.schedule import (
    MAX_JITTER_S,
    MAX_RUNS,
    MAX_SCHEDULE_ID_CHARS,
    UPCOMING,
    Misfire,
    Schedule,
    ScheduleState,
)
from tickwheel.service.schemas import (
    MAX_EPOCH_S,
    QUEUE_PATTERN,
    CallbackIn,
    CallbackOut,
    Json,
    RetryIn,
    RetryOut,
    epoch_ms,
    format_ms,
)
from tickwheel.stores.base import StoreSettings

SCHEDULE_ID_PATTERN = rf"^[A-Za-z0-9._:-]{{1,{MAX_SCHEDULE_ID_CHARS}}}$"
"""A timer id's alphabet, shorter: an occurrence's id adds ``@<epoch ms>`` to it."""
MAX_ZONE_CHARS = 64
MIN_EVERY_S = MIN_EVERY_MS / 1000
MAX_EVERY_S = MAX_EVERY_MS / 1000
MAX_START_AHEAD_MS = StoreSettings().max_horizon_ms
"""How far ahead a schedule may start: a store's horizon, which its first occurrence must meet."""


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid")


TimeMs = Annotated[
    int,
    BeforeValidator(epoch_ms),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "format": "date-time"},
                {"type": "number", "minimum": 0, "maximum": MAX_EPOCH_S},
            ],
            "description": "RFC 3339 with an offset, or epoch seconds",
        }
    ),
]
CronText = Annotated[
    str,
    Field(
        strict=True,
        min_length=1,
        max_length=MAX_CRON_CHARS,
        description="5 fields (minute hour day month weekday), or 6 with seconds first; "
        "read as wall times in `timezone`",
    ),
]
EverySeconds = Annotated[
    float,
    Field(
        strict=True,
        ge=MIN_EVERY_S,
        le=MAX_EVERY_S,
        allow_inf_nan=False,
        description="seconds between occurrences, counted from `start`",
    ),
]
Zone = Annotated[
    str,
    Field(
        strict=True,
        min_length=1,
        max_length=MAX_ZONE_CHARS,
        description="the IANA time zone cron fields are read in, e.g. Europe/Berlin",
    ),
]
MaxRuns = Annotated[
    int, Field(strict=True, ge=1, le=MAX_RUNS, description="stop after this many runs")
]
Jitter = Annotated[
    float,
    Field(
        strict=True,
        ge=0,
        le=MAX_JITTER_S,
        allow_inf_nan=False,
        description="delay each occurrence by a fixed pseudo-random share of this many seconds",
    ),
]
MISFIRE_DESCRIPTION = """What becomes of occurrences missed while nothing ran (or while paused):
`skip` drops them, `once` fires one late run for all of them, `all` fires each (at most 100)."""


class ScheduleIn(_Input):
    """A schedule to create: a rule (`cron` or `every`), and a target as a timer has."""

    id: Annotated[str | None, Field(strict=True, pattern=SCHEDULE_ID_PATTERN)] = None
    cron: CronText | None = None
    every: EverySeconds | None = None
    timezone: Zone = "UTC"
    start: Annotated[
        TimeMs | None,
        Field(
            description="no occurrence before it; with `every`, the first occurrence. Default "
            "now, or with `every` one interval from now; at most 10 years ahead"
        ),
    ] = None
    end: Annotated[TimeMs | None, Field(description="no occurrence from it on")] = None
    max_runs: MaxRuns | None = None
    jitter: Jitter = 0.0
    misfire: Annotated[Misfire, Field(description=MISFIRE_DESCRIPTION)] = Misfire.ONCE
    queue: Annotated[str, Field(strict=True, pattern=QUEUE_PATTERN)] = "default"
    callback: CallbackIn | None = None
    payload: Json = None
    retry: RetryIn | None = None

    def default_start_ms(self, now_ms: int) -> int:
        """Where a schedule without `start` starts: now, or with `every` one interval later.

        An `every` series that started now would have its first occurrence now, or one
        interval later if the store's clock had moved on a millisecond by the time it stores
        it; starting one interval ahead makes the first run the same either way.
        """
        if self.every is None:
            return now_ms
        return now_ms + round(self.every * 1000)

    def to_schedule(self, now_ms: int, schedule_id: str) -> Schedule:
        """Build the model's schedule, starting at `start` or the default from `now_ms`;
        `schedule_id` fills a missing id.

        Raises:
            InvalidArgument: a field is invalid, named as in the request.
        """
        start_ms = self.default_start_ms(now_ms) if self.start is None else self.start
        if start_ms > now_ms + MAX_START_AHEAD_MS:
            raise InvalidArgument("start", "must be at most 10 years ahead")
        zone(self.timezone)
        return Schedule(
            id=self.id or schedule_id,
            cron=self.cron,
            every_s=self.every,
            timezone=self.timezone,
            start_ms=start_ms,
            end_ms=self.end,
            max_runs=self.max_runs,
            jitter_s=self.jitter,
            misfire=self.misfire,
            queue=self.queue,
            callback=None if self.callback is None else self.callback.to_callback(),
            payload=self.payload,
            retry=DEFAULT_RETRY if self.retry is None else self.retry.policy(),
        )


class ScheduleChange(_Input):
    """Changes to a schedule: each field given replaces the stored one, null restores its
    default (no end, no limit, UTC, …). Giving `cron` drops `every` and the other way round."""

    cron: CronText | None = None
    every: EverySeconds | None = None
    timezone: Zone | None = None
    end: TimeMs | None = None
    max_runs: MaxRuns | None = None
    jitter: Jitter | None = None
    misfire: Misfire | None = None
    queue: Annotated[str | None, Field(strict=True, pattern=QUEUE_PATTERN)] = None
    callback: CallbackIn | None = None
    payload: Json = None
    retry: RetryIn | None = None

    def apply(self, schedule: Schedule) -> Schedule:
        """Return `schedule` with the given fields changed.

        Raises:
            InvalidArgument: a field is invalid, or the result is (named as in the request).
        """
        given = self.model_fields_set
        changes: dict[str, Any] = {}
        if "cron" in given:
            changes["cron"] = self.cron
            if self.cron is not None and "every" not in given:
                changes["every_s"] = None
        if "every" in given:
            changes["every_s"] = self.every
            if self.every is not None and "cron" not in given:
                changes["cron"] = None
        if "timezone" in given:
            changes["timezone"] = self.timezone or "UTC"
            zone(changes["timezone"])
        if "end" in given:
            changes["end_ms"] = self.end
        if "max_runs" in given:
            changes["max_runs"] = self.max_runs
        if "jitter" in given:
            changes["jitter_s"] = self.jitter or 0.0
        if "misfire" in given:
            changes["misfire"] = self.misfire or Misfire.ONCE
        if "queue" in given:
            changes["queue"] = self.queue or "default"
        if "callback" in given:
            changes["callback"] = None if self.callback is None else self.callback.to_callback()
        if "payload" in given:
            changes["payload"] = self.payload
        if "retry" in given:
            changes["retry"] = DEFAULT_RETRY if self.retry is None else self.retry.policy()
        return replace(schedule, **changes)


class ScheduleOut(BaseModel):
    """A schedule as stored, and where its series is; times as RFC 3339 UTC and epoch ms.

    `next_run` is the nominal time of the pending occurrence (its timer fires up to `jitter`
    seconds later); null once the schedule has ended. A paused schedule keeps it: on resume
    that occurrence comes up, late if its time has passed, as `misfire` says.
    """

    id: str
    cron: str | None
    every: float | None
    timezone: str
    start: str
    start_ms: int
    end: str | None
    end_ms: int | None
    max_runs: int | None
    jitter: float
    misfire: Misfire
    queue: str
    callback: CallbackOut | None
    payload: JsonValue
    retry: RetryOut
    paused: bool
    next_run: str | None
    next_run_ms: int | None
    runs: int
    created: str
    updated: str

    @classmethod
    def fields_of(cls, state: ScheduleState) -> dict[str, Any]:
        schedule = state.schedule
        end_ms, next_ms = schedule.end_ms, state.next_ms
        return {
            "id": schedule.id,
            "cron": schedule.cron,
            "every": schedule.every_s,
            "timezone": schedule.timezone,
            "start": format_ms(schedule.start_ms),
            "start_ms": schedule.start_ms,
            "end": None if end_ms is None else format_ms(end_ms),
            "end_ms": end_ms,
            "max_runs": schedule.max_runs,
            "jitter": schedule.jitter_s,
            "misfire": schedule.misfire,
            "queue": schedule.queue,
            "callback": None if schedule.callback is None else CallbackOut.of(schedule.callback),
            "payload": schedule.payload,
            "retry": RetryOut.of(schedule.retry),
            "paused": schedule.paused,
            "next_run": None if next_ms is None else format_ms(next_ms),
            "next_run_ms": next_ms,
            "runs": state.runs,
            "created": format_ms(state.created_ms),
            "updated": format_ms(state.updated_ms),
        }

    @classmethod
    def of(cls, state: ScheduleState) -> ScheduleOut:
        return cls(**cls.fields_of(state))


class ScheduleDetailOut(ScheduleOut):
    """A schedule and its next occurrences (a list page leaves them out: cron rules in a zone
    cost a little each)."""

    upcoming: Annotated[
        list[str],
        Field(description=f"the next {UPCOMING} occurrences' nominal times, RFC 3339 UTC"),
    ]

    @classmethod
    def of(cls, state: ScheduleState) -> ScheduleDetailOut:
        upcoming = [format_ms(ms) for ms in state.upcoming()]
        return cls(**cls.fields_of(state), upcoming=upcoming)


class SchedulePageOut(BaseModel):
    """One page of schedules; pass `cursor` back for the next page, null at the end."""

    schedules: list[ScheduleOut]
    cursor: str | None


class RunOut(BaseModel):
    """One occurrence and how its timer fared.

    `state`, `attempt` and `last_error` are null once the store no longer keeps the timer
    (a done timer is kept for the retention period, a day by default). `pending` marks the
    occurrence that has not fired yet (shown while its timer exists).
    """

    nominal: str
    nominal_ms: int
    timer_id: str
    pending: bool
    state: State | None
    attempt: int | None
    last_error: str | None
    attempts: str = Field(description="the path of its timer's attempt history")

    @classmethod
    def of(cls, nominal_ms: int, timer_id: str, pending: bool, timer: Timer | None) -> RunOut:
        return cls(
            nominal=format_ms(nominal_ms),
            nominal_ms=nominal_ms,
            timer_id=timer_id,
            pending=pending,
            state=None if timer is None else timer.state,
            attempt=None if timer is None else timer.attempts_spent,
            last_error=None if timer is None else timer.last_error,
            attempts=f"/v1/timers/{quote(timer_id, safe='@')}/attempts",
        )


class RunsOut(BaseModel):
    """The schedule's latest occurrences, newest first: the pending one, then those fired."""

    runs: list[RunOut]
