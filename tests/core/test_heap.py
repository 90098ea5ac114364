"""Edge cases of `DelayHeap`, one behaviour per test."""

from __future__ import annotations

import random

import pytest

from tickwheel.core.heap import DelayHeap

YEAR_MS = 365 * 24 * 3600 * 1000


def test_empty_heap() -> None:
    heap: DelayHeap[str, int] = DelayHeap()
    assert len(heap) == 0
    assert "a" not in heap
    assert heap.get("a") is None
    assert heap.due_ms("a") is None
    assert heap.peek() is None
    assert heap.next_due_ms() is None
    assert heap.pop_due(10**12) == []
    assert heap.cancel("a") is False
    assert heap.reschedule("a", 5) is False
    assert "a" not in heap


def test_push_get_due_contains() -> None:
    heap: DelayHeap[str, str] = DelayHeap()
    heap.push("a", 1500, "A")
    assert len(heap) == 1
    assert "a" in heap
    assert heap.get("a") == "A"
    assert heap.due_ms("a") == 1500
    assert heap.next_due_ms() == 1500


def test_equal_due_times_pop_in_insertion_order() -> None:
    heap: DelayHeap[str, int] = DelayHeap()
    keys = ["k3", "k1", "k9", "k0", "k5", "k2", "k8"]
    for i, key in enumerate(keys):
        heap.push(key, 100, i)
    heap.push("early", 99, -1)
    assert heap.pop_due(100) == [("early", -1), *((key, i) for i, key in enumerate(keys))]


def test_pop_due_includes_due_now_and_excludes_the_next_ms() -> None:
    heap: DelayHeap[str, None] = DelayHeap()
    heap.push("now", 1000, None)
    heap.push("next", 1001, None)
    assert heap.pop_due(999) == []
    assert heap.pop_due(1000) == [("now", None)]
    assert heap.pop_due(1000) == []
    assert heap.pop_due(1001) == [("next", None)]


def test_past_due_pops_at_the_next_call() -> None:
    heap: DelayHeap[str, str] = DelayHeap()
    heap.push("b", 30, "B")
    heap.push("a", 3, "A")
    heap.push("future", 10**6, "F")
    assert heap.pop_due(500) == [("a", "A"), ("b", "B")]
    assert heap.next_due_ms() == 10**6


def test_pop_due_keeps_no_time() -> None:
    heap: DelayHeap[str, None] = DelayHeap()
    heap.push("a", 100, None)
    heap.push("b", 200, None)
    assert heap.pop_due(150) == [("a", None)]
    # an earlier time afterwards pops only what is due by then
    heap.push("c", 120, None)
    assert heap.pop_due(110) == []
    assert heap.pop_due(120) == [("c", None)]


@pytest.mark.parametrize("offset", [64, 4096, 262_144])
def test_due_on_a_boundary(offset: int) -> None:
    heap: DelayHeap[str, None] = DelayHeap()
    now = 123_457
    heap.push("x", now + offset, None)
    assert heap.pop_due(now + offset - 1) == []
    assert heap.pop_due(now + offset) == [("x", None)]


def test_pop_due_limit() -> None:
    heap: DelayHeap[int, int] = DelayHeap()
    for key in range(10):
        heap.push(key, 100 - key, key)
    heap.push(99, 10_000, 99)
    assert heap.pop_due(1000, limit=0) == []
    assert heap.pop_due(1000, limit=3) == [(9, 9), (8, 8), (7, 7)]
    assert len(heap) == 8
    assert heap.pop_due(1000, limit=1) == [(6, 6)]
    # a limit above what is due returns only what is due
    assert heap.pop_due(1000, limit=100) == [(key, key) for key in range(5, -1, -1)]
    assert heap.pop_due(1000, limit=None) == []
    assert heap.peek() == (99, 99)


def test_peek_returns_the_earliest_without_removing_it() -> None:
    heap: DelayHeap[str, str] = DelayHeap()
    heap.push("late", 500, "L")
    heap.push("early", 100, "E")
    heap.push("early-too", 100, "E2")
    assert heap.peek() == ("early", "E")
    assert heap.peek() == ("early", "E")
    assert len(heap) == 3
    assert heap.cancel("early") is True
    assert heap.peek() == ("early-too", "E2")
    assert heap.next_due_ms() == 100


def test_cancel() -> None:
    heap: DelayHeap[int, int] = DelayHeap()
    for key in range(7):
        heap.push(key, key * 10, key)
    assert heap.cancel(3) is True
    assert heap.cancel(3) is False
    assert heap.cancel(0) is True
    assert heap.cancel(6) is True
    assert heap.cancel(42) is False
    assert len(heap) == 4
    assert heap.pop_due(1000) == [(1, 1), (2, 2), (4, 4), (5, 5)]


