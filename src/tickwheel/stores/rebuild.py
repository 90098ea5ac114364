"""Timers as a store hands them back, rebuilt from fields it validated when they were added.

A claim rebuilds one `Timer` per lease, and a get or list one per record; validating each again
would cost about half of a claim's client time (bench/stores.py). These set the frozen
dataclass's slots directly; `model.restore` does the same for any model class, by keyword.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from tickwheel.model import Callback, RetryPolicy, State, Timer

SETTERS = {field.name: getattr(Timer, field.name).__set__ for field in fields(Timer)}
"""Each `Timer` field's slot setter: it skips the frozen ``__setattr__``, at half the cost of
``object.__setattr__`` with its name lookup."""
_set_id = SETTERS["id"]
_set_due_ms = SETTERS["due_ms"]
_set_queue = SETTERS["queue"]
_set_callback = SETTERS["callback"]
_set_payload = SETTERS["payload"]
_set_retry = SETTERS["retry"]
_set_attempt = SETTERS["attempt"]
_set_state = SETTERS["state"]
_set_created_ms = SETTERS["created_ms"]
_set_updated_ms = SETTERS["updated_ms"]
_set_last_error = SETTERS["last_error"]
_set_first_claimed_ms = SETTERS["first_claimed_ms"]
_set_deferrals = SETTERS["deferrals"]
_set_trace_parent = SETTERS["trace_parent"]
_set_trace_state = SETTERS["trace_state"]


def stored_timer(
    timer_id: str,
    due_ms: int,
    queue: str,
    callback: Callback | None,
    payload: Any,
    retry: RetryPolicy,
    attempt: int,
    state: State,
    created_ms: int,
    updated_ms: int,
    last_error: str | None,
    first_claimed_ms: int | None,
    deferrals: int = 0,
    trace_parent: str | None = None,
    trace_state: str | None = None,
) -> Timer:
    """Return a `Timer` with every field given, in the dataclass's order, not validated.

    Positional arguments and twelve direct slot sets cost less than half of keywords and a
    loop; a test checks that it builds the same timer as the constructor.
    """
    timer = object.__new__(Timer)
    _set_id(timer, timer_id)
    _set_due_ms(timer, due_ms)
    _set_queue(timer, queue)
    _set_callback(timer, callback)
    _set_payload(timer, payload)
    _set_retry(timer, retry)
    _set_attempt(timer, attempt)
    _set_state(timer, state)
    _set_created_ms(timer, created_ms)
    _set_updated_ms(timer, updated_ms)
    _set_last_error(timer, last_error)
    _set_first_claimed_ms(timer, first_claimed_ms)
    _set_deferrals(timer, deferrals)
    _set_trace_parent(timer, trace_parent)
    _set_trace_state(timer, trace_state)
    return timer


def as_scheduled(timer: Timer, now_ms: int, attempt: int = 0, deferrals: int = 0) -> Timer:
    """Return `timer` as a store keeps it once scheduled at `now_ms`: the caller's spec, the
    store's bookkeeping fresh but for `attempt` and `deferrals`, which a replaced timer
    carries over."""
    return stored_timer(
        timer.id,
        timer.due_ms,
        timer.queue,
        timer.callback,
        timer.payload,
        timer.retry,
        attempt,
        State.SCHEDULED,
        now_ms,
        now_ms,
        None,
        None,
        deferrals,
        timer.trace_parent,
        timer.trace_state,
    )
