"""The JSON bodies of the HTTP API: requests in, timers and errors out (flow control's are
`flow_schemas.py`'s, schedules' `schedule_schemas.py`'s)."""

from __future__ import annotations

import functools
import json
import math
import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    JsonValue,
    ValidationError,
    WithJsonSchema,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from tickwheel.errors import InvalidTimer
from tickwheel.model import (
    DEFAULT_RETRY,
    MAX_ATTEMPTS,
    MAX_BACKOFF_S,
    MAX_BODY_BYTES,
    MAX_DUE_MS,
    MAX_ID_CHARS,
    MAX_JSON_DEPTH,
    MAX_QUEUE_CHARS,
    MAX_RETRY_S,
    MAX_TIMEOUT_S,
    MAX_URL_CHARS,
    Callback,
    RetryPolicy,
    State,
    Timer,
    due_out_of_range,
    json_depth,
)
from tickwheel.stores.base import StoreSettings
from tickwheel.stores.checks import beyond_horizon

MAX_EPOCH_S = MAX_DUE_MS // 1000
"""9999-12-31T23:59:59Z, the last instant RFC 3339 can write; the store's horizon is nearer."""
MAX_BATCH = 1000
REDACTED = "***"

ID_PATTERN = rf"^[A-Za-z0-9._:-]{{1,{MAX_ID_CHARS}}}$"
"""The model's rule for ids: a path that breaks it names no timer."""
QUEUE_PATTERN = rf"^[A-Za-z0-9._:-]{{1,{MAX_QUEUE_CHARS}}}$"
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _seconds_ms(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"must be {what}")
    # comparing before isfinite: a huge int never becomes a float (OverflowError)
    if not 0 <= value <= MAX_EPOCH_S or not math.isfinite(value):
        raise ValueError(f"must be from 0 to {MAX_EPOCH_S} seconds, got {value!r}")
    return value * 1000 if isinstance(value, int) else round(value * 1000)


def epoch_ms(value: object) -> int:
    """Turn an RFC 3339 timestamp with an offset, or epoch seconds, into epoch ms."""
    if not isinstance(value, str):
        return _seconds_ms(value, "an RFC 3339 timestamp with an offset, or epoch seconds")
    if not _RFC3339.fullmatch(value):
        raise ValueError("must be an RFC 3339 timestamp with an offset, e.g. 2030-01-01T09:00:00Z")
    try:
        # fromisoformat in 3.11 keeps 6 fraction digits at most
        when = datetime.fromisoformat(re.sub(r"(\.\d{6})\d+", r"\1", value.upper()))
        ms = (when - _EPOCH) // timedelta(milliseconds=1)
    except (ValueError, OverflowError) as error:
        raise ValueError(f"is not a valid time: {error}") from None
    if ms < 0:
        raise ValueError("must not be before 1970-01-01T00:00:00Z")
    return ms


DueMs = Annotated[
    int,
    BeforeValidator(epoch_ms),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "format": "date-time"},
                {"type": "number", "minimum": 0, "maximum": MAX_EPOCH_S},
            ],
            "description": "RFC 3339 with an offset, or epoch seconds; past times fire at once",
        }
    ),
]
DelayMs = Annotated[
    int,
    BeforeValidator(lambda value: _seconds_ms(value, "a number of seconds")),
    WithJsonSchema(
        {"type": "number", "minimum": 0, "maximum": MAX_EPOCH_S, "description": "seconds from now"}
    ),
]
Backoff = Annotated[float, Field(strict=True, ge=0, le=MAX_BACKOFF_S, allow_inf_nan=False)]


def _shallow(value: object) -> object:
    # before pydantic walks the value: its own limit (255 levels) reports the error deep inside
    # the value (``payload.list.0``) rather than naming the field
    if json_depth(value) > MAX_JSON_DEPTH:
        raise ValueError(f"nests more than {MAX_JSON_DEPTH} levels of lists and objects")
    return value


Json = Annotated[JsonValue, BeforeValidator(_shallow)]
BODY_DESCRIPTION = f"""The request body. A string is sent as it is; any other JSON value is
sent as compact JSON, with `Content-Type: application/json` unless `headers` set a content type.
At most {MAX_BODY_BYTES} bytes as sent (UTF-8); null sends no body."""


def format_ms(ms: int) -> str:
    """Write epoch ms as RFC 3339 UTC with milliseconds: ``2030-01-01T09:00:00.000Z``."""
    seconds, milliseconds = divmod(ms, 1000)
    return f"{_second(seconds)}.{milliseconds:03d}Z"


@functools.lru_cache(maxsize=4096)
def _second(seconds: int) -> str:
    # the times one answer shows (created, updated, due soon) mostly fall in a few seconds
    return (_EPOCH + timedelta(seconds=seconds)).isoformat()[:-6]


