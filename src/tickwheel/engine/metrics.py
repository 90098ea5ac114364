"""Prometheus metrics of the firing engine, on a registry of the caller's choosing."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# seconds: the engine aims at single-digit ms; the tail buckets show outages and backlogs
LATENESS_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60)
BATCH_BUCKETS = (0, 1, 10, 100, 1000, 10_000)


class Metrics:
    """Counters, a lateness histogram and gauges for one worker or consumer.

    Each instance registers on its own `CollectorRegistry` unless given one, so tests and
    several workers in one process never collide on the global registry.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.fired = Counter("tickwheel_fired", "Delivery attempts started", ["queue"], registry=r)
        self.acked = Counter("tickwheel_acked", "Timers delivered and acked", ["queue"], registry=r)
        self.retried = Counter(
            "tickwheel_retried",
            "Attempts that failed and were scheduled again",
            ["queue"],
            registry=r,
        )
        self.dead = Counter(
            "tickwheel_dead_lettered", "Timers moved to the dead letters", ["queue"], registry=r
        )
        self.lateness = Histogram(
            "tickwheel_lateness_seconds",
            "Fired time minus due time, by the store's clock",
            ["queue"],
            buckets=LATENESS_BUCKETS,
            registry=r,
        )
        self.in_flight = Gauge(
            "tickwheel_in_flight", "Timers claimed and not yet settled", registry=r
        )
        self.claimed = Histogram(
            "tickwheel_claim_batch_size", "Timers per claim", buckets=BATCH_BUCKETS, registry=r
        )
        self.store_errors = Counter(
            "tickwheel_store_errors",
            "Store calls that failed (unavailable)",
            ["operation"],
            registry=r,
        )
        self._fired_children: dict[str, tuple[Counter, Histogram]] = {}
        self.leases_lost = Counter(
            "tickwheel_leases_lost", "Settles refused because the lease had passed on", registry=r
        )

    def observe_fired(self, queue: str, late_s: float) -> None:
        """Count a delivery attempt of `queue` and how late it started (children cached)."""
        children = self._fired_children.get(queue)
        if children is None:
            children = self._fired_children[queue] = (
                self.fired.labels(queue),
                self.lateness.labels(queue),
            )
        fired, lateness = children
        fired.inc()
        lateness.observe(max(late_s, 0.0))
