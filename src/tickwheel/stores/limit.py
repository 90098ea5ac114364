"""`Limit`: a bound on callbacks to one target (a host or a queue), and the bounds of its
fields; stores keep limits beside queue settings, workers enforce them together."""

from __future__ import annotations

from dataclasses import dataclass

from tickwheel.errors import InvalidArgument

MAX_LIMITS = 100_000
"""Host limits one store holds at most by default."""
MIN_RATE = 1 / 86_400  # one a day: slower would hold a limited timer back for good
MAX_RATE = 100_000.0
MAX_BURST = 100_000
MAX_CONCURRENCY = 10_000


@dataclass(frozen=True, slots=True, kw_only=True)
class Limit:
    """A bound on callbacks to one target (a host or a queue), kept by every worker together.

    `rate` callbacks a second on average with bursts of up to `burst` (a token bucket; `burst`
    defaults to one second's worth), and at most `concurrency` in flight; either or both.
    """

    rate: float | None = None
    burst: int | None = None
    concurrency: int | None = None

    def __post_init__(self) -> None:
        if self.rate is None and self.concurrency is None:
            raise InvalidArgument("rate", "give a rate, a concurrency or both")
        if self.rate is not None and not MIN_RATE <= self.rate <= MAX_RATE:
            raise InvalidArgument("rate", f"must be from one a day to {MAX_RATE:g} a second")
        if self.burst is not None:
            if self.rate is None:
                raise InvalidArgument("burst", "needs a rate")
            if not 1 <= self.burst <= MAX_BURST:
                raise InvalidArgument("burst", f"must be 1 to {MAX_BURST}")
        if self.concurrency is not None and not 1 <= self.concurrency <= MAX_CONCURRENCY:
            raise InvalidArgument("concurrency", f"must be 1 to {MAX_CONCURRENCY}")

    @property
    def bucket(self) -> int:
        """The burst the token bucket allows: `burst`, or one second of `rate` (at least 1)."""
        if self.burst is not None:
            return self.burst
        return max(1, int(self.rate or 1))
