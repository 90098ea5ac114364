"""The ring of state changes the event stream reads: publishing never waits, a reader keeps
only its place, and one whose place was overwritten is told so."""

from __future__ import annotations

import asyncio

import pytest

from tickwheel.engine.changes import ChangeFeed, Lagged


def test_a_reader_reads_in_order_from_its_place_in_batches() -> None:
    feed = ChangeFeed(window=8)
    for n in range(5):
        feed.publish("created", f"t{n}", "q")
    assert [e[2] for e in feed.read(0, 3)] == ["t0", "t1", "t2"]
    assert [e[2] for e in feed.read(3, 10)] == ["t3", "t4"]
    assert feed.read(5, 10) == []
    assert feed.read(2, 1)[0][0] == 3  # sequence numbers count from 1


def test_a_place_the_ring_overwrote_is_lagged_and_the_ring_keeps_the_newest() -> None:
    feed = ChangeFeed(window=4)
    for n in range(10):  # ten changes in a ring of four: 7 to 10 are left
        feed.publish("fired", f"t{n}", "q", attempt=1)
    assert feed.oldest() == 7
    assert [e[0] for e in feed.read(6, 10)] == [7, 8, 9, 10]
    with pytest.raises(Lagged, match="overwritten"):
        feed.read(5, 10)


def test_a_window_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="window"):
        ChangeFeed(window=0)


async def test_wait_wakes_on_a_change_or_the_close_and_times_out_otherwise() -> None:
    feed = ChangeFeed()
    assert not await feed.wait(0, 0.01)
    waiting = asyncio.create_task(feed.wait(0, 5))
    await asyncio.sleep(0)
    feed.publish("acked", "t1", "q")
    assert await waiting
    waiting = asyncio.create_task(feed.wait(1, 5))
    await asyncio.sleep(0)
    feed.close()
    assert await waiting
    assert feed.closed
