"""W3C Trace Context: the ``traceparent`` and ``tracestate`` a timer keeps from the request
that created it, and the ``traceparent`` each of its callback attempts sends as a child.

Only the standard library: a trace continues from the creating request to the receiver with
nothing installed beyond the base package. Parsing is strict (version ``00`` as this
version of the recommendation writes it, lower-case hex, ids not all zeros) and
``tracestate`` is bounded, so what a store keeps for a timer is small and well formed.
"""

from __future__ import annotations

import os
import re

from tickwheel.errors import InvalidTimer

__all__ = [
    "MAX_TRACESTATE_CHARS",
    "MAX_TRACESTATE_MEMBERS",
    "attempt_traceparent",
    "check_trace",
    "parse_traceparent",
    "parse_tracestate",
]

# version 00: 2 hex, trace id 32, parent (span) id 16, flags 2, each part lower-case hex
_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16
# a list member: a key (simple, or tenant@system) and a value of printable ASCII but , and =
_MEMBER = re.compile(
    r"(?:[a-z][a-z0-9_*/-]{0,255}|[a-z0-9][a-z0-9_*/-]{0,240}@[a-z][a-z0-9_*/-]{0,13})"
    r"=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]"
)
MAX_TRACESTATE_MEMBERS = 32
"""The recommendation's own cap on list members."""
MAX_TRACESTATE_CHARS = 512
"""What a platform must at least pass on; a longer ``tracestate`` is dropped, not cut."""


def parse_traceparent(value: str | None) -> str | None:
    """Return `value` if it is a valid version-00 ``traceparent``, else None.

    A receiver of an invalid one starts a new trace (the recommendation's rule), so the API
    drops it silently instead of refusing the request.
    """
    if value is None or len(value) != 55:
        return None
    match = _TRACEPARENT.fullmatch(value)
    if match is None or match[1] == _ZERO_TRACE or match[2] == _ZERO_SPAN:
        return None
    return value


def parse_tracestate(value: str | None) -> str | None:
    """Return `value` without empty members or the spaces around them if every member is
    valid, at most `MAX_TRACESTATE_MEMBERS` and `MAX_TRACESTATE_CHARS` in all; else None."""
    if value is None or len(value) > MAX_TRACESTATE_CHARS:
        return None
    members = [member.strip(" \t") for member in value.split(",")]
    members = [member for member in members if member]
    if not members or len(members) > MAX_TRACESTATE_MEMBERS:
        return None
    keys = set()
    for member in members:
        if _MEMBER.fullmatch(member) is None:
            return None
        keys.add(member.partition("=")[0])
    if len(keys) != len(members):
        return None
    return ",".join(members)


def check_trace(trace_parent: object, trace_state: object) -> None:
    """Refuse a timer's trace fields unless both are valid and ``tracestate`` comes with a
    ``traceparent`` (the Python API raises where the HTTP API drops the headers)."""
    if trace_parent is not None and (
        not isinstance(trace_parent, str) or parse_traceparent(trace_parent) != trace_parent
    ):
        raise InvalidTimer(
            "trace_parent", "must be a W3C traceparent: 00-<32 hex>-<16 hex>-<2 hex>"
        )
    if trace_state is None:
        return
    if trace_parent is None:
        raise InvalidTimer("trace_state", "is kept only with a trace_parent")
    if not isinstance(trace_state, str) or parse_tracestate(trace_state) != trace_state:
        raise InvalidTimer(
            "trace_state",
            f"must be a W3C tracestate of at most {MAX_TRACESTATE_MEMBERS} members and "
            f"{MAX_TRACESTATE_CHARS} characters, without spaces around them",
        )


def attempt_traceparent(trace_parent: str, span_id: str | None = None) -> str:
    """The ``traceparent`` of one attempt: the same trace and flags, the attempt's span id
    (`span_id`, 16 hex digits, or a fresh random one)."""
    span = os.urandom(8).hex() if span_id is None else span_id
    return f"{trace_parent[:36]}{span}{trace_parent[52:]}"