def field_error(field: str, message: str, value: object) -> ValidationError:
    """Refuse `field` of the model being validated, from a check across its fields: pydantic
    puts the model's own path in the request before it (``defaults.retry.min_backoff``), as
    for a check of one field (pydantic-core takes a `ValidationError` raised in a validator
    as its own errors)."""
    error = PydanticCustomError("invalid", "{message}", {"message": message})
    line = InitErrorDetails(type=error, loc=(field,), input=value)
    return ValidationError.from_exception_data("request", [line])


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CallbackIn(_Input):
    """The HTTP request to make when the timer fires."""

    url: Annotated[str, Field(strict=True, min_length=1, max_length=MAX_URL_CHARS)]
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    headers: dict[str, Annotated[str, Field(strict=True)]] = Field(default_factory=dict)
    body: Annotated[
        str | JsonValue, BeforeValidator(_shallow), Field(description=BODY_DESCRIPTION)
    ] = None

    def to_callback(self) -> Callback:
        """Build the model's callback, whose body is text: a JSON value is encoded here.

        The encoding is deterministic (compact, keys in the order given), so a repeated
        request with the same body builds an equal callback and is recognised as a repeat.

        Raises:
            InvalidTimer: a field is invalid, named as in the request.
        """
        headers, body = self.headers, self.body
        if body is not None and not isinstance(body, str):
            try:
                body = json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
            except ValueError as error:  # NaN or Infinity, which Python's JSON parser reads
                raise InvalidTimer("callback.body", f"must be JSON-serialisable: {error}") from None
            if not any(name.lower() == "content-type" for name in headers):
                headers = {**headers, "Content-Type": "application/json"}
        return Callback(url=self.url, method=self.method, headers=headers, body=body)


class RetryIn(_Input):
    """How often and how far apart a failing timer is tried again; times in seconds."""

    max_attempts: Annotated[int, Field(strict=True, ge=1, le=MAX_ATTEMPTS)] = (
        DEFAULT_RETRY.max_attempts
    )
    min_backoff: Annotated[
        Backoff, Field(description="the least wait after a failed attempt; at most 7 days")
    ] = DEFAULT_RETRY.min_backoff_s
    max_backoff: Annotated[
        Backoff, Field(description="the longest wait after a failed attempt; at most 7 days")
    ] = DEFAULT_RETRY.max_backoff_s
    timeout: Annotated[
        float,
        Field(strict=True, gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False),
        Field(description=f"how long one attempt may take; at most {MAX_TIMEOUT_S:g} (30 min)"),
    ] = DEFAULT_RETRY.timeout_s
    max_retry: Annotated[
        Annotated[float, Field(strict=True, ge=0, le=MAX_RETRY_S, allow_inf_nan=False)] | None,
        Field(description="stop retrying this long after the first attempt; at most 365 days"),
    ] = DEFAULT_RETRY.max_retry_s

    @model_validator(mode="after")
    def _backoffs_in_order(self) -> RetryIn:
        """Refuse a `min_backoff` over `max_backoff`, at its path in the request."""
        if self.min_backoff > self.max_backoff:
            raise field_error("min_backoff", "must not exceed max_backoff", self.min_backoff)
        return self

    def policy(self) -> RetryPolicy:
        """The model's policy, from fields checked whole when the request was read."""
        return RetryPolicy(
            max_attempts=self.max_attempts,
            min_backoff_s=self.min_backoff,
            max_backoff_s=self.max_backoff,
            timeout_s=self.timeout,
            max_retry_s=self.max_retry,
        )


class When(_Input):
    """Exactly one of `due` and `delay`."""

    due: DueMs | None = None
    delay: DelayMs | None = None

    def due_ms_at(self, now_ms: int, store_settings: StoreSettings) -> int:
        """Return the due time in epoch ms, `delay` counting from `now_ms`, checked whole: within
        the store's horizon from `now_ms` (the store's clock) and the model's range. Nothing
        below refuses it then, so each error names the request's field as it is raised, and
        the routes hand it to the store as checked (`due_checked`): compared once.

        Raises:
            InvalidTimer: both or neither were given, or the time is past the store's horizon
                or out of range (``due`` or ``delay``).
        """
        if self.due is not None and self.delay is None:
            field, due_ms = "due", self.due
        elif self.delay is not None and self.due is None:
            field, due_ms = "delay", now_ms + self.delay
        else:
            raise InvalidTimer("due", "give exactly one of due (a time) and delay (seconds)")
        if due_ms > now_ms + store_settings.max_horizon_ms:
            raise beyond_horizon(store_settings, field)
        if due_ms > MAX_DUE_MS:  # only a horizon of millennia lets one by; none is below 0
            raise due_out_of_range(field, due_ms)
        return due_ms


