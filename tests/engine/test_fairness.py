"""`Fairness`: how the worker's callback slots are shared between prompt and hanging targets."""

from __future__ import annotations

import asyncio
from itertools import pairwise

import pytest

from tickwheel.engine.fairness import (
    MIN_DEFER_S,
    PROBE_S,
    RECOUNT_S,
    SEND_BACK_PER_TICK,
    STUCK_S,
    SUSPECT_PER_ORIGIN,
    Fairness,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def try_take(fair: Fairness, key: str) -> bool:
    """Take a slot if one comes within 20 ms (a frozen clock never makes a waiter suspect)."""
    try:
        return await asyncio.wait_for(fair.take(key, 0.01), 0.02)
    except TimeoutError:
        return False


async def proven(fair: Fairness, key: str) -> None:
    """Make `key` prompt: one call that answers."""
    assert await fair.take(key, 1.0)
    fair.give(key, fair.started(), answered=True)


async def test_a_prompt_origin_takes_every_free_slot() -> None:
    fair = Fairness(8, Clock())
    await proven(fair, "ok.example")
    for _ in range(8):
        assert await fair.take("ok.example", 0.1)
    assert fair.used == 8
    waiting = asyncio.ensure_future(fair.take("ok.example", 0.1))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    fair.give("ok.example", fair.started(), answered=True)
    assert await waiting


async def test_a_new_origin_sends_one_probe_until_it_answers() -> None:
    fair = Fairness(64, Clock())
    assert await fair.take("new.example", 1.0)
    second = asyncio.ensure_future(fair.take("new.example", 1.0))
    await asyncio.sleep(0.05)
    assert not second.done()  # no second call before the first answers
    fair.give("new.example", fair.started(), answered=True)
    assert await second
    assert await fair.take("new.example", 1.0)  # prompt now: no limit but the slots


async def test_a_wait_for_a_free_slot_takes_none_and_a_freed_slot_wakes_one_waiter() -> None:
    fair = Fairness(2, Clock())
    assert fair.free_now("new.example")
    assert fair.used == 0  # looked, took nothing
    assert fair.take_now("new.example")  # its probe
    assert not fair.free_now("new.example")
    freed = [asyncio.ensure_future(fair.wait_free("new.example", 1.0)) for _ in range(3)]
    await asyncio.sleep(0.05)
    assert not any(f.done() for f in freed)  # behind the probe, as a call taking a slot
    fair.give("new.example", fair.started(), answered=True)
    await asyncio.sleep(0)
    assert [f.done() for f in freed] == [True, True, False]  # one a free slot, none taken
    assert fair.used == 0
    assert not fair.take_now("new.example")  # the third waits first
    assert fair.take_now("new.example", in_turn=True)  # the ones whose turn came do not
    assert fair.take_now("new.example", in_turn=True)
    assert not fair.take_now("new.example", in_turn=True)  # no slot left
    fair.give("new.example", fair.started(), answered=True)
    assert await freed[2]


async def test_an_unanswered_probe_makes_its_origin_suspect_and_bounded() -> None:
    clock = Clock()
    fair = Fairness(64, clock)
    assert await fair.take("hang.example:1", 1.0)
    clock.now += PROBE_S * 2
    taken = 1
    while taken < 10 and await try_take(fair, "hang.example:1"):
        taken += 1
    assert taken == SUSPECT_PER_ORIGIN
    now_ms = 1_000_000
    back_ms = fair.come_back_ms("hang.example:1", "q", now_ms)
    assert now_ms + MIN_DEFER_S * 1000 <= back_ms < now_ms + 2 * MIN_DEFER_S * 1000


async def test_a_queues_deferred_timers_come_back_together_and_queues_in_turn() -> None:
    """One claim takes a queue's deferred timers back, not one claim per timer; the queues of
    a flood come back spread over the period, not at one instant."""
    clock = Clock()
    fair = Fairness(64, clock)
    assert await fair.take("hang.example:1", 1.0)
    clock.now += 10.0  # hung for 10 s: back within 10 to 20 s
    now_ms = 5_000_000
    for queue in ("a", "b"):
        backs = {fair.come_back_ms("hang.example:1", queue, now_ms + step) for step in range(50)}
        assert len(backs) == 1
        assert now_ms + 10_000 <= backs.pop() < now_ms + 20_000
    spread = {fair.come_back_ms("hang.example:1", f"q{n}", now_ms) for n in range(1000)}
    assert len(spread) > 900
    assert max(spread) - min(spread) > 9_000


async def test_an_origin_that_answered_turns_suspect_after_stuck_s() -> None:
    clock = Clock()
    fair = Fairness(64, clock)
    await proven(fair, "slow.example")
    for _ in range(SUSPECT_PER_ORIGIN + 2):
        assert await fair.take("slow.example", 0.05)  # prompt: not bounded
    clock.now += STUCK_S * 2
    assert not await try_take(fair, "slow.example")  # now over a suspect's calls


async def test_targets_that_hang_hold_at_most_half_and_prompt_ones_the_rest() -> None:
    clock = Clock()
    fair = Fairness(64, clock)
    await proven(fair, "ok.example")
    hanging = 0
    for round_ in range(6):  # fresh hanging hosts keep coming, each probed then suspect
        for n in range(10):
            key = f"hang-{round_}-{n}.example"
            if await try_take(fair, key):
                hanging += 1
                clock.now += 0.001
        clock.now += PROBE_S * 2
        for n in range(10):  # their suspect origins try more calls each
            key = f"hang-{round_}-{n}.example"
            while await try_take(fair, key):
                hanging += 1
    assert hanging <= 64 // 2 + 10  # half, and the probes of one round that turned suspect
    prompt = 0
    while fair.used < fair.total and await try_take(fair, "ok.example"):
        prompt += 1
    assert prompt >= 64 // 2 - 10


async def test_one_host_s_many_ports_share_its_bound() -> None:
    clock = Clock()
    fair = Fairness(64, clock)
    probed = 0
    for port in range(1, 40):
        if await try_take(fair, f"127.0.0.1:{port}"):
            probed += 1
    assert probed == 64 // 4
    # another host is not held back by it
    assert await try_take(fair, "other.example")


async def test_a_new_origin_waits_only_while_hanging_calls_hold_half() -> None:
    clock = Clock()
    fair = Fairness(64, clock)
    for n in range(64 // 2):  # a flood of probes at hosts that never answer
        assert await try_take(fair, f"hang-{n}.example")
    clock.now += PROBE_S * 2
    assert not await try_take(fair, "new.example")
    fair.give("hang-0.example", fair.started(), answered=False)  # one of them times out
    assert await try_take(fair, "new.example")


async def test_waiters_take_turns_across_origins() -> None:
    fair = Fairness(2, Clock())
    for key in ("a", "b"):
        await proven(fair, key)
    assert await fair.take("a", 1.0)
    assert await fair.take("a", 1.0)
    order: list[str] = []

    async def wait(key: str) -> None:
        assert await fair.take(key, 1.0)
        order.append(key)

    tasks = [asyncio.ensure_future(wait(key)) for key in ("a", "a", "a", "b")]
    await asyncio.sleep(0.01)
    for _ in range(3):
        fair.give("a", fair.started(), answered=True)
        await asyncio.sleep(0.01)
    assert order == ["a", "b", "a"]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_cancelled_waiter_leaves_nothing_behind() -> None:
    fair = Fairness(1, Clock())
    await proven(fair, "a")
    assert await fair.take("a", 1.0)
    waiting = asyncio.ensure_future(fair.take("a", 1.0))
    await asyncio.sleep(0.01)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    fair.give("a", fair.started(), answered=True)
    assert fair.used == 0
    assert await fair.take("a", 1.0)


async def test_waiters_go_back_to_the_store_a_bounded_number_a_look() -> None:
    """All woken at once, a flood's waiters ran before any timer falling due meanwhile."""
    clock = Clock()
    fair = Fairness(64, clock)
    assert await fair.take("hang.example:1", 1.0)
    waiters = [asyncio.ensure_future(fair.take("hang.example:1", 0.0)) for _ in range(200)]
    await asyncio.sleep(0)  # each is waiting
    clock.now += PROBE_S * 2  # suspect: they go back once they have waited their patience

    def sent_back() -> int:
        return sum(waiter.done() and not waiter.result() for waiter in waiters)

    seen = [0]
    while len(seen) < 10 and not all(waiter.done() for waiter in waiters):
        await asyncio.sleep(RECOUNT_S / 4)
        if sent_back() != seen[-1]:
            seen.append(sent_back())
    assert max(b - a for a, b in pairwise(seen)) == SEND_BACK_PER_TICK
    assert all(waiter.done() for waiter in waiters)
    granted = sum(waiter.result() for waiter in waiters)
    assert granted == SUSPECT_PER_ORIGIN - 1  # a suspect origin's few calls
    assert sent_back() == 200 - granted
