"""`Limit`: a bound on callbacks to one target (a host or a queue), and the bounds of its
fields; stores keep limits beside queue settings, workers enforce them together. `Grants`:
what hands out the grants a limit allows; a store whose workers share them offers one
(`Store.limit_grants`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from tickwheel.errors import InvalidArgument

MAX_LIMITS = 100_000
"""Host limits one store holds at most by default."""
MIN_RATE = 1 / 86_400  # one a day: slower would hold a limited timer back for good
MAX_RATE = 100_000.0
MAX_BURST = 100_000
MAX_CONCURRENCY = 10_000

# (want, hold_ms, target keys, members, spare): one group of callbacks asking for `want`
# grants; the members name each one's concurrency grant, and are needed only when a target
# counts them; `spare` grants more are welcome while the targets' buckets are over half full
Ask = tuple[int, int, tuple[str, ...], Sequence[str], int]
# (granted, wait_ms, spare granted)
Answer = tuple[int, int, int]


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


class Grants(Protocol):
    """Token buckets and concurrency counts, per target key, that hand out grants."""

    async def take(
        self, limits: Mapping[str, Limit], releases: Sequence[tuple[str, str]], asks: Sequence[Ask]
    ) -> list[Answer]:
        """Give back `releases` (target key, member), then grant what each ask can have now.

        Each ask gets (granted, wait_ms, spare): how many of its first callbacks may go
        (taking a token and a concurrency unit, named by its member, of each of its targets;
        never more than it named when a target counts concurrency); when it is worth asking
        again: 0 when all were granted, the ms until the next token, or -1 while a concurrency
        count is full (ask again after a release); and how many spare grants it got besides,
        for callbacks arriving soon (never with a concurrency bound, nor from a bucket that
        would be left under half full).
        """
        ...
