"""The JSON bodies of flow control in the HTTP API: the limits on callbacks to each host, and
each queue's settings (paused, and a limit of its own)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, StrictBool, model_validator

from tickwheel.errors import InvalidArgument
from tickwheel.model import State
from tickwheel.service.bulk_schemas import DefaultsIn, DefaultsOut
from tickwheel.service.schemas import field_error
from tickwheel.stores.base import QueueInfo, QueueSettings
from tickwheel.stores.limit import MAX_BURST, MAX_CONCURRENCY, MAX_RATE, MIN_RATE, Limit


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid")


Rate = Annotated[float, Field(strict=True, ge=MIN_RATE, le=MAX_RATE, allow_inf_nan=False)]
Burst = Annotated[int, Field(strict=True, ge=1, le=MAX_BURST)]
Concurrency = Annotated[int, Field(strict=True, ge=1, le=MAX_CONCURRENCY)]


class LimitIn(_Input):
    """A bound on callbacks: `rate` a second on average with bursts of `burst` (default: one
    second's worth; it needs a rate), and at most `concurrency` at once; a rate, a concurrency
    or both."""

    rate: Rate | None = None
    burst: Burst | None = None
    concurrency: Concurrency | None = None
    _limit: Limit = PrivateAttr()

    @model_validator(mode="after")
    def _whole(self) -> LimitIn:
        """Build the store's `Limit` once, as the request is read: its refusals across fields
        (no rate nor concurrency, a burst without a rate) are the request's, at their path."""
        try:
            self._limit = Limit(rate=self.rate, burst=self.burst, concurrency=self.concurrency)
        except InvalidArgument as error:
            message = str(error).removeprefix(f"{error.argument}: ")
            raise field_error(error.argument, message, getattr(self, error.argument)) from None
        return self

    def limit(self) -> Limit:
        """The store's `Limit`, built when the request was read."""
        return self._limit


class LimitOut(BaseModel):
    """A limit as stored (unset parts null)."""

    rate: float | None
    burst: int | None
    concurrency: int | None

    @classmethod
    def of(cls, limit: Limit) -> LimitOut:
        return cls(rate=limit.rate, burst=limit.burst, concurrency=limit.concurrency)


class HostLimitOut(BaseModel):
    """The limit on callbacks to one host (``host`` or ``host:port``, as in its URLs)."""

    host: str
    rate: float | None
    burst: int | None
    concurrency: int | None

    @classmethod
    def of_host(cls, host: str, limit: Limit) -> HostLimitOut:
        return cls(host=host, rate=limit.rate, burst=limit.burst, concurrency=limit.concurrency)


class LimitsOut(BaseModel):
    """One page of host limits, sorted by host; pass `cursor` back for the next page, null at
    the end."""

    limits: list[HostLimitOut]
    cursor: str | None = None


class QueueIn(_Input):
    """A queue's settings, replacing the ones it had: paused (no worker claims from it), a
    limit on its callbacks, and the defaults its timers take (as `PUT .../defaults` sets)."""

    paused: StrictBool = False
    limit: LimitIn | None = None
    defaults: DefaultsIn | None = None

    def settings(self) -> QueueSettings:
        limit = None if self.limit is None else self.limit.limit()
        defaults = None if self.defaults is None else self.defaults.defaults()
        if defaults is not None and defaults.empty:
            defaults = None
        return QueueSettings(paused=self.paused, limit=limit, defaults=defaults)


class QueueCounts(BaseModel):
    """A queue's timers per state."""

    scheduled: int
    leased: int
    paused: int
    done: int
    dead: int


class QueueOut(BaseModel):
    """One queue: its timers per state, how long its earliest overdue timer has waited (null
    when none is due), and its settings (`defaults`: what its timers take when they fire
    without their own, null for none)."""

    name: str
    counts: QueueCounts
    oldest_overdue_s: float | None
    paused: bool
    limit: LimitOut | None
    defaults: DefaultsOut | None = None

    @classmethod
    def of(cls, info: QueueInfo, now_ms: int) -> QueueOut:
        earliest = info.earliest_due_ms
        limit, defaults = info.settings.limit, info.settings.defaults
        return cls(
            name=info.name,
            counts=QueueCounts(**{state.value: info.counts.get(state, 0) for state in State}),
            oldest_overdue_s=None
            if earliest is None or earliest > now_ms
            else (now_ms - earliest) / 1000,
            paused=info.settings.paused,
            limit=None if limit is None else LimitOut.of(limit),
            defaults=None if defaults is None else DefaultsOut.of(defaults),
        )


class QueuesOut(BaseModel):
    """One page of the queues that hold timers or have settings, sorted by name; pass `cursor`
    back for the next page, null at the end."""

    queues: list[QueueOut]
    cursor: str | None = None
