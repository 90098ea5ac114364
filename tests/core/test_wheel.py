"""Edge cases of `TimingWheel`, one behaviour per test."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tickwheel.core.wheel import TimingWheel, WheelEntry

DAY_MS = 24 * 3600 * 1000
YEAR_MS = 365 * DAY_MS


def tombstones(wheel: TimingWheel[Any, Any]) -> dict[object, int]:
    """The cancelled keys still in a bucket, with their due times."""
    return {key: ~due_ms for key, due_ms in wheel._due.items() if due_ms < 0}


def test_empty_wheel() -> None:
    wheel: TimingWheel[str, int] = TimingWheel()
    assert len(wheel) == 0
    assert "a" not in wheel
    assert wheel.get("a") is None
    assert wheel.due_ms("a") is None
    assert wheel.next_due_ms() is None
    assert wheel.advance(10**12) == []
    assert wheel.next_due_ms() is None
    assert wheel.now_ms == 10**12


@pytest.mark.parametrize(("now_ms", "tick_ms"), [(-1, 1), (0, 0), (0, -5)])
def test_rejects_bad_arguments(now_ms: int, tick_ms: int) -> None:
    with pytest.raises(ValueError, match="must"):
        TimingWheel(now_ms, tick_ms)


def test_add_get_due_contains() -> None:
    wheel: TimingWheel[str, str] = TimingWheel(now_ms=1000)
    wheel.add("a", 1500, "A")
    assert len(wheel) == 1
    assert "a" in wheel
    assert wheel.get("a") == "A"
    assert wheel.due_ms("a") == 1500
    assert wheel.now_ms == 1000


def test_equal_due_times_fire_in_insertion_order() -> None:
    wheel: TimingWheel[str, int] = TimingWheel()
    keys = ["k3", "k1", "k9", "k0", "k5"]
    for i, key in enumerate(keys):
        wheel.add(key, 100, i)
    wheel.add("early", 99, -1)
    assert wheel.advance(100) == [("early", -1), *((key, i) for i, key in enumerate(keys))]


@pytest.mark.parametrize("due_ms", [5000, 4096 * 3, 64**3 + 7, 10**9])
def test_equal_due_times_far_ahead_keep_insertion_order_through_cascades(due_ms: int) -> None:
    wheel: TimingWheel[int, None] = TimingWheel()
    order = [7, 3, 11, 0, 5]
    for key in order:
        wheel.add(key, due_ms, None)
    # step across every level boundary on the way so the bucket cascades several times
    assert wheel.advance(due_ms - 1) == []
    assert [key for key, _ in wheel.advance(due_ms)] == order


def test_past_due_fires_at_the_next_advance() -> None:
    wheel: TimingWheel[str, str] = TimingWheel(now_ms=10_000)
    wheel.add("late", 3_000, "L")
    wheel.add("now", 10_000, "N")
    wheel.add("later", 10_001, "X")
    next_due = wheel.next_due_ms()
    assert next_due is not None
    assert next_due <= wheel.now_ms
    # an advance that does not move time still returns what is overdue, by due time
    assert wheel.advance(10_000) == [("late", "L"), ("now", "N")]
    assert wheel.advance(10_000) == []
    assert wheel.next_due_ms() == 10_001


def test_time_never_moves_back() -> None:
    wheel: TimingWheel[str, str] = TimingWheel()
    wheel.add("a", 200, "A")
    assert wheel.advance(100) == []
    assert wheel.advance(50) == []
    assert wheel.now_ms == 100
    # added overdue relative to the wheel's time (100), so even an earlier advance returns it
    wheel.add("b", 70, "B")
    assert wheel.advance(50) == [("b", "B")]
    assert wheel.now_ms == 100
    assert wheel.advance(199) == []
    assert wheel.advance(200) == [("a", "A")]


@pytest.mark.parametrize("start", [0, 1, 1000, 64**3 - 3, 123_456_789])
@pytest.mark.parametrize("offset", [64, 4096, 262_144])
def test_due_exactly_on_a_boundary_from_now(start: int, offset: int) -> None:
    wheel: TimingWheel[str, None] = TimingWheel(now_ms=start)
    due = start + offset
    wheel.add("x", due, None)
    assert wheel.advance(due - 1) == []
    assert "x" in wheel
    assert wheel.next_due_ms() == due  # it sits at level 0 now: the bound is exact
    assert wheel.advance(due) == [("x", None)]
    assert len(wheel) == 0


@pytest.mark.parametrize("level", [1, 2, 3, 4, 5])
def test_due_on_an_aligned_level_boundary(level: int) -> None:
    wheel: TimingWheel[str, None] = TimingWheel()
    due = 64**level
    wheel.add("x", due, None)
    # an upper bucket asks to be woken while it drains, never after the due time
    assert 0 < wheel.next_due_ms() <= due
    assert wheel.advance(due - 1) == []
    assert wheel.advance(due) == [("x", None)]


def _top_boundary(due_ms: int) -> int:
    """`due_ms` with every digit below its highest non-zero 6-bit digit cleared."""
    shift = 6 * ((due_ms.bit_length() - 1) // 6)
    return due_ms >> shift << shift


@pytest.mark.parametrize(
    "due_ms",
    [
        64 + 3,
        4096 + 64 + 3,
        64**3 + 4096 + 3,
        64**4 + 5,
        64**5 + 4096 + 7,
        5 * 64**6 + 65,  # about 10.9 years
    ],
)
def test_cascade_from_an_upper_level_fires_exactly_at_due(due_ms: int) -> None:
    wheel: TimingWheel[str, str] = TimingWheel()
    wheel.add("x", due_ms, "X")
    # jump to just before the boundary of the entry's top digit, then walk 1 ms at a time:
    # the entry cascades down level by level and must fire at due_ms, not before
    start = _top_boundary(due_ms) - 5
    assert wheel.advance(start) == []
    fired_at = None
    for now in range(start + 1, due_ms + 2):
        next_due = wheel.next_due_ms()
        assert next_due is not None
        assert now - 1 < next_due <= due_ms
        got = wheel.advance(now)
        if got:
            assert got == [("x", "X")]
            fired_at = now
            break
    assert fired_at == due_ms
    assert wheel.next_due_ms() is None


def test_cancel() -> None:
    wheel: TimingWheel[str, str] = TimingWheel()
    wheel.add("a", 100, "A")
    wheel.add("b", 100, "B")
    wheel.add("c", 5000, "C")
    assert wheel.cancel("a") is True
    assert wheel.cancel("a") is False
    assert wheel.cancel("c") is True
    assert wheel.cancel("missing") is False
    assert len(wheel) == 1
    assert wheel.advance(10_000) == [("b", "B")]


def test_cancel_after_fire_returns_false() -> None:
    wheel: TimingWheel[str, str] = TimingWheel()
    wheel.add("a", 10, "A")
    assert wheel.advance(10) == [("a", "A")]
    assert wheel.cancel("a") is False
    assert "a" not in wheel
    assert wheel.get("a") is None


def test_cancel_overdue_entry() -> None:
    wheel: TimingWheel[str, str] = TimingWheel(now_ms=100)
    wheel.add("a", 50, "A")
    assert wheel.cancel("a") is True
    assert wheel.advance(100) == []
    assert wheel.next_due_ms() is None


def test_next_due_ms_is_none_after_cancelling_everything() -> None:
    wheel: TimingWheel[int, None] = TimingWheel()
    for key, due in enumerate([1, 70, 5000, 300_000, 10 * YEAR_MS]):
        wheel.add(key, due, None)
    for key in range(5):
        wheel.cancel(key)
    assert wheel.next_due_ms() is None
    assert wheel.advance(20 * YEAR_MS) == []


def test_cancel_leaves_the_rest_of_the_level_pending() -> None:
    wheel: TimingWheel[str, None] = TimingWheel()
    wheel.add("a", 5, None)
    wheel.add("b", 9, None)
    wheel.add("c", 64 * 5, None)
    wheel.add("d", 64 * 9, None)
    wheel.cancel("a")
    wheel.cancel("c")
    assert wheel.next_due_ms() == 9
    assert wheel.advance(8) == []
    assert wheel.advance(9) == [("b", None)]
    assert 9 < wheel.next_due_ms() <= 64 * 9
    assert wheel.advance(64 * 9 - 1) == []
    assert wheel.advance(64 * 9) == [("d", None)]


def test_one_jump_expires_every_bucket_of_every_level() -> None:
    wheel: TimingWheel[int, int] = TimingWheel()
    dues = [digit * 64**level + 1 for level in range(4) for digit in range(1, 64)]
    dues.append(64**4 + 1)
    for key, due in enumerate(reversed(dues)):
        wheel.add(key, due, due)
    # the jump lands mid-span at every level, not on a clean power of 64
    got = wheel.advance(64**4 + 20 * 64**3 + 5 * 64**2 + 3)
    assert [due for _, due in got] == sorted(dues)
    assert len(wheel) == 0


def test_next_due_ms_lower_bounds_far_entries() -> None:
    wheel: TimingWheel[str, None] = TimingWheel(now_ms=1000)
    wheel.add("far", 1000 + 5 * YEAR_MS, None)
    wheel.add("mid", 1000 + 300_000, None)
    next_due = wheel.next_due_ms()
    assert next_due is not None
    assert 1000 < next_due <= 1000 + 300_000
    wheel.add("near", 1010, None)
    assert wheel.next_due_ms() == 1010


def test_ten_year_delay_with_a_single_jump() -> None:
    wheel: TimingWheel[str, str] = TimingWheel(now_ms=12_345)
    due = 12_345 + 10 * YEAR_MS
    wheel.add("decade", due, "D")
    wheel.add("soon", 12_346, "S")
    assert wheel.advance(due - 1) == [("soon", "S")]
    assert wheel.advance(due - 1) == []
    assert wheel.advance(due) == [("decade", "D")]
    assert len(wheel) == 0


def test_ten_year_delay_overshot_by_one_jump() -> None:
    wheel: TimingWheel[str, str] = TimingWheel()
    wheel.add("decade", 10 * YEAR_MS, "D")
    assert wheel.advance(11 * YEAR_MS) == [("decade", "D")]


def test_year_jump_with_few_timers_returns_them_in_due_order() -> None:
    rng = random.Random(7)
    wheel: TimingWheel[int, int] = TimingWheel(now_ms=5)
    dues = [5 + rng.randrange(1, YEAR_MS) for _ in range(8)]
    dues += [5 + 64, 5 + 4096, 5 + YEAR_MS, 6]
    for key, due in enumerate(dues):
        wheel.add(key, due, due)
    got = wheel.advance(5 + YEAR_MS)
    assert [value for _, value in got] == sorted(dues)
    assert sorted(key for key, _ in got) == list(range(len(dues)))


def test_replace_moves_an_entry_earlier_and_later() -> None:
    wheel: TimingWheel[str, str] = TimingWheel()
    wheel.add("k", 5000, "old")
    wheel.add("k", 50, "new")
    assert len(wheel) == 1
    assert wheel.due_ms("k") == 50
    assert wheel.get("k") == "new"
    assert wheel.advance(50) == [("k", "new")]

    wheel.add("k", 60, "first")
    wheel.add("k", 300_000, "second")
    assert wheel.advance(299_999) == []
    assert wheel.advance(300_000) == [("k", "second")]


def test_replace_counts_as_a_new_insertion() -> None:
    wheel: TimingWheel[str, int] = TimingWheel()
    wheel.add("a", 100, 1)
    wheel.add("b", 100, 2)
    wheel.add("a", 100, 3)
    assert wheel.advance(100) == [("b", 2), ("a", 3)]


def test_replace_an_overdue_entry() -> None:
    wheel: TimingWheel[str, int] = TimingWheel(now_ms=100)
    wheel.add("a", 10, 1)
    wheel.add("a", 200, 2)
    assert wheel.advance(100) == []
    assert wheel.advance(200) == [("a", 2)]


def test_many_keys_spread_over_a_year() -> None:
    rng = random.Random(2024)
    wheel: TimingWheel[int, int] = TimingWheel()
    count = 10_000
    dues = [rng.choice([rng.randrange(0, 5000), rng.randrange(0, YEAR_MS)]) for _ in range(count)]
    for key, due in enumerate(dues):
        wheel.add(key, due, due)
    cancelled = set(rng.sample(range(count), 500))
    for key in cancelled:
        assert wheel.cancel(key) is True
    assert len(wheel) == count - len(cancelled)

    expected = sorted((dues[key], key) for key in range(count) if key not in cancelled)
    fired: list[tuple[int, int]] = []
    now = 0
    while len(wheel):
        now += rng.choice([1, 63, 64, 4096, 100_000, 10 * DAY_MS])
        got = wheel.advance(now)
        assert all(due <= now for _, due in got)
        fired.extend((due, key) for key, due in got)
        next_due = wheel.next_due_ms()
        assert next_due is None or next_due > now
    # every key exactly once, each advance's batch in due order and batches in time order
    assert fired == expected


def test_tick_ms_fires_at_the_first_tick_at_or_after_due() -> None:
    wheel: TimingWheel[str, None] = TimingWheel(now_ms=3, tick_ms=10)
    assert wheel.now_ms == 0
    wheel.add("a", 15, None)
    wheel.add("b", 20, None)
    wheel.add("c", 21, None)
    # nothing fires sooner than the start of its due tick (the bound need not be <= due_ms)
    assert wheel.next_due_ms() == 20
    assert wheel.advance(19) == []
    assert wheel.now_ms == 10
    assert wheel.advance(20) == [("a", None), ("b", None)]
    assert wheel.advance(29) == []
    assert wheel.advance(30) == [("c", None)]


@pytest.mark.parametrize("tick_ms", [1, 7, 10])
def test_tick_ms_lateness_is_under_a_tick(tick_ms: int) -> None:
    wheel: TimingWheel[int, int] = TimingWheel(tick_ms=tick_ms)
    for due in range(1, 200):
        wheel.add(due, due, due)
    for now in range(1, 220):
        for _, due in wheel.advance(now):
            assert 0 <= now - due < tick_ms
    assert len(wheel) == 0


@pytest.mark.parametrize("now_ms", [20, 29, 35, 10_000])
def test_tick_ms_orders_by_due_ms_within_a_tick(now_ms: int) -> None:
    wheel: TimingWheel[str, int] = TimingWheel(tick_ms=10)
    wheel.add("c", 19, 19)
    wheel.add("a", 11, 11)
    wheel.add("b", 15, 15)
    wheel.add("a2", 11, 11)
    assert wheel.advance(now_ms) == [("a", 11), ("a2", 11), ("b", 15), ("c", 19)]


def test_cancel_then_add_again_counts_as_a_new_insertion() -> None:
    wheel: TimingWheel[str, int] = TimingWheel()
    wheel.add("a", 5000, 1)
    wheel.add("b", 5000, 2)
    assert wheel.cancel("a") is True
    assert "a" not in wheel
    assert wheel.get("a") is None
    wheel.add("a", 5000, 3)
    assert len(wheel) == 2
    assert wheel.get("a") == 3
    assert wheel.advance(5000) == [("b", 2), ("a", 3)]


def test_cancelled_entries_are_reclaimed_when_time_passes_them() -> None:
    wheel: TimingWheel[int, None] = TimingWheel()
    for key in range(1000):
        wheel.add(key, 1 + key * 97, None)
    for key in range(0, 1000, 2):
        wheel.cancel(key)
    assert len(wheel) == 500
    got = wheel.advance(1000 * 97)
    assert [key for key, _ in got] == list(range(1, 1000, 2))
    assert not tombstones(wheel)
    assert not any(wheel._buckets)


def test_churn_of_fresh_keys_keeps_tombstones_bounded() -> None:
    # the timeout pattern: arm a far timer, cancel it soon after, with keys never reused
    wheel: TimingWheel[int, int] = TimingWheel()
    for key in range(10):
        wheel.add(key, 3_600_000 + key, key)
    spare = TimingWheel.SPARE_TOMBSTONES
    for key in range(10, 10 + 20 * spare):
        wheel.add(key, 30_000 + key % 5000, key)
        wheel.cancel(key)
        # a sweep starts past `spare` tombstones beyond the pending entries and takes
        # entries / SWEEP_SLICE adds, each of which may leave one more (counting them walks
        # the wheel, so every 61st step: the bound holds at each)
        if key % 61 == 0:
            assert len(tombstones(wheel)) <= 2 * (len(wheel) + spare)
    assert len(wheel) == 10
    entries = sum(len(bucket) for bucket in wheel._buckets) + len(wheel._queued_keys)
    assert entries <= 10 + 2 * (10 + spare)
    assert wheel.advance(3_600_000 + 10) == [(key, key) for key in range(10)]
    assert not tombstones(wheel)


def test_next_due_ms_skips_a_bucket_of_cancelled_entries() -> None:
    wheel: TimingWheel[str, None] = TimingWheel()
    wheel.add("gone", 5, None)
    wheel.add("gone too", 5, None)
    wheel.add("kept", 9, None)
    wheel.cancel("gone")
    wheel.cancel("gone too")
    assert wheel.next_due_ms() == 9
    assert not tombstones(wheel)


def test_a_filed_entry_is_its_own_key_and_value() -> None:
    wheel: TimingWheel[WheelEntry, WheelEntry] = TimingWheel()
    early, late = WheelEntry(0), WheelEntry(0)
    wheel.file(late, 20)
    wheel.file(early, 10)
    assert len(wheel) == 2
    assert late.due_ms == 20
    assert wheel.next_due_ms() == 10
    assert wheel.advance(15) == [(early, early)]
    assert wheel.discard(early) is False, "a fired entry is no longer pending"
    assert wheel.move(early, 30) is False
    assert wheel.move(late, 25) is True
    assert late.due_ms == 25
    assert wheel.advance(24) == []
    assert wheel.advance(25) == [(late, late)]
    assert len(wheel) == 0


def test_filing_a_pending_entry_again_is_refused() -> None:
    wheel: TimingWheel[WheelEntry, WheelEntry] = TimingWheel()
    entry = WheelEntry(0)
    wheel.file(entry, 5)
    with pytest.raises(ValueError, match="entry: already filed"):
        wheel.file(entry, 6)
    assert wheel.advance(6) == [(entry, entry)]


def test_discarded_entries_never_fire_and_leave_with_their_bucket() -> None:
    wheel: TimingWheel[WheelEntry, WheelEntry] = TimingWheel()
    entries = [WheelEntry(0) for _ in range(1000)]
    for n, entry in enumerate(entries):
        wheel.file(entry, 1 + n * 97)
    for entry in entries[::2]:
        assert wheel.discard(entry) is True
        assert wheel.discard(entry) is False
    assert len(wheel) == 500
    got = wheel.advance(1000 * 97)
    assert [entry for entry, _ in got] == entries[1::2]
    assert wheel._filed_dead == 0
    assert not any(wheel._buckets)


def test_a_filed_entry_cancelled_before_the_queue_is_filed_never_enters_a_bucket() -> None:
    wheel: TimingWheel[object, object] = TimingWheel()
    first, gone, last = WheelEntry(0), WheelEntry(0), WheelEntry(0)
    wheel.file(first, 10)
    wheel.add("keyed", 10, "v")
    wheel.file(gone, 10)
    wheel.file(last, 10)
    assert gone.cancel() is True, "an entry cancels itself, as the wheel's discard does"
    assert gone.cancel() is False
    assert wheel.discard(gone) is False
    assert len(wheel) == 3
    assert wheel.next_due_ms() == 10  # files the queue, leaving `gone` out
    assert wheel._filed_dead == 0
    assert not any(gone in bucket for bucket in wheel._buckets)
    assert wheel.advance(10) == [(first, first), ("keyed", "v"), (last, last)]
    assert gone.due_ms == 10, "a cancelled entry keeps its due time"


def test_an_entry_is_discarded_only_by_the_wheel_it_is_filed_in() -> None:
    mine: TimingWheel[WheelEntry, WheelEntry] = TimingWheel()
    other: TimingWheel[WheelEntry, WheelEntry] = TimingWheel()
    entry = WheelEntry(0)
    mine.file(entry, 5)
    assert other.discard(entry) is False
    assert other.move(entry, 6) is False
    assert len(mine) == 1
    assert mine.advance(5) == [(entry, entry)]


def test_clear_drops_keyed_and_filed_entries_and_spends_the_filed() -> None:
    wheel: TimingWheel[object, object] = TimingWheel()
    entry = WheelEntry(0)
    wheel.file(entry, 50)
    wheel.add("k", 60, "v")
    wheel.clear()
    assert len(wheel) == 0
    assert wheel.discard(entry) is False
    assert len(wheel) == 0
    assert wheel.next_due_ms() is None
    assert wheel.advance(100) == []
