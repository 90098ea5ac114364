"""Idempotent creation: a timer from a request, the repeat rule, and batches with one `add_many`.

A client that sends the same create again (a retry after a lost answer) gets the stored timer
back, not a second timer nor an error; the same id with another spec is a conflict (409).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ValidationError

from tickwheel.callbacks.guard import check_target_url
from tickwheel.errors import CapReached, InvalidArgument, NotReplicated, TimerExists
from tickwheel.model import Timer
from tickwheel.service.api_errors import ApiError, describe
from tickwheel.service.routes import access
from tickwheel.service.routes.deps import Context
from tickwheel.service.schemas import BatchItemOut, TimerIn, TimerOut
from tickwheel.service.tenants import Tenant
from tickwheel.service.trace_headers import NO_TRACE, Trace
from tickwheel.stores.base import Store

DELAY_MATCH_MS = 1000
"""How far a repeat sent with `delay` may land from the stored due time and still match it."""
LOOKUPS_AT_ONCE = 32
"""Concurrent `get`s of one batch; each may hold a store connection."""


def build(
    context: Context,
    store: Store,
    item: TimerIn,
    now_ms: int,
    timer_id: str | None = None,
    tenant: Tenant | None = None,
    trace: Trace = NO_TRACE,
) -> Timer:
    """Make the timer `item` describes, due as `store` takes it from `now_ms` (its clock), with
    the request's `trace` context, refusing a callback URL the service may not call and a queue
    the tenant may not use (403)."""
    access.check_queue(tenant, item.queue)
    timer = item.to_timer(now_ms, store.settings, timer_id)
    if timer.callback is not None:
        check_target_url(
            timer.callback.parsed_url, allow_private=context.settings.allow_private_targets
        )
    if trace[0] is not None:
        timer = timer.evolve(trace_parent=trace[0], trace_state=trace[1])
    return timer


def _same(existing: Timer, timer: Timer, item: TimerIn) -> bool:
    """Whether `timer` repeats `existing`; with `delay` the due time is matched to the creation."""
    if item.delay is None:
        return existing.spec() == timer.spec()
    drift = existing.due_ms - existing.created_ms - item.delay
    if abs(drift) > DELAY_MATCH_MS:
        return False
    return existing.evolve(due_ms=timer.due_ms).spec() == timer.spec()


async def put(
    store: Store,
    timer: Timer,
    item: TimerIn,
    *,
    replace: bool,
    admit: Callable[[Timer], Awaitable[None]] | None = None,
) -> tuple[int, Timer]:
    """Store `timer`: 201 when new, 200 when repeated or (with `replace`) replaced; else 409.

    `admit` checks a new timer against the tenant's quotas first; a repeat costs none."""
    existing = await store.get(timer.id) if item.id is not None or replace else None
    if existing is not None and _same(existing, timer, item):
        return 200, existing
    if existing is not None and not replace:
        raise TimerExists(timer.id)
    if existing is None and admit is not None:
        await admit(timer)
    stored = await store.add(timer, replace=replace, due_checked=True)
    return (201 if existing is None else 200), stored


def _item_error(error: Exception) -> BatchItemOut:
    status, detail, _ = describe(error)
    return BatchItemOut(status=status, error=detail)


async def batch(
    context: Context,
    store: Store,
    raw: list[Any],
    tenant: Tenant | None = None,
    trace: Trace = NO_TRACE,
) -> list[BatchItemOut]:
    """Answer each item as ``POST /v1/timers`` would, storing the new ones with one `add_many`;
    the new ones all or none within the tenant's quotas (else 429, nothing stored). Every
    item keeps the request's `trace` context."""
    results: dict[int, BatchItemOut] = {}
    first: dict[str, tuple[int, Timer, TimerIn]] = {}  # id -> its first valid item
    repeats: list[tuple[int, Timer]] = []
    now_ms = store.now_ms()  # one `now` for all: a repeated `delay` gives the same due time
    for index, fields in enumerate(raw):
        try:
            item = TimerIn.model_validate(fields)
            timer = build(context, store, item, now_ms, tenant=tenant, trace=trace)
        except (ValidationError, InvalidArgument, ApiError) as error:
            results[index] = _item_error(error)
        else:
            if timer.id in first:
                repeats.append((index, timer))
            else:
                first[timer.id] = (index, timer, item)
    given = [(i, timer, item) for i, timer, item in first.values() if item.id is not None]
    found = await _get_many(store, [timer.id for _, timer, _ in given])
    new = [(i, timer, item) for i, timer, item in first.values() if item.id is None]
    for (index, timer, item), existing in zip(given, found, strict=True):
        if existing is None:
            new.append((index, timer, item))
        elif _same(existing, timer, item):
            results[index] = BatchItemOut(status=200, timer=TimerOut.of(existing))
        else:
            results[index] = _item_error(TimerExists(timer.id))
    await access.admit(context, store, tenant, [timer for _, timer, _ in new])
    refused = await context.queue_cap.refused(store, {timer.queue for _, timer, _ in new})
    if refused:
        cap = CapReached("queues", context.queue_cap.max_queues, "queue")
        results.update((i, _item_error(cap)) for i, timer, _ in new if timer.queue in refused)
        new = [entry for entry in new if entry[1].queue not in refused]
    # stored in request order, so equal due times fire in the order the client listed them
    results.update(await _add_new(store, sorted(new, key=lambda entry: entry[0])))
    for index, timer in repeats:
        earlier_index, earlier, _ = first[timer.id]
        earlier_result = results[earlier_index]
        if earlier_result.timer is not None and earlier.spec() == timer.spec():
            results[index] = BatchItemOut(status=200, timer=earlier_result.timer)
        else:
            results[index] = _item_error(TimerExists(timer.id))
    return [results[index] for index in range(len(raw))]


async def _get_many(store: Store, timer_ids: list[str]) -> list[Timer | None]:
    """Look the ids up a few at a time: concurrently, without a connection per id."""
    found: list[Timer | None] = []
    for start in range(0, len(timer_ids), LOOKUPS_AT_ONCE):
        chunk = timer_ids[start : start + LOOKUPS_AT_ONCE]
        found += await asyncio.gather(*(store.get(timer_id) for timer_id in chunk))
    return found


async def _add_new(store: Store, new: list[tuple[int, Timer, TimerIn]]) -> dict[int, BatchItemOut]:
    if not new:
        return {}
    try:
        stored = await store.add_many([timer for _, timer, _ in new], due_checked=True)
    except NotReplicated as error:
        # each was stored: its item carries the timer beside the error, so the client knows
        return {index: _not_replicated(timer, error) for index, timer, _ in new}
    except TimerExists:
        # an id taken meanwhile: one by one, each item gets its own answer (those add_many
        # stored already are repeats of themselves)
        return {index: await _add_one(store, timer) for index, timer, _ in new}
    return {
        index: BatchItemOut(status=201, timer=TimerOut.of(timer))
        for (index, _, _), timer in zip(new, stored, strict=True)
    }


def _not_replicated(timer: Timer, error: NotReplicated) -> BatchItemOut:
    status, detail, _ = describe(NotReplicated((timer.id,), error.reason))
    return BatchItemOut(status=status, timer=TimerOut.of(timer), error=detail)


async def _add_one(store: Store, timer: Timer) -> BatchItemOut:
    try:
        stored = await store.add(timer, due_checked=True)
        return BatchItemOut(status=201, timer=TimerOut.of(stored))
    except NotReplicated as error:
        return _not_replicated(timer, error)
    except TimerExists as error:
        return _item_error(error)
