"""The trace context a timer was created with: every backend keeps it through add, claim,
retry, list and replay, and it is no part of the spec an idempotent repeat compares."""

from __future__ import annotations

from tickwheel.model import Callback, Timer
from tickwheel.stores import Store

from .conftest import ManualClock

PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
STATE = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
HOOK = Callback(url="https://example.com/hook")


def traced(clock: ManualClock, timer_id: str, **fields: object) -> Timer:
    return Timer(  # type: ignore[arg-type]
        id=timer_id,
        due_ms=clock.now_ms + 1000,
        callback=HOOK,
        trace_parent=PARENT,
        trace_state=STATE,
        **fields,
    )


async def test_the_trace_context_is_kept_through_claim_retry_and_replay(
    store: Store, clock: ManualClock
) -> None:
    added = await store.add(traced(clock, "t1"))
    assert (added.trace_parent, added.trace_state) == (PARENT, STATE)
    got = await store.get("t1")
    assert got is not None
    assert (got.trace_parent, got.trace_state) == (PARENT, STATE)
    clock.advance(1000)
    (lease,) = await store.claim("default", clock.now_ms, 10, 30_000)
    assert (lease.timer.trace_parent, lease.timer.trace_state) == (PARENT, STATE)
    await store.retry(lease, clock.now_ms, "HTTP 503")
    (again,) = await store.claim("default", clock.now_ms, 10, 30_000)
    assert again.timer.trace_parent == PARENT
    await store.kill(again, "HTTP 404")
    await store.replay("t1")
    (listed,) = (await store.list(None, 10, None)).timers
    assert (listed.trace_parent, listed.trace_state) == (PARENT, STATE)


async def test_a_trace_parent_alone_and_none_at_all_round_trip(
    store: Store, clock: ManualClock
) -> None:
    await store.add(Timer(id="alone", due_ms=clock.now_ms + 5, callback=HOOK, trace_parent=PARENT))
    await store.add(Timer(id="plain", due_ms=clock.now_ms + 5, callback=HOOK))
    added = await store.add_many(
        [traced(clock, f"b{n}") for n in range(3)] + [Timer(id="p2", due_ms=clock.now_ms)]
    )
    assert [t.trace_parent for t in added] == [PARENT, PARENT, PARENT, None]
    alone, plain = await store.get("alone"), await store.get("plain")
    assert alone is not None
    assert plain is not None
    assert (alone.trace_parent, alone.trace_state) == (PARENT, None)
    assert (plain.trace_parent, plain.trace_state) == (None, None)
    got = await store.get("b2")
    assert got is not None
    assert got.trace_state == STATE


async def test_a_repeat_with_another_trace_is_the_same_timer(
    store: Store, clock: ManualClock
) -> None:
    """A client retrying a create sends a new traceparent; the timer keeps its first."""
    first = await store.add(traced(clock, "t1"))
    other = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    again = await store.add(first.evolve(trace_parent=other, trace_state=None))
    assert again.trace_parent == PARENT
