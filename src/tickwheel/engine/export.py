"""Render an engine's counts as Prometheus metric families when a registry is scraped.

Apart from the counting (`counts.py`) so that the engine runs without prometheus-client: it is
imported only when `Metrics` are registered on a registry.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from tickwheel.engine.counts import Counts


class MetricsCollector:
    """A registry's collector for one `Counts`: its counts as Prometheus families."""

    def __init__(self, metrics: Counts) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        m = self._metrics
        for name, help_text, counts in (
            ("tickwheel_fired", "Delivery attempts started", m.fired),
            ("tickwheel_acked", "Timers delivered and acked", m.acked),
            ("tickwheel_retried", "Timers scheduled again (failed or handed back)", m.retried),
            (
                "tickwheel_deferred",
                "Timers handed back unsent, spending no attempt (limit, hold, no connection)",
                m.deferred,
            ),
            ("tickwheel_dead_lettered", "Timers moved to the dead letters", m.dead),
            (
                "tickwheel_occurrences_skipped",
                "Schedule occurrences that came up late and were dropped (misfire: skip)",
                m.skipped,
            ),
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
        yield GaugeMetricFamily(
            "tickwheel_queues_served", "Queues this worker is claiming from", value=m.queues_served
        )
        yield GaugeMetricFamily(
            "tickwheel_queues_unserved",
            "Queues with due work, not paused, waiting for a claim loop (should stay 0)",
            value=m.queues_unserved,
        )
        yield GaugeMetricFamily(
            "tickwheel_queues_resting",
            "Queues with due work whose targets hang, waiting for their paced turn to be claimed",
            value=m.queues_resting,
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
        limited = CounterMetricFamily(
            "tickwheel_limited_seconds",
            "Seconds callbacks waited for a host's or a queue's limit",
            labels=["queue"],
        )
        for queue, seconds in sorted(m.limited_s.items()):
            limited.add_metric([queue], seconds)
        yield limited
        delay = HistogramMetricFamily(
            "tickwheel_limiter_delay_seconds",
            "How long each limited callback waited for its grant",
            labels=["queue"],
        )
        for queue, buckets in sorted(m.limiter_delay.items()):
            delay.add_metric([queue], buckets.cumulative(), buckets.total)
        yield delay
        deferred = CounterMetricFamily(
            "tickwheel_limit_deferred",
            "Limited callbacks sent back to the store to wait for their turn there",
            labels=["queue"],
        )
        for queue, count in sorted(m.limit_deferred.items()):
            deferred.add_metric([queue], count)
        yield deferred
        callbacks = CounterMetricFamily(
            "tickwheel_callbacks",
            "Callback attempts by outcome and target host (the busiest hosts, the rest 'other')",
            labels=["outcome", "host"],
        )
        for (outcome, host), count in sorted(m.callbacks.counts.items()):
            callbacks.add_metric([outcome, host], count)
        yield callbacks
        yield CounterMetricFamily(
            "tickwheel_leases_lost",
            "Settles refused because the lease had passed on",
            value=m.leases_lost,
        )
