"""`ClaimRoom`: how much a worker behind its timers claims, and when it claims again."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import pytest

from tickwheel.engine.claim_room import ClaimRoom
from tickwheel.engine.pace import PACE_HOLD_S, PACE_SAMPLE, Pace
from tickwheel.engine.settings import WorkerSettings

# room for concurrency + 2 batches (300), a prompt queue's reserve as much again (to 600),
# claims of a quarter batch (25) at least
SETTINGS = WorkerSettings(batch=100, concurrency=100)


def test_a_prompt_queue_claims_into_its_reserve_in_batches_not_a_timer_per_one_settled() -> None:
    room = ClaimRoom(SETTINGS)
    room.note("prompt", hangs=False)
    assert room.room("prompt", 290) == 310  # under a quarter batch of room: the reserve
    assert room.room("other", 290) == 0  # the reserve is prompt queues' only
    assert room.room("prompt", 575) == 25
    assert room.room("prompt", 576) == 0  # a quarter batch no longer fits


async def test_a_waiting_prompt_queue_is_woken_once_a_quarter_batch_fits() -> None:
    room = ClaimRoom(SETTINGS)
    room.note("prompt", hangs=False)
    waiting = asyncio.ensure_future(room.wait("prompt"))
    await asyncio.sleep(0)
    for held in range(599, 575, -1):  # timers settled one by one
        room.freed(held)
        await asyncio.sleep(0)
        assert not waiting.done(), held
    room.freed(575)
    await asyncio.wait_for(waiting, 1)


def test_a_consumers_room_holds_a_second_of_its_pace_from_a_workers_room_to_the_cap() -> None:
    room = ClaimRoom(dataclasses.replace(SETTINGS, max_in_flight=5_000))
    assert room.room("q", 0) == 300  # a worker's room until the consumer's pace is known
    room.pace(1_000.0, 0)
    assert room.room("q", 0) == 1_000 * PACE_HOLD_S
    room.pace(50_000.0, 0)
    assert room.room("q", 0) == 5_000
    room.pace(10.0, 0)  # slower than a worker's room a second: that room, not less
    assert room.room("q", 0) == 300


async def test_a_faster_pace_wakes_the_claim_loop_waiting_for_room() -> None:
    room = ClaimRoom(dataclasses.replace(SETTINGS, max_in_flight=5_000))
    waiting = asyncio.ensure_future(room.wait("q"))
    await asyncio.sleep(0)
    room.pace(100.0, 300)
    await asyncio.sleep(0)
    assert not waiting.done()
    room.pace(2_000.0, 300)
    await asyncio.wait_for(waiting, 1)


def test_a_pace_is_deliveries_held_at_once_over_their_time_in_hand() -> None:
    pace = Pace()
    found = []
    for _ in range(PACE_SAMPLE // 64):  # a task per delivery: 64 out at once, 20 ms each
        handed = [pace.handed() for _ in range(64)]
        time.sleep(0.02)
        found += [pace.settled(at) for at in handed]  # settled together
    assert found[:-1] == [None] * (PACE_SAMPLE - 1)
    # 64 at once for 20 ms each is 3,200 a second; counted at each settlement of a wave the
    # held fall from 64 to 1, so about half that
    assert 64 / 0.02 / 4 < found[-1] < 64 / 0.02


def test_waits_for_timers_to_come_due_are_not_counted() -> None:
    pace = Pace()
    working_s = 0.0
    for i in range(PACE_SAMPLE):
        at = pace.handed()
        time.sleep(0.001)  # a millisecond of the consumer's work each
        per_s = pace.settled(at)
        working_s += time.monotonic() - at
        if i % 32 == 0:
            time.sleep(0.05)  # nothing due meanwhile: not counted
    assert per_s == pytest.approx(PACE_SAMPLE / working_s, rel=0.1)
