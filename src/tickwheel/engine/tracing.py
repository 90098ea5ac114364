"""OpenTelemetry spans of a timer's steps (create, claim, attempt, settle), when the `otel`
extra is installed and the application has configured a tracer provider; else nothing.

OpenTelemetry is imported on first use, never by ``import tickwheel``, and a step costs a
clock read while no SDK is configured (spans start within a second of the application setting
one). A span's parent is the timer's stored ``traceparent``, so a receiver's trace goes on
from the request that scheduled the timer.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from tickwheel.model import Timer
    from tickwheel.stores.base import Lease

__all__ = ["MAX_LINKS", "Spans", "spans"]

MAX_LINKS = 128
"""Timers a claim's span links to (one claim may lease 1,000, of as many traces)."""
RECHECK_S = 1.0
"""How often, until it has one, the process looks for a configured tracer provider."""


class Spans:
    """Starts tickwheel's spans on OpenTelemetry's global tracer provider."""

    def __init__(self) -> None:
        from opentelemetry import trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self._trace = trace
        self._propagator = TraceContextTextMapPropagator()
        self._tracer = trace.get_tracer("tickwheel")
        self._proxy = trace.ProxyTracerProvider
        self._set = False
        self._next_check_s = 0.0

    def configured(self) -> bool:
        """Whether the application has set a tracer provider (else every span is a no-op).

        Once set, a provider stays; until then this asks at most once a second (asking costs
        a microsecond, an environment lookup, and runs on every create and attempt)."""
        if self._set:
            return True
        now = time.monotonic()
        if now < self._next_check_s:
            return False
        self._next_check_s = now + RECHECK_S
        self._set = not isinstance(self._trace.get_tracer_provider(), self._proxy)
        return self._set

    def start(
        self,
        name: str,
        parent: str | None,
        state: str | None = None,
        *,
        client: bool = False,
        attributes: Mapping[str, str | int] | None = None,
    ) -> Span | None:
        """Start a span under the trace context `parent` (a ``traceparent``; a new trace when
        None), or return None when no provider is configured; the caller ends it."""
        if not self.configured():
            return None
        kind = self._trace.SpanKind.CLIENT if client else self._trace.SpanKind.INTERNAL
        return self._tracer.start_span(
            name,
            context=None if parent is None else self._context(parent, state),
            kind=kind,
            attributes=attributes,
        )

    def claimed(self, leases: Sequence[Lease]) -> None:
        """Record the claim of `leases` (one queue's batch, as the worker takes it), linked to
        the traces of up to `MAX_LINKS` of them."""
        if not leases or not self.configured():
            return
        queue = leases[0].timer.queue
        traced = [(t.trace_parent, t.trace_state) for t in (lease.timer for lease in leases)]
        span = self._tracer.start_span(
            "tickwheel claim",
            attributes={"tickwheel.queue": queue, "tickwheel.timers": len(leases)},
            links=[
                self._trace.Link(c)
                for c in (self._remote(p, s) for p, s in traced[:MAX_LINKS] if p is not None)
                if c is not None
            ],
        )
        span.end()

    def settled(self, timer: Timer, outcome: str, start_ns: int) -> None:
        """Record how a fired timer was settled (ack, retry, kill, defer) in its own trace."""
        if not self.configured():
            return
        span = self._tracer.start_span(
            "tickwheel settle",
            context=None
            if timer.trace_parent is None
            else self._context(timer.trace_parent, timer.trace_state),
            attributes={
                "tickwheel.timer.id": timer.id,
                "tickwheel.queue": timer.queue,
                "tickwheel.outcome": outcome,
            },
            start_time=start_ns,
        )
        span.end()

    def traceparent(self, span: Span) -> tuple[str, str | None] | None:
        """The ``traceparent`` and ``tracestate`` that make `span` a request's parent (None
        for a span without a valid context)."""
        carrier: dict[str, str] = {}
        self._propagator.inject(carrier, self._trace.set_span_in_context(span))
        parent = carrier.get("traceparent")
        return None if parent is None else (parent, carrier.get("tracestate") or None)

    def fail(self, span: Span, error_type: str) -> None:
        """Mark `span` failed with the low-cardinality `error_type` (no message: it may quote
        a receiver's body or the URL)."""
        span.set_attribute("error.type", error_type)
        span.set_status(self._trace.Status(self._trace.StatusCode.ERROR))

    def _context(self, parent: str, state: str | None) -> Any:
        carrier = {"traceparent": parent}
        if state is not None:
            carrier["tracestate"] = state
        return self._propagator.extract(carrier)

    def _remote(self, parent: str, state: str | None) -> Any:
        context = self._trace.get_current_span(self._context(parent, state)).get_span_context()
        return context if context.is_valid else None


_SPANS: list[Spans | None] = []


def spans() -> Spans | None:
    """The process's `Spans`, or None when OpenTelemetry is not installed."""
    if not _SPANS:
        try:
            _SPANS.append(Spans())
        except ImportError:
            _SPANS.append(None)
    return _SPANS[0]
