"""`QueueCap`: names it knows cost nothing, a new one past the cap is refused, and a read of the
store (at most every `REFRESH_S` at the cap) frees the room of queues that emptied."""

from __future__ import annotations

from tickwheel.model import Timer
from tickwheel.service.queue_cap import MAX_AGE_S, REFRESH_S, QueueCap
from tickwheel.stores import MemoryStore
from tickwheel.stores.base import QueueSettings


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_the_cap_counts_the_store_then_frees_queues_that_emptied() -> None:
    store = MemoryStore()
    await store.add(Timer(id="a", due_ms=store.now_ms() + 60_000, queue="qa", payload=1))
    await store.set_queue("qs", QueueSettings(paused=True))
    clock = Clock()
    cap = QueueCap(3, clock=clock)
    assert await cap.refused(store, ["qa", "qs", "q1", "q2"]) == {"q2"}  # qa, qs, q1 held
    assert await cap.refused(store, ["qa", "q1"]) == set()
    await store.cancel("a")
    clock.now += REFRESH_S / 2
    assert await cap.refused(store, ["q2"]) == {"q2"}  # not read again so soon
    clock.now += REFRESH_S
    # read again: q1 was never written, qa emptied; qs and q2 fill two of three
    assert await cap.refused(store, ["q2"]) == set()
    clock.now += MAX_AGE_S
    await store.set_queue("other", QueueSettings(paused=True))  # another process's
    assert await cap.refused(store, ["q3", "q4"]) == {"q4"}  # qs, other, q3
    await store.close()
