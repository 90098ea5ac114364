"""What one firing attempt came to, and who can fire a timer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, runtime_checkable

from tickwheel.model import Timer


class Verdict(StrEnum):
    """How the worker settles a fired timer with its store."""

    ACK = "ack"  # delivered: done
    RETRY = "retry"  # failed for now: scheduled again after a backoff
    KILL = "kill"  # failed for good: dead letter
    DEFER = "defer"  # not sent (no free connection): back to the store, no attempt spent


@dataclass(frozen=True, slots=True)
class Outcome:
    """One attempt's result: the verdict, the error to record, a server's requested wait (for
    a deferral, when to try again), and `hold_s`: how long the whole host asked to be left
    alone (a 429 or 503 with Retry-After); for the attempt's history, the HTTP `status` or
    else the kind of failure (`error_class`), and the first KiB of the response `body`."""

    verdict: Verdict
    error: str | None = None
    retry_after_s: float | None = None
    hold_s: float | None = None
    # what the history shows of the attempt, not what settles it: outcomes compare without it
    status: int | None = field(default=None, compare=False)
    error_class: str | None = field(default=None, compare=False)
    body: str | None = field(default=None, compare=False)


ACKED = Outcome(Verdict.ACK)

TARGET_HANGS = "waiting: its target has not answered"
"""The reason a callback went back to the store unsent: its target has hung lately."""
NO_FREE_CONNECTION = "no free connection"
"""How the reason of a callback that went back unsent for want of a connection begins."""


def sent_back_hanging(timer: Timer) -> bool:
    """Whether `timer` last went back to the store unsent because its target hangs, as the
    worker that claimed it found: its queue is hung for any worker, which need not find it
    again by a probe of its own."""
    error = timer.last_error
    return (
        timer.deferrals > 0
        and error is not None
        and (error == TARGET_HANGS or error.startswith(NO_FREE_CONNECTION))
    )


class Target(Protocol):
    """Fires a timer once, e.g. by making its HTTP callback; never raises for a failed delivery."""

    async def fire(self, timer: Timer, attempt: int) -> Outcome:
        """Make one delivery attempt of `timer` (attempt numbers start at 1)."""
        ...

    async def close(self) -> None:
        """Release connections; idempotent."""
        ...


class NotFired(Exception):
    """An attempt dropped before anything was sent, because its guard said no."""


@runtime_checkable
class GuardedTarget(Protocol):
    """A target that asks `go` right before it sends: a delivery that waited (for a connection,
    or in a stopped process) past its lease is dropped, not raced against the worker that may
    hold the timer by then."""

    async def fire_guarded(self, timer: Timer, attempt: int, go: Callable[[], bool]) -> Outcome:
        """As `Target.fire`; raises `NotFired` when `go` says no, with nothing sent."""
        ...