def test_cancel_needing_a_sift_up() -> None:
    # array [1, 10, 2, 11, 12, 3, 4]: cancelling 11 moves the last entry (4) under 10,
    # so the heap must sift it up
    heap: DelayHeap[int, None] = DelayHeap()
    for due in [1, 10, 2, 11, 12, 3, 4]:
        heap.push(due, due, None)
    assert heap.cancel(11) is True
    assert [key for key, _ in heap.pop_due(100)] == [1, 2, 3, 4, 10, 12]


def test_cancel_after_pop_returns_false() -> None:
    heap: DelayHeap[str, str] = DelayHeap()
    heap.push("a", 10, "A")
    assert heap.pop_due(10) == [("a", "A")]
    assert heap.cancel("a") is False
    assert heap.reschedule("a", 20) is False
    assert "a" not in heap


def test_push_replaces_value_and_due() -> None:
    heap: DelayHeap[str, str] = DelayHeap()
    heap.push("k", 5000, "old")
    heap.push("other", 100, "O")
    heap.push("k", 50, "new")
    assert len(heap) == 2
    assert heap.get("k") == "new"
    assert heap.due_ms("k") == 50
    assert heap.pop_due(100) == [("k", "new"), ("other", "O")]


def test_push_replacing_counts_as_a_new_insertion() -> None:
    heap: DelayHeap[str, int] = DelayHeap()
    heap.push("a", 100, 1)
    heap.push("b", 100, 2)
    heap.push("a", 100, 3)
    assert heap.pop_due(100) == [("b", 2), ("a", 3)]


def test_reschedule_earlier() -> None:
    heap: DelayHeap[str, str] = DelayHeap()
    heap.push("a", 100, "A")
    heap.push("b", 200, "B")
    assert heap.reschedule("b", 50) is True
    assert heap.due_ms("b") == 50
    assert heap.get("b") == "B"
    assert heap.peek() == ("b", "B")
    assert heap.pop_due(60) == [("b", "B")]
    assert heap.pop_due(100) == [("a", "A")]


def test_reschedule_later() -> None:
    heap: DelayHeap[str, str] = DelayHeap()
    heap.push("a", 100, "A")
    heap.push("b", 200, "B")
    assert heap.reschedule("a", 300) is True
    assert heap.next_due_ms() == 200
    assert heap.pop_due(250) == [("b", "B")]
    assert heap.pop_due(299) == []
    assert heap.pop_due(300) == [("a", "A")]


def test_reschedule_orders_as_if_inserted_now() -> None:
    heap: DelayHeap[str, None] = DelayHeap()
    heap.push("a", 100, None)
    heap.push("b", 100, None)
    heap.push("c", 100, None)
    assert heap.reschedule("a", 100) is True
    assert [key for key, _ in heap.pop_due(100)] == ["b", "c", "a"]


def test_ten_year_delay() -> None:
    heap: DelayHeap[str, str] = DelayHeap()
    due = 12_345 + 10 * YEAR_MS
    heap.push("decade", due, "D")
    heap.push("soon", 12_346, "S")
    assert heap.next_due_ms() == 12_346
    assert heap.pop_due(due - 1) == [("soon", "S")]
    assert heap.next_due_ms() == due
    assert heap.pop_due(due) == [("decade", "D")]


def test_year_jump_with_few_timers_pops_them_in_due_order() -> None:
    rng = random.Random(7)
    heap: DelayHeap[int, int] = DelayHeap()
    dues = [rng.randrange(1, YEAR_MS) for _ in range(8)] + [64, 4096, YEAR_MS, 1]
    for key, due in enumerate(dues):
        heap.push(key, due, due)
    assert [value for _, value in heap.pop_due(YEAR_MS)] == sorted(dues)


def test_many_keys_with_cancels_and_reschedules() -> None:
    rng = random.Random(2024)
    heap: DelayHeap[int, int] = DelayHeap()
    count = 10_000
    due: dict[int, int] = {}
    order: dict[int, int] = {}
    seq = 0
    for key in range(count):
        due[key] = rng.choice([rng.randrange(0, 5000), rng.randrange(0, YEAR_MS)])
        seq += 1
        order[key] = seq
        heap.push(key, due[key], key)
    for key in rng.sample(range(count), 2000):
        assert heap.cancel(key) is True
        del due[key]
    for key in rng.sample(sorted(due), 2000):
        due[key] = rng.randrange(0, YEAR_MS)
        seq += 1
        order[key] = seq
        assert heap.reschedule(key, due[key]) is True
    assert len(heap) == len(due)

    expected = sorted(due, key=lambda key: (due[key], order[key]))
    popped: list[int] = []
    now = 0
    while len(heap):
        now += rng.choice([1, 64, 4096, 100_000, 10 * 24 * 3600 * 1000])
        got = heap.pop_due(now, limit=rng.choice([None, 1, 50]))
        assert all(due[key] <= now for key, _ in got)
        popped.extend(key for key, _ in got)
    assert popped == expected
