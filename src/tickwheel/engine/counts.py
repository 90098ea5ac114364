"""What a worker or consumer did, counted in plain integers: per queue, lateness, claims,
store errors, and callbacks by host.

prometheus-client's own counters and histograms take a lock per update, which cost ~15 µs per
delivered timer (a third of a 20,000-timer burst's client time, bench/engine.py): the engine
counts in ints instead, on its event loop's thread, and `export.py` renders them when a
registry is scraped (a scrape from another thread reads ints).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tickwheel.engine.changes import ChangeFeed
    from tickwheel.stores import Lease

# seconds: the engine aims at single-digit ms; the tail buckets show outages and backlogs
LATENESS_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60)
BATCH_BUCKETS = (0, 1, 10, 100, 1000, 10_000)
# seconds a callback waited for a limit's grant: a token is 1/rate away; a hold up to minutes
LIMITER_BUCKETS = (0.001, 0.01, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
TOP_HOSTS = 20
"""Target hosts that get a label of their own on the callback counts; the rest are "other"."""
OTHER_HOST = "other"
RANK_EVERY = 10_000
"""Callbacks counted between two rankings of the hosts (and at most `MAX_CANDIDATES` hosts)."""
MAX_CANDIDATES = 4 * TOP_HOSTS


class Buckets:
    """A histogram's counts per bucket (upper bounds inclusive) and its sum."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)  # the last one is +Inf
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    def cumulative(self) -> list[tuple[str, float]]:
        running = 0
        pairs = []
        for bound, count in zip((*map(str, self.bounds), "+Inf"), self.counts, strict=True):
            running += count
            pairs.append((bound, float(running)))
        return pairs


class HostCounts:
    """Callbacks by outcome and target host, with at most `top` hosts named, the rest "other".

    Hosts are ranked by their callbacks over the last `RANK_EVERY` (counted for at most
    `MAX_CANDIDATES` hosts at a time, a misra-gries sketch, so a flood of one-off hosts costs
    no memory). After each ranking the top ones are counted under their own label from then
    on; a host that drops out of the top loses its series, so each series only ever grows, and
    "other" holds every callback not counted under a host's name.
    """

    __slots__ = ("_named", "_seen", "_since", "counts", "top")

    def __init__(self, top: int = TOP_HOSTS) -> None:
        self.top = top
        self.counts: dict[tuple[str, str], int] = {}  # (outcome, host or "other") -> count
        self._named: set[str] = set()
        self._seen: dict[str, int] = {}
        self._since = 0

    def count(self, host: str, outcome: str) -> None:
        seen = self._seen
        if host in seen:
            seen[host] += 1
        elif len(seen) < MAX_CANDIDATES:
            seen[host] = 1
        else:  # misra-gries: a newcomer takes one from every candidate
            for name in list(seen):
                seen[name] -= 1
                if not seen[name]:
                    del seen[name]
        self._since = since = self._since + 1
        named = self._named
        if host in named:
            if since >= RANK_EVERY:
                self._rank()
                named = self._named
        elif since >= RANK_EVERY or len(named) < self.top:
            self._rank()
            named = self._named
        key = (outcome, host if host in named else OTHER_HOST)
        counts = self.counts
        counts[key] = counts.get(key, 0) + 1

    def _rank(self) -> None:
        ranked = sorted(self._seen.items(), key=lambda item: (-item[1], item[0]))
        named = {host for host, _ in ranked[: self.top]}
        if self._since >= RANK_EVERY:
            self._seen = {}
            self._since = 0
        for host in self._named - named:
            for key in [key for key in self.counts if key[1] == host]:
                del self.counts[key]
        self._named = named

    def labels(self) -> set[str]:
        """The host labels the counts carry now (at most `top` hosts and "other")."""
        return {host for _, host in self.counts}


class Counts:
    """What one worker or consumer did: counts per queue, lateness, claims, store errors."""

    def __init__(self) -> None:
        self.fired: Counter[str] = Counter()
        self.acked: Counter[str] = Counter()
        self.retried: Counter[str] = Counter()
        self.dead: Counter[str] = Counter()
        self.skipped: Counter[str] = Counter()
        self.store_errors: Counter[str] = Counter()  # by operation
        self.leases_lost = 0
        self.in_flight = 0
        self.queues_served = 0  # queues with a claim loop now
        self.queues_unserved = 0  # due queues waiting for their turn (past MAX_CLAIM_LOOPS)
        self.queues_resting = 0  # due queues whose targets hang, waiting for a paced turn
        self.lateness: dict[str, Buckets] = {}
        self.claimed = Buckets(BATCH_BUCKETS)
        self.limited_s: dict[str, float] = {}  # by queue: seconds callbacks waited for grants
        self.limiter_delay: dict[str, Buckets] = {}
        self.limit_deferred: Counter[str] = Counter()  # sent back to the store to wait there
        # handed back unsent, no attempt spent: a limit, a Retry-After hold, no free connection
        self.deferred: Counter[str] = Counter()
        self.callbacks = HostCounts()
        # where state changes go for the event stream (`changes.py`); None: nowhere
        self.changes: ChangeFeed | None = None

    def change(self, kind: str, lease: Lease) -> None:
        """Publish a state change of `lease`'s timer to the event stream, if there is one."""
        if self.changes is not None:
            timer = lease.timer
            self.changes.publish(kind, timer.id, timer.queue, lease.token - timer.deferrals)

    def observe_fired(self, queue: str, late_s: float) -> None:
        """Count a delivery attempt of `queue` and how late it started."""
        self.fired[queue] += 1
        lateness = self.lateness.get(queue)
        if lateness is None:
            lateness = self.lateness[queue] = Buckets(LATENESS_BUCKETS)
        lateness.observe(late_s if late_s > 0.0 else 0.0)

    def observe_limited(self, queue: str, waited_s: float) -> None:
        """Count the time a callback of `queue` waited for a limit's grant."""
        delay = self.limiter_delay.get(queue)
        if delay is None:
            delay = self.limiter_delay[queue] = Buckets(LIMITER_BUCKETS)
            self.limited_s[queue] = 0.0
        if waited_s:
            self.limited_s[queue] += waited_s
            delay.observe(waited_s)
        else:  # most grants need no wait: the first bucket, without a search
            delay.counts[0] += 1
