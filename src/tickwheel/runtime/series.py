"""A recurring call: one wheel entry at a time, re-armed from the rule as each occurrence fires."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Protocol

from tickwheel.recurrence import Recurrence


class SeriesOwner(Protocol):
    """The scheduler a series belongs to (`WheelTimers`): it ends the series and re-arms it."""

    def end_series(self, series: Series) -> bool:
        """End `series`; return whether it was still going."""
        ...

    def rearm_series(self, series: Series, nominal_ms: int) -> None:
        """Arm the occurrence of `series` after the one nominally due at `nominal_ms`."""
        ...


class Series:
    """The handle `every` and `cron` return: `next_run` says when it fires next, `cancel` ends it.

    The next occurrence is armed just before the callback is called, at the rule's next time
    after this occurrence's (never after the moment it ran, so the series does not drift), so a
    callback still running when the next occurrence comes does not hold the series up: runs
    may overlap. Occurrences missed while the driver could not run (a suspended process, a
    blocked loop) are dropped: the series fires once, late, then follows the rule again.
    """

    __slots__ = ("_args", "_fn", "_next_ms", "_owner", "_rule", "ended", "key")

    def __init__(
        self,
        owner: SeriesOwner,
        rule: Recurrence,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        key: Hashable | None,
    ) -> None:
        self._owner = owner
        self._rule = rule
        self._fn = fn
        self._args = args
        self.key = key
        self._next_ms: int | None = None
        self.ended = False

    @property
    def next_run(self) -> float | None:
        """When the next occurrence is due, in epoch seconds; None once the series has ended."""
        return None if self.ended or self._next_ms is None else self._next_ms / 1000

    def cancel(self) -> bool:
        """End the series; return whether it was still going."""
        return self._owner.end_series(self)

    def next_after(self, after_ms: int) -> int | None:
        """The rule's first occurrence after `after_ms`."""
        return self._rule.next_after(after_ms)

    def armed(self, due_ms: int | None) -> None:
        """Record the occurrence now waiting in the wheel (None: the rule has no more)."""
        self._next_ms = due_ms
        if due_ms is None:
            self.ended = True

    def occur(self, nominal_ms: int) -> Any:
        """Fire one occurrence: arm the next, then make the call."""
        self._owner.rearm_series(self, nominal_ms)
        return self._fn(*self._args)

    def __repr__(self) -> str:
        name = getattr(self._fn, "__qualname__", repr(self._fn))
        return f"<Series {name} key={self.key!r} next_run={self.next_run!r}>"
