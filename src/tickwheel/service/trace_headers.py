"""The trace context of a create request: its W3C headers, or its OpenTelemetry span's.

A ``traceparent`` that is missing, repeated or invalid is ignored, as the recommendation asks
of a receiver (the timer then carries none); a ``tracestate`` is kept only beside a valid one.
With OpenTelemetry configured the request gets a ``tickwheel create`` span, the child of its
headers, and the timer keeps that span's context instead, so its attempts hang under it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from tickwheel.engine.tracing import spans
from tickwheel.tracecontext import parse_traceparent, parse_tracestate

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


@contextmanager
def creating(headers: Iterable[tuple[bytes, bytes]], **attributes: str | int) -> Iterator[Trace]:
    """Give the trace context the timers a request creates keep, inside its span if any."""
    trace = request_trace(headers)
    otel = spans()
    span = None if otel is None else otel.start("tickwheel create", *trace, attributes=attributes)
    if otel is None or span is None:
        yield trace
        return
    try:
        yield otel.traceparent(span) or trace
    except Exception as error:
        otel.fail(span, type(error).__name__)
        raise
    finally:
        span.end()
