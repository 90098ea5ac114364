"""When a recurring schedule fires: every N ms from a start, or by a cron rule in a time zone.

Occurrences are computed from the rule, never from the previous firing, so a series does not
drift. A cron rule matches local wall times, read by cronsim on naive datetimes (where no DST
exists), and each matching wall time is then placed on the timeline here:

- a wall time that happens twice (clocks go back) fires once, at its first instant;
- a wall time that never happens (clocks go forward) fires at the first instant after the gap,
  and several such wall times of one gap fold into that one occurrence.

`next_after(ms)` is the whole interface: the first occurrence strictly after `ms`, or None.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from tickwheel.errors import InvalidArgument

MIN_EVERY_MS = 1000
"""The shortest interval: one occurrence a second per schedule."""
MAX_EVERY_MS = 366 * 24 * 3600 * 1000
MAX_CRON_CHARS = 256
MAX_GAP = timedelta(hours=3)
"""Longer than any DST or zone-change gap in the tz database, so a search started this far back
finds the wall times that a gap moves past its end."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


class Recurrence(Protocol):
    """A rule that yields occurrence times in epoch ms."""

    def next_after(self, after_ms: int) -> int | None:
        """Return the first occurrence strictly after `after_ms`, or None if there is none."""
        ...


def upcoming(rule: Recurrence, after_ms: int, count: int) -> list[int]:
    """Return up to `count` occurrences after `after_ms`, in order."""
    found: list[int] = []
    while len(found) < count:
        nxt = rule.next_after(after_ms)
        if nxt is None:
            break
        found.append(nxt)
        after_ms = nxt
    return found


@dataclass(frozen=True, slots=True)
class Every:
    """Occurrences at `start_ms + k * interval_ms` for k = 0, 1, 2, …"""

    interval_ms: int
    start_ms: int

    def __post_init__(self) -> None:
        if (
            isinstance(self.interval_ms, bool)
            or not isinstance(self.interval_ms, int)
            or not MIN_EVERY_MS <= self.interval_ms <= MAX_EVERY_MS
        ):
            raise InvalidArgument(
                "every",
                f"must be from {MIN_EVERY_MS / 1000:g} s to {MAX_EVERY_MS // 1000} s, "
                f"got {self.interval_ms!r} ms",
            )
        if isinstance(self.start_ms, bool) or not isinstance(self.start_ms, int):
            raise InvalidArgument("start", f"must be integer epoch ms, got {self.start_ms!r}")

    def next_after(self, after_ms: int) -> int:
        if after_ms < self.start_ms:
            return self.start_ms
        steps = (after_ms - self.start_ms) // self.interval_ms + 1
        return self.start_ms + steps * self.interval_ms


def every_seconds(interval_s: float, start_ms: int) -> Every:
    """Build an `Every` from seconds, as users give it; NaN, infinities and non-numbers refused."""
    if (
        isinstance(interval_s, bool)
        or not isinstance(interval_s, int | float)
        or not math.isfinite(interval_s)
    ):
        raise InvalidArgument("every", f"must be a finite number of seconds, got {interval_s!r}")
    if not MIN_EVERY_MS / 1000 <= interval_s <= MAX_EVERY_MS / 1000:
        raise InvalidArgument(
            "every",
            f"must be from {MIN_EVERY_MS / 1000:g} s to {MAX_EVERY_MS // 1000} s, "
            f"got {interval_s!r}",
        )
    return Every(round(interval_s * 1000), start_ms)


def zone(name: object) -> ZoneInfo:
    """Return the IANA time zone `name`, or raise `InvalidArgument` naming ``timezone``."""
    if not isinstance(name, str) or not 0 < len(name) <= 64 or not name.isprintable():
        raise InvalidArgument("timezone", f"must be an IANA time zone name, got {name!r}")
    # only the database's names: not a directory of it, nor "localtime", whose meaning is
    # the host's
    if name not in _zone_names():
        raise InvalidArgument("timezone", f"unknown time zone {name!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidArgument("timezone", f"unknown time zone {name!r}") from None


@functools.cache
def _zone_names() -> frozenset[str]:
    return frozenset(available_timezones()) - {"localtime"}


@dataclass(frozen=True, slots=True)
class Cron:
    """A cron rule of 5 fields (minute precision) or 6 (seconds first), in `timezone`."""

    expression: str
    timezone: str = "UTC"
    _zone: ZoneInfo = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.expression, str) or len(self.expression) > MAX_CRON_CHARS:
            raise InvalidArgument("cron", f"must be a string of at most {MAX_CRON_CHARS} chars")
        fields = self.expression.split()
        if len(fields) not in (5, 6):
            raise InvalidArgument("cron", f"must have 5 fields (6 with seconds), got {len(fields)}")
        object.__setattr__(self, "_zone", zone(self.timezone))
        from cronsim import CronSim, CronSimError  # imported on first use: a small pure package

        try:
            CronSim(self.expression, datetime(2000, 1, 1))
        except CronSimError as error:
            raise InvalidArgument("cron", f"{self.expression!r}: {error}") from None

    def next_after(self, after_ms: int) -> int | None:
        """The first occurrence after `after_ms`, or None when there is none before year 9999
        (datetime's end)."""
        after = _EPOCH + after_ms * _MS
        local = after.astimezone(self._zone)
        wall = local.replace(tzinfo=None)
        # a wall time before `wall` can fire after `after` only where the clock went back
        # within MAX_GAP; elsewhere the walk starts at `wall` (a per-second rule walks a
        # second, not MAX_GAP's worth of them)
        earlier = (after - MAX_GAP).astimezone(self._zone)
        steady = earlier.utcoffset() == local.utcoffset()
        try:
            for candidate in self._walls(wall if steady else wall - MAX_GAP):
                instant_ms = _to_ms(self._place(candidate))
                if instant_ms > after_ms:
                    return instant_ms
        except OverflowError:
            return None
        return None

    def _walls(self, start: datetime) -> Iterator[datetime]:
        from cronsim import CronSim

        # cronsim yields strictly after its start; give it one microsecond earlier
        return iter(CronSim(self.expression, start - timedelta(microseconds=1)))

    def _place(self, wall: datetime) -> datetime:
        """The instant a matching wall time fires at (the module docstring says the rules)."""
        first = wall.replace(tzinfo=self._zone, fold=0)
        if first.astimezone(UTC).astimezone(self._zone).replace(tzinfo=None) == wall:
            return first.astimezone(UTC)  # exists; fold=0 is its first instant if it repeats
        # in a gap: fold=0 reads it with the offset before the gap, which places it past the
        # gap's end; fold=1 with the offset after, before the gap. The end lies between.
        low = wall.replace(tzinfo=self._zone, fold=1).astimezone(UTC)
        high = first.astimezone(UTC)
        while high - low > _MS:
            middle = low + (high - low) // 2
            if middle.astimezone(self._zone).replace(tzinfo=None) > wall:
                high = middle
            else:
                low = middle
        return high


def _to_ms(instant: datetime) -> int:
    return (instant - _EPOCH) // _MS