class TimerIn(When):
    """A timer to create: when, and a `callback` (HTTP) or a `payload` (for a queue consumer)."""

    id: Annotated[str | None, Field(strict=True, pattern=ID_PATTERN)] = None
    queue: Annotated[str, Field(strict=True, pattern=QUEUE_PATTERN)] = "default"
    callback: CallbackIn | None = None
    payload: Json = None
    retry: RetryIn | None = None

    def to_timer(
        self, now_ms: int, store_settings: StoreSettings, timer_id: str | None = None
    ) -> Timer:
        """Build the model's timer, due as `due_ms_at` says; `timer_id` fills a missing id.

        Raises:
            InvalidTimer: a field is invalid, named as in the request.
        """
        if self.callback is None and self.payload is None:
            raise InvalidTimer(
                "callback", "an HTTP timer needs a callback; a queue consumer's timer a payload"
            )
        return Timer(
            id=self.id or timer_id or "",
            due_ms=self.due_ms_at(now_ms, store_settings),
            queue=self.queue,
            callback=None if self.callback is None else self.callback.to_callback(),
            payload=self.payload,
            retry=DEFAULT_RETRY if self.retry is None else self.retry.policy(),
        )


class RescheduleIn(When):
    """A new due time for a scheduled timer."""


class BatchIn(_Input):
    """Up to 1,000 timers; each is created as by ``POST /v1/timers`` and answered on its own."""

    timers: Annotated[
        list[Any],
        Field(min_length=1, max_length=MAX_BATCH),
        WithJsonSchema(
            {
                "type": "array",
                "items": {"$ref": "#/components/schemas/TimerIn"},
                "minItems": 1,
                "maxItems": MAX_BATCH,
            }
        ),
    ]


class CallbackOut(BaseModel):
    """The callback as stored; header values are redacted, since they often hold credentials."""

    url: str
    method: str
    headers: dict[str, str]
    body: str | None

    @classmethod
    def of(cls, callback: Callback) -> CallbackOut:
        return cls.model_validate(cls.fields_of(callback))

    @staticmethod
    def fields_of(callback: Callback) -> dict[str, Any]:
        headers = dict.fromkeys(callback.headers, REDACTED)
        return {
            "url": callback.url,
            "method": callback.method,
            "headers": headers,
            "body": callback.body,
        }


class RetryOut(BaseModel):
    """The retry policy, times in seconds."""

    max_attempts: int
    min_backoff: float
    max_backoff: float
    timeout: float
    max_retry: float | None

    @classmethod
    def of(cls, retry: RetryPolicy) -> RetryOut:
        return cls.model_validate(cls.fields_of(retry))

    @staticmethod
    def fields_of(retry: RetryPolicy) -> dict[str, Any]:
        return {
            "max_attempts": retry.max_attempts,
            "min_backoff": retry.min_backoff_s,
            "max_backoff": retry.max_backoff_s,
            "timeout": retry.timeout_s,
            "max_retry": retry.max_retry_s,
        }


class TimerOut(BaseModel):
    """A timer as stored; times as RFC 3339 UTC and `due_ms` as epoch milliseconds."""

    id: str
    queue: str
    due: str
    due_ms: int
    state: State
    attempt: int
    callback: CallbackOut | None
    payload: JsonValue
    retry: RetryOut
    created: str
    updated: str
    last_error: str | None

    @classmethod
    def of(cls, timer: Timer) -> TimerOut:
        """The API's view of `timer`, validated in one call from plain fields (a third of the
        time of a model per part)."""
        created = format_ms(timer.created_ms)
        same = timer.updated_ms == timer.created_ms  # as every new timer is
        callback = timer.callback
        return cls.model_validate(
            {
                "id": timer.id,
                "queue": timer.queue,
                "due": format_ms(timer.due_ms),
                "due_ms": timer.due_ms,
                "state": timer.state,
                "attempt": timer.attempts_spent,  # claims handed back unsent are no attempts
                "callback": None if callback is None else CallbackOut.fields_of(callback),
                "payload": timer.payload,
                "retry": RetryOut.fields_of(timer.retry),
                "created": created,
                "updated": created if same else format_ms(timer.updated_ms),
                "last_error": timer.last_error,
            }
        )


class TimerPage(BaseModel):
    """One page of timers; pass `cursor` back for the next page, null at the end."""

    timers: list[TimerOut]
    cursor: str | None


class ErrorDetail(BaseModel):
    """What went wrong: a stable `code`, a message for people, and the request field at fault."""

    code: str
    message: str
    field: str | None = None


class ErrorOut(BaseModel):
    """The body of every error response."""

    error: ErrorDetail


class BatchItemOut(BaseModel):
    """One item's outcome: the status ``POST /v1/timers`` would give, and the timer or error."""

    status: int
    timer: TimerOut | None = None
    error: ErrorDetail | None = None


class BatchOut(BaseModel):
    """Outcomes in the order of the request's timers."""

    results: list[BatchItemOut]


class StatsOut(BaseModel):
    """Timers per state, and the earliest due time among scheduled ones."""

    counts: dict[State, int]
    earliest_due: str | None
    earliest_due_ms: int | None


class HealthOut(BaseModel):
    """The service answers and its store is reachable."""

    status: Literal["ok"]
    store: str


class ReplayedOut(BaseModel):
    """How many dead timers were scheduled again."""

    replayed: int
