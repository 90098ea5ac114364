"""The trace context of a create request: its W3C headers, or its OpenTelemetry span's.

A ``traceparent`` that is missing, repeated or invalid is ignored, as the recommendation asks
of a receiver (the timer then carries none); a ``tracestate`` is kept only beside a valid one.
With OpenTelemetry configured the request gets a ``tickwheel create`` span, the child of its
headers, and the timer keeps that span's context instead, so its attempts hang under it.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import TracebackType
from typing import TYPE_CHECKING

from tickwheel.engine.tracing import Spans, spans
from tickwheel.tracecontext import parse_traceparent, parse_tracestate

if TYPE_CHECKING:
    from opentelemetry.trace import Span

Trace = tuple[str | None, str | None]
"""A ``traceparent`` and a ``tracestate``, either None."""
NO_TRACE: Trace = (None, None)


def request_trace(headers: Iterable[tuple[bytes, bytes]]) -> Trace:
    """The valid trace context among an ASGI request's `headers` (names in lower case)."""
    parents: list[bytes] = []
    states: list[bytes] = []
    for name, value in headers:
        if name == b"traceparent":
            parents.append(value)
        elif name == b"tracestate":
            states.append(value)
    if len(parents) != 1:
        return NO_TRACE
    parent = parse_traceparent(parents[0].decode("latin-1"))
    if parent is None:
        return NO_TRACE
    # several tracestate fields are one list, as HTTP joins repeated fields
    state = b",".join(states).decode("latin-1") if states else None
    return parent, parse_tracestate(state)


class creating:
    """Give the trace context the timers a request creates keep, inside its span if any.

    A class, not a generator: it runs on every create, where a generator-based context
    manager costs about a microsecond more.
    """

    __slots__ = ("_attributes", "_headers", "_otel", "_span")

    def __init__(self, headers: Iterable[tuple[bytes, bytes]], **attributes: str | int) -> None:
        self._headers = headers
        self._attributes = attributes
        self._otel: Spans | None = None
        self._span: Span | None = None

    def __enter__(self) -> Trace:
        trace = request_trace(self._headers)
        otel = spans()
        if otel is None or not otel.configured():
            return trace
        span = otel.start("tickwheel create", *trace, attributes=self._attributes)
        if span is None:
            return trace
        self._otel, self._span = otel, span
        return otel.traceparent(span) or trace

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        span = self._span
        if span is None or self._otel is None:
            return
        if kind is not None and issubclass(kind, Exception):
            self._otel.fail(span, kind.__name__)
        span.end()
