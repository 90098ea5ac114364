"""Prometheus metrics of the firing engine, on a registry of the caller's choosing.

The engine counts in plain integers and a registered collector turns them into metric families
when scraped: prometheus-client's own counters and histograms take a lock per update, which
cost ~15 µs per delivered timer (a third of a 20,000-timer burst's client time, bench/engine.py).
The engine updates them on its event loop's thread; a scrape from another thread reads ints.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Iterator, Sequence

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

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

    Each instance registers on its own `CollectorRegistry` unless given one, so tests and
    several workers in one process never collide on the global registry.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.fired: Counter[str] = Counter()
        self.acked: Counter[str] = Counter()
        self.retried: Counter[str] = Counter()
        self.dead: Counter[str] = Counter()
        self.store_errors: Counter[str] = Counter()  # by operation
        self.leases_lost = 0
        self.in_flight = 0
        self.lateness: dict[str, Buckets] = {}
        self.claimed = Buckets(BATCH_BUCKETS)
        self.registry.register(_Collector(self))

    def observe_fired(self, queue: str, late_s: float) -> None:
        """Count a delivery attempt of `queue` and how late it started."""
        self.fired[queue] += 1
        lateness = self.lateness.get(queue)
        if lateness is None:
            lateness = self.lateness[queue] = Buckets(LATENESS_BUCKETS)
        lateness.observe(max(late_s, 0.0))


class _Collector:
    """Renders a `Metrics` as Prometheus families at scrape time."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        m = self._metrics
        for name, help_text, counts in (
            ("tickwheel_fired", "Delivery attempts started", m.fired),
            ("tickwheel_acked", "Timers delivered and acked", m.acked),
            ("tickwheel_retried", "Timers scheduled again (failed or handed back)", m.retried),
            ("tickwheel_dead_lettered", "Timers moved to the dead letters", m.dead),
        ):
            family = CounterMetricFamily(name, help_text, labels=["queue"])
            for queue, count in sorted(counts.items()):
                family.add_metric([queue], count)
            yield family
        lateness = HistogramMetricFamily(
            "tickwheel_lateness_seconds",
            "Fired time minus due time, by the store's clock",
            labels=["queue"],
        )
        for queue, buckets in sorted(m.lateness.items()):
            lateness.add_metric([queue], buckets.cumulative(), buckets.total)
        yield lateness
        yield GaugeMetricFamily(
            "tickwheel_in_flight", "Timers claimed and not yet settled", value=m.in_flight
        )
        claimed = HistogramMetricFamily("tickwheel_claim_batch_size", "Timers per claim")
        claimed.add_metric([], m.claimed.cumulative(), m.claimed.total)
        yield claimed
        errors = CounterMetricFamily(
            "tickwheel_store_errors", "Store calls that failed", labels=["operation"]
        )
        for operation, count in sorted(m.store_errors.items()):
            errors.add_metric([operation], count)
        yield errors
        yield CounterMetricFamily(
            "tickwheel_leases_lost",
            "Settles refused because the lease had passed on",
            value=m.leases_lost,
        )
