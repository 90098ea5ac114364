"""Exceptions raised by tickwheel, all under one root.

::

    TickwheelError
     ├── InvalidArgument (ValueError)      bad input, named by `argument`
     │    └── InvalidTimer                 a timer field failed validation
     ├── Closed (RuntimeError)             the scheduler, queue or store was closed
     ├── TimerExists                       the id is taken by a timer with another spec
     ├── ScheduleExists                    the id is taken by a schedule with another spec
     ├── LeaseLost                         the lease expired or moved on; nothing was changed
     ├── CapReached                        the store holds as many of a kind as it may
     ├── StoreUnavailable                  the store could not be reached; `__cause__` says why
     │    └── NotReplicated                the write is stored, but no replica confirmed it
     ├── ServiceError                      the HTTP API answered an error (`tickwheel.client`)
     │    ├── RequestInvalid (ValueError)  the request was wrong: 400, 413, 415, 422
     │    ├── AccessDenied (PermissionError)  no token, or not the right one: 401, 403
     │    ├── NotFound (LookupError)       no such timer, schedule, queue or limit: 404
     │    ├── Conflict                     the id is taken by another spec, or the state: 409
     │    └── ServiceUnavailable           the store is down, or a write unreplicated: 503, 507
     └── ServiceUnreachable                nothing answered at the API's URL
"""

from __future__ import annotations


class TickwheelError(Exception):
    """Root of every error tickwheel raises on purpose."""


class InvalidArgument(TickwheelError, ValueError):
    """An argument was rejected; `argument` names it so a caller can act."""

    def __init__(self, argument: str, message: str) -> None:
        super().__init__(f"{argument}: {message}")
        self.argument = argument


class InvalidTimer(InvalidArgument):
    """A timer field failed validation; `argument` is the field's dotted path."""


class Closed(TickwheelError, RuntimeError):
    """The scheduler, queue or store was closed and accepts no more work."""


class TimerExists(TickwheelError):
    """A timer with this id exists with a different spec (pass ``replace=True`` to overwrite)."""

    def __init__(self, timer_id: str) -> None:
        super().__init__(f"timer {timer_id!r} exists with a different spec")
        self.timer_id = timer_id


class ScheduleExists(TickwheelError):
    """A schedule with this id exists with a different spec (update it instead)."""

    def __init__(self, schedule_id: str) -> None:
        super().__init__(f"schedule {schedule_id!r} exists with a different spec")
        self.schedule_id = schedule_id


class CapReached(TickwheelError):
    """The store holds the most `kind` (queues, schedules, limits) its operator allows; nothing
    was written. `field` names the request field whose new value would have made one more."""

    def __init__(self, kind: str, cap: int, field: str) -> None:
        super().__init__(
            f"the store holds the most {kind} it may ({cap}); delete some, or ask the "
            f"operator to raise the cap"
        )
        self.kind = kind
        self.cap = cap
        self.field = field


class LeaseLost(TickwheelError):
    """The lease is stale (expired and re-claimed, or already settled); nothing was changed."""

    def __init__(self, timer_id: str, token: int) -> None:
        super().__init__(f"lease on timer {timer_id!r} with token {token} is no longer held")
        self.timer_id = timer_id
        self.token = token


class StoreUnavailable(TickwheelError):
    """The store could not be reached or failed; the cause is chained."""


class NotReplicated(StoreUnavailable):
    """A write is stored on the Redis master, but no replica confirmed it in time
    (``durability=replicated``): it stands unless the master fails before replicating it.

    `ids` names the timers (or schedules) written, where the caller is known; creating them
    again without their ids would duplicate them, so a caller checks them rather than retry.
    """

    def __init__(self, ids: tuple[str, ...], reason: str) -> None:
        named = f" ({', '.join(ids)})" if ids else ""
        super().__init__(f"stored{named} but not replicated: {reason}")
        self.ids = ids
        self.reason = reason

    def of(self, ids: tuple[str, ...]) -> NotReplicated:
        """The same error naming `ids`: a caller's own writes, not those of others that shared
        its round trip."""
        return NotReplicated(ids, self.reason)


BAD_INPUT_STATUSES = frozenset({400, 409, 413, 415, 422})
"""Statuses that mean the request itself was wrong rather than the service or a timer's state."""


class ServiceError(TickwheelError):
    """The HTTP API answered an error: `status`, and `code`, `message`, `field` from its body.

    `retry_after_s` is the answer's ``Retry-After`` (None without one); `ids` names what a write
    stored all the same (a 507 ``not_replicated``)."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        field: str | None = None,
        *,
        retry_after_s: float | None = None,
        ids: tuple[str, ...] = (),
    ) -> None:
        where = f" ({field})" if field else ""
        super().__init__(f"{message}{where} [HTTP {status} {code}]")
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.retry_after_s = retry_after_s
        self.ids = ids

    @property
    def bad_input(self) -> bool:
        """Whether the request was at fault rather than the service or the timer's state."""
        return self.status in BAD_INPUT_STATUSES


class RequestInvalid(ServiceError, ValueError):
    """The API refused the request as wrong (400, 413, 415, 422); `field` names what, if known."""


class AccessDenied(ServiceError, PermissionError):
    """The API wants a token (401), or the token may not do this (403)."""


class NotFound(ServiceError, LookupError):
    """No such timer, schedule, queue or limit (404), or none the token may see."""


class Conflict(ServiceError):
    """The id is taken by another spec, or the timer's state forbids the change (409)."""


class ServiceUnavailable(ServiceError):
    """The service's store did not answer (503), or a write was not replicated (507)."""


class ServiceUnreachable(TickwheelError):
    """Nothing answered at the API's URL (refused, timed out, unknown host); `reason` says which."""

    def __init__(self, base_url: str, reason: str) -> None:
        super().__init__(f"cannot reach the tickwheel API at {base_url} ({reason})")
        self.base_url = base_url
        self.reason = reason
