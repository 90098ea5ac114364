"""The JSON bodies of the bulk routes: a queue's purge, a bulk cancel, and a queue's defaults."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from tickwheel.model import MAX_ID_CHARS
from tickwheel.service.schemas import REDACTED, RetryIn, RetryOut
from tickwheel.stores.queue_defaults import QueueDefaults

MAX_CANCEL_IDS = 1000
"""Ids one bulk cancel takes at most, as many as a batch creates."""

PurgeState = Literal["scheduled", "paused", "dead"]
CancelResult = Literal["cancelled", "not_found", "not_scheduled", "schedule_occurrence"]


class PurgeOut(BaseModel):
    """What a purge deleted: the queue's timers in `state` when it ran."""

    queue: str
    state: PurgeState
    purged: int


class CancelIn(BaseModel):
    """Timers to cancel: 1 to 1,000 ids, each once."""

    model_config = ConfigDict(extra="forbid")

    ids: Annotated[
        list[Annotated[str, Field(strict=True, max_length=MAX_ID_CHARS * 2)]],
        Field(min_length=1, max_length=MAX_CANCEL_IDS),
    ]


class CancelledOut(BaseModel):
    """One id's result: `cancelled`; `not_found` (unknown, or in a queue the token does not
    see); `not_scheduled` (firing, fired or dead); `schedule_occurrence` (its schedule owns
    it: pause, change or delete the schedule)."""

    id: str
    result: CancelResult


class CancelOut(BaseModel):
    """How many were cancelled, and each id's result in the order given."""

    cancelled: int
    results: list[CancelledOut]


class DefaultsIn(BaseModel):
    """What the queue's timers take when they fire without their own: a retry policy (for a
    timer whose policy is the built-in one) and callback headers (under the timer's own, names
    ignoring case). Both absent: the queue has no defaults."""

    model_config = ConfigDict(extra="forbid")

    retry: RetryIn | None = None
    headers: dict[str, Annotated[str, Field(strict=True)]] = Field(default_factory=dict)

    def defaults(self) -> QueueDefaults:
        retry = None if self.retry is None else self.retry.policy()
        return QueueDefaults(retry=retry, headers=self.headers)


class DefaultsOut(BaseModel):
    """A queue's defaults as stored; header values are redacted, as a timer's are."""

    retry: RetryOut | None
    headers: dict[str, str]

    @classmethod
    def of(cls, defaults: QueueDefaults) -> DefaultsOut:
        retry = None if defaults.retry is None else RetryOut.of(defaults.retry)
        return cls(retry=retry, headers=dict.fromkeys(defaults.headers, REDACTED))
