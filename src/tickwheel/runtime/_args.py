"""Argument checks shared by the drivers: turn user input into a due time or a clear error."""

from __future__ import annotations

import math
from collections.abc import Hashable
from datetime import datetime, timedelta

from tickwheel.errors import InvalidArgument
from tickwheel.runtime.clock import NS_PER_MS

# the last millisecond of year 9999: later times are not representable as datetimes
MAX_DUE_MS = 253_402_300_799_999
# the longest a driver sleeps in one go, so a drifting clock is re-read now and then
MAX_SLEEP_S = 3600.0
# within FILE_AHEAD_S of its next wake-up a driver wakes at least every FILE_EVERY_S and files
# the timers added since (`TimingWheel.add` queues them): filed then, not all at once at the
# due time, a burst of adds fires on its ms instead of tens of ms late
FILE_AHEAD_S = 1.0
FILE_EVERY_S = 0.05
# a delay this short cannot land past year 9999 from any clock we read; a float, so that the
# hot paths' `0.0 < delay <= YEAR_S` compare a float delay with floats, not ints (faster)
YEAR_S = 366 * 86_400.0

Delay = float | int | timedelta
When = float | int | datetime


def due_after(delay: object, now_ns: int) -> int:
    """Return the first epoch ms at or after `now_ns` + `delay` seconds."""
    # the common case first: a positive float or int within a year (NaN fails the comparison)
    if (type(delay) is float or type(delay) is int) and 0.0 < delay <= YEAR_S:
        return -(-(now_ns + round(delay * 1e9)) // NS_PER_MS)
    if isinstance(delay, timedelta):
        delay = delay.total_seconds()
    seconds = _seconds("delay", delay)
    if seconds < 0:
        raise InvalidArgument("delay", f"must not be negative, got {delay!r}")
    if seconds > MAX_DUE_MS / 1000:
        raise InvalidArgument("delay", f"{delay!r} s lands after the year 9999")
    if seconds == 0:
        return now_ns // NS_PER_MS  # due now: the current ms has begun, so it is not early
    # nearest ns, then up to the next ms: 0.067 s is 67 ms, and nothing rounds early
    due_ms = -(-(now_ns + round(seconds * 1e9)) // NS_PER_MS)
    if due_ms > MAX_DUE_MS:
        raise InvalidArgument("delay", f"{delay!r} s lands after the year 9999")
    return due_ms


def due_at(when: object) -> int:
    """Return the epoch ms of `when` (epoch seconds or an aware datetime), rounded up."""
    if isinstance(when, datetime):
        if when.tzinfo is None or when.utcoffset() is None:
            raise InvalidArgument("when", f"must carry a timezone, got naive {when!r}")
        when = when.timestamp()
    seconds = _seconds("when", when)
    if seconds < 0:
        raise InvalidArgument("when", f"must not be before 1970, got {when!r}")
    if seconds > MAX_DUE_MS / 1000:
        raise InvalidArgument("when", f"{when!r} is after the year 9999")
    return math.ceil(seconds * 1000)


def due_ms_of(delay: object, when: object, now_ns: int) -> int:
    """Resolve a `delay=` or `when=` pair where at most one is given; neither means now."""
    if when is None:
        return now_ns // NS_PER_MS if delay is None else due_after(delay, now_ns)
    if delay is not None:
        raise InvalidArgument("when", "give delay or when, not both")
    return due_at(when)


def check_callable(fn: object) -> None:
    if not callable(fn):
        raise InvalidArgument("fn", f"must be callable, got {type(fn).__name__}")


def check_due_ms(due_ms: object) -> int:
    if isinstance(due_ms, bool) or not isinstance(due_ms, int) or not 0 <= due_ms <= MAX_DUE_MS:
        raise InvalidArgument("due_ms", f"must be integer epoch ms in 1970-9999, got {due_ms!r}")
    return due_ms


def check_workers(max_workers: object) -> int:
    if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
        raise InvalidArgument("max_workers", f"must be a positive integer, got {max_workers!r}")
    return max_workers


def check_tick(tick_ms: object) -> int:
    if isinstance(tick_ms, bool) or not isinstance(tick_ms, int) or tick_ms < 1:
        raise InvalidArgument("tick_ms", f"must be a positive integer, got {tick_ms!r}")
    return tick_ms


def check_key(key: object) -> Hashable:
    try:
        hash(key)
    except TypeError:
        raise InvalidArgument("key", f"must be hashable, got {type(key).__name__}") from None
    return key


def check_timeout(timeout: object) -> float | None:
    if timeout is None:
        return None
    seconds = _seconds("timeout", timeout)
    if seconds < 0:
        raise InvalidArgument("timeout", f"must not be negative, got {timeout!r}")
    return seconds


def _seconds(argument: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgument(argument, f"must be a number of seconds, got {value!r}")
    try:
        seconds = float(value)
    except OverflowError:
        raise InvalidArgument(argument, "is too large to be a time") from None
    if not math.isfinite(seconds):
        raise InvalidArgument(argument, f"must be finite, got {value!r}")
    return seconds
