"""What a worker or consumer did, counted in plain integers and exported to Prometheus on demand.

The engine counts in ints and a registered collector (`export.py`) turns them into metric
families when scraped: prometheus-client's own counters and histograms take a lock per update,
which cost ~15 µs per delivered timer (a third of a 20,000-timer burst's client time,
bench/engine.py). The engine updates them on its event loop's thread; a scrape from another
thread reads ints. prometheus-client is imported only once the counts are registered.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

# seconds: the engine aims at single-digit ms; the tail buckets show outages and backlogs
LATENESS_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60)
BATCH_BUCKETS = (0, 1, 10, 100, 1000, 10_000)


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


class Metrics:
    """What one worker or consumer did: counts per queue, lateness, claims, store errors.

    Given a `registry`, the counts are exported on it; else `registry` is a registry of their
    own, made on first use, so tests and several workers in one process never collide on the
    global one.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.fired: Counter[str] = Counter()
        self.acked: Counter[str] = Counter()
        self.retried: Counter[str] = Counter()
        self.dead: Counter[str] = Counter()
        self.skipped: Counter[str] = Counter()
        self.store_errors: Counter[str] = Counter()  # by operation
        self.leases_lost = 0
        self.in_flight = 0
        self.lateness: dict[str, Buckets] = {}
        self.claimed = Buckets(BATCH_BUCKETS)
        self._registry: CollectorRegistry | None = None
        if registry is not None:
            self.register(registry)

    @property
    def registry(self) -> CollectorRegistry:
        """The registry the counts are exported on; one of their own unless registered."""
        if self._registry is not None:
            return self._registry
        from prometheus_client import CollectorRegistry

        registry = CollectorRegistry()
        self.register(registry)
        return registry

    def register(self, registry: CollectorRegistry) -> None:
        """Export the counts on `registry` (as ``tickwheel_*`` metrics) from now on."""
        from tickwheel.engine.export import MetricsCollector

        registry.register(MetricsCollector(self))
        if self._registry is None:
            self._registry = registry

    def observe_fired(self, queue: str, late_s: float) -> None:
        """Count a delivery attempt of `queue` and how late it started."""
        self.fired[queue] += 1
        lateness = self.lateness.get(queue)
        if lateness is None:
            lateness = self.lateness[queue] = Buckets(LATENESS_BUCKETS)
        lateness.observe(max(late_s, 0.0))
