"""What the API answers, as typed objects: a timer, a schedule, a queue, a limit, the stats.

Each keeps the answer's JSON as `json` (what ``--json`` prints, fields added by a newer service
included), and reads the fields a caller acts on into typed attributes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

T = TypeVar("T")
Json = dict[str, Any]


def _time(text: Any) -> datetime | None:
    return None if text is None else datetime.fromisoformat(str(text))


def _when(text: Any) -> datetime:
    return datetime.fromisoformat(str(text))


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """Up to a listing's limit of `items`; `cursor` continues it (None: nothing more)."""

    items: list[T]
    cursor: str | None


@dataclass(frozen=True, slots=True)
class Created(Generic[T]):
    """What a create answered: the item, and whether this request made it (201) or found the
    same one already there (200)."""

    item: T
    new: bool


@dataclass(frozen=True, slots=True)
class Limit:
    """A limit on callbacks: a rate a second with its burst, and callbacks in flight at most."""

    rate: float | None
    burst: int | None
    concurrency: int | None

    @classmethod
    def of(cls, data: Json) -> Limit:
        """Read the limit fields of `data`."""
        return cls(data.get("rate"), data.get("burst"), data.get("concurrency"))


@dataclass(frozen=True, slots=True)
class TimerInfo:
    """A timer as the API shows it (callback header values are ``***``)."""

    id: str
    queue: str
    state: str
    due: datetime
    due_ms: int
    attempt: int
    url: str | None
    """The callback's URL; None for a timer that a queue consumer takes."""
    payload: Any
    created: datetime
    updated: datetime
    last_error: str | None
    json: Json = field(repr=False, compare=False)

    @classmethod
    def of(cls, data: Json) -> TimerInfo:
        """Read a timer of the API's JSON."""
        callback = data.get("callback") or {}
        return cls(
            id=data["id"],
            queue=data["queue"],
            state=data["state"],
            due=_when(data["due"]),
            due_ms=data["due_ms"],
            attempt=data["attempt"],
            url=callback.get("url"),
            payload=data.get("payload"),
            created=_when(data["created"]),
            updated=_when(data["updated"]),
            last_error=data.get("last_error"),
            json=data,
        )


@dataclass(frozen=True, slots=True)
class ScheduleInfo:
    """A schedule as the API shows it, with its next occurrences in `upcoming`."""

    id: str
    cron: str | None
    every: float | None
    queue: str
    paused: bool
    runs: int
    next_run: datetime | None
    """None: the schedule has ended."""
    upcoming: list[datetime]
    json: Json = field(repr=False, compare=False)

    @classmethod
    def of(cls, data: Json) -> ScheduleInfo:
        """Read a schedule of the API's JSON."""
        return cls(
            id=data["id"],
            cron=data.get("cron"),
            every=data.get("every"),
            queue=data["queue"],
            paused=bool(data.get("paused")),
            runs=data["runs"],
            next_run=_time(data.get("next_run")),
            upcoming=[_when(when) for when in data.get("upcoming") or ()],
            json=data,
        )


@dataclass(frozen=True, slots=True)
class RunInfo:
    """One occurrence of a schedule; `state` None: the store no longer keeps its timer."""

    nominal: datetime
    timer_id: str
    state: str | None
    attempt: int | None
    last_error: str | None
    json: Json = field(repr=False, compare=False)

    @classmethod
    def of(cls, data: Json) -> RunInfo:
        """Read an occurrence of the API's JSON."""
        return cls(
            nominal=_when(data["nominal"]),
            timer_id=data["timer_id"],
            state=data.get("state"),
            attempt=data.get("attempt"),
            last_error=data.get("last_error"),
            json=data,
        )


@dataclass(frozen=True, slots=True)
class AttemptInfo:
    """One attempt at a timer's callback: when and by which worker, the HTTP `status` or else
    the kind of failure (`error`), the latency, the first KiB of the response body, and when
    the retry it led to is due (`next_due`)."""

    attempt: int
    at: datetime
    worker: str
    outcome: str
    """``ack``, ``retry`` or ``dead``."""
    status: int | None
    error: str | None
    latency_ms: float
    body: str | None
    next_due: datetime | None
    json: Json = field(repr=False, compare=False)

    @classmethod
    def of(cls, data: Json) -> AttemptInfo:
        """Read an attempt of the API's JSON."""
        return cls(
            attempt=data["attempt"],
            at=_when(data["at"]),
            worker=data["worker"],
            outcome=data["outcome"],
            status=data.get("status"),
            error=data.get("error"),
            latency_ms=data["latency_ms"],
            body=data.get("body"),
            next_due=_time(data.get("next_due")),
            json=data,
        )


@dataclass(frozen=True, slots=True)
class QueueInfo:
    """A queue: timers per state, its oldest overdue timer's age, paused or not, its limit,
    and its defaults as the API shows them (``retry``, ``headers`` with values redacted)."""

    name: str
    counts: dict[str, int]
    oldest_overdue_s: float | None
    paused: bool
    limit: Limit | None
    defaults: Json | None
    json: Json = field(repr=False, compare=False)

    @classmethod
    def of(cls, data: Json) -> QueueInfo:
        """Read a queue of the API's JSON."""
        limit = data.get("limit")
        return cls(
            name=data["name"],
            counts=dict(data.get("counts") or {}),
            oldest_overdue_s=data.get("oldest_overdue_s"),
            paused=bool(data.get("paused")),
            limit=None if not limit else Limit.of(limit),
            defaults=data.get("defaults"),
            json=data,
        )


@dataclass(frozen=True, slots=True)
class HostLimit:
    """The limit on callbacks to one host (``host[:port]`` as in its URLs)."""

    host: str
    limit: Limit
    json: Json = field(repr=False, compare=False)

    @classmethod
    def of(cls, data: Json) -> HostLimit:
        """Read a host's limit of the API's JSON."""
        return cls(host=data["host"], limit=Limit.of(data), json=data)


@dataclass(frozen=True, slots=True)
class Stats:
    """Timers per state, and the earliest due time (None: no timer is scheduled)."""

    counts: dict[str, int]
    earliest_due: datetime | None
    json: Json = field(repr=False, compare=False)

    @classmethod
    def of(cls, data: Json) -> Stats:
        """Read the stats of the API's JSON."""
        return cls(
            counts=dict(data["counts"]),
            earliest_due=_time(data.get("earliest_due")),
            json=data,
        )
