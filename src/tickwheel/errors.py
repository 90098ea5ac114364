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
     └── StoreUnavailable                  the store could not be reached; `__cause__` says why
          └── NotReplicated                the write is stored, but no replica confirmed it
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
