"""`ClaimRoom`: how much a worker behind its timers claims, and when it claims again."""

from __future__ import annotations

import asyncio

from tickwheel.engine.claim_room import ClaimRoom
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
