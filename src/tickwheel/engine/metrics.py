"""The engine's counts (`counts.py`) exported to Prometheus on demand.

A registered collector (`export.py`) turns the counts into metric families when scraped;
prometheus-client is imported only once the counts are registered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tickwheel.engine.counts import Counts

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry


class Metrics(Counts):
    """What one worker or consumer did: counts per queue, lateness, claims, store errors.

    Given a `registry`, the counts are exported on it; else `registry` is a registry of their
    own, made on first use, so tests and several workers in one process never collide on the
    global one.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__()
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
