"""`Schedule`: validation, occurrences as timers with derived ids, and misfire after downtime."""

from __future__ import annotations

from typing import Any

import pytest

from tickwheel.errors import InvalidArgument
from tickwheel.model import Callback
from tickwheel.schedule import MAX_CATCH_UP, Misfire, Schedule, restore_schedule

T0 = 1_800_000_000_000  # a whole minute
HOOK = Callback(url="https://example.com/hook")


def every(seconds: float = 1, **fields: Any) -> Schedule:
    return Schedule(id="s1", every_s=seconds, start_ms=T0, callback=HOOK, **fields)


def run(schedule: Schedule, down_from_ms: int, down_to_ms: int, until_ms: int) -> list[int]:
    """Fire the schedule as a worker would, with nothing running between the two times: each
    occurrence comes up at its due time, or when the service is back. Returns the nominal
    times that fired."""
    fired: list[int] = []
    nominal = schedule.next_after(schedule.start_ms - 1)
    while nominal is not None and schedule.due_ms(nominal) < until_ms:
        now = schedule.due_ms(nominal)
        if down_from_ms <= now < down_to_ms:
            now = down_to_ms
        turn = schedule.come_up(nominal, now, len(fired))
        if turn.fire:
            fired.append(nominal)
        nominal = turn.next_ms
    return fired


@pytest.mark.parametrize(
    ("fields", "argument"),
    [
        ({"cron": "* * * * *", "every_s": 1}, "cron"),
        ({}, "cron"),
        ({"every_s": 0}, "every"),
        ({"every_s": 0.5}, "every"),
        ({"every_s": float("nan")}, "every"),
        ({"cron": "61 * * * *"}, "cron"),
        ({"cron": "* * * * *", "timezone": "Mars/Base"}, "timezone"),
        ({"every_s": 1, "timezone": "Nowhere"}, "timezone"),
        ({"every_s": 1, "end_ms": T0}, "end"),
        ({"every_s": 1, "end_ms": -5}, "end"),
        ({"every_s": 1, "max_runs": 0}, "max_runs"),
        ({"every_s": 1, "max_runs": True}, "max_runs"),
        ({"every_s": 1, "jitter_s": -1}, "jitter"),
        ({"every_s": 1, "jitter_s": float("inf")}, "jitter"),
        ({"every_s": 1, "jitter_s": 3601}, "jitter"),
        ({"every_s": 1, "misfire": "sometimes"}, "misfire"),
        ({"every_s": 1, "id": "x" * 113}, "id"),
        ({"every_s": 1, "id": "has space"}, "id"),
        ({"every_s": 1, "callback": None}, "callback"),
    ],
)
def test_bad_schedules_name_their_field(fields: dict[str, Any], argument: str) -> None:
    values: dict[str, Any] = {"id": "s1", "start_ms": T0, "callback": HOOK, **fields}
    with pytest.raises(InvalidArgument) as caught:
        Schedule(**values)
    assert caught.value.argument.split(".")[0] == argument


def test_an_occurrence_is_a_timer_whose_id_and_due_time_come_from_the_schedule() -> None:
    schedule = every(60, jitter_s=10)
    first, again = schedule.occurrence(T0), schedule.occurrence(T0)
    assert first.id == again.id == f"s1@{T0}"
    assert first.due_ms == again.due_ms  # the jitter too: creating it twice is a no-op
    assert T0 <= first.due_ms <= T0 + 10_000
    assert first.callback == HOOK
    dues = {schedule.due_ms(T0 + 60_000 * k) - (T0 + 60_000 * k) for k in range(50)}
    assert len(dues) > 10  # spread, never early
    assert min(dues) >= 0


def test_start_end_and_max_runs_bound_the_series() -> None:
    assert every(1, end_ms=T0 + 3000).upcoming(T0 - 1) == [T0, T0 + 1000, T0 + 2000]
    assert every(1, max_runs=2).upcoming(T0 - 1) == [T0, T0 + 1000]
    assert every(1, max_runs=2).next_after(T0 + 1000, runs=2) is None
    cron = Schedule(id="c", cron="0 * * * *", start_ms=T0 + 1, callback=HOOK)
    assert cron.next_after(0) == T0 + 3_600_000  # not before start


@pytest.mark.parametrize(
    ("misfire", "expected_in_gap"),
    [(Misfire.SKIP, 0), (Misfire.ONCE, 1), (Misfire.ALL, 10)],
)
def test_ten_seconds_of_downtime_every_second(misfire: Misfire, expected_in_gap: int) -> None:
    schedule = every(1, misfire=misfire)
    # nothing runs from T0 + 1.5 s to T0 + 11.5 s: the occurrences at +2 .. +11 s are missed
    fired = run(schedule, T0 + 1500, T0 + 11_500, until_ms=T0 + 20_000)
    before = [ms for ms in fired if ms < T0 + 2000]
    in_gap = [ms for ms in fired if T0 + 2000 <= ms <= T0 + 11_000]
    after = [ms for ms in fired if ms > T0 + 11_000]
    assert before == [T0, T0 + 1000]
    assert len(in_gap) == expected_in_gap
    assert after == [T0 + 1000 * k for k in range(12, 20)]  # then each on schedule
    assert fired == sorted(set(fired))  # none twice


def test_all_folds_what_is_beyond_its_bound() -> None:
    schedule = every(1, misfire=Misfire.ALL)
    down_s = MAX_CATCH_UP + 50
    fired = run(schedule, T0 + 500, T0 + down_s * 1000 + 500, until_ms=T0 + (down_s + 5) * 1000)
    # more missed than the bound: the first missed fires for all of them, as with "once"
    assert fired == [T0, T0 + 1000] + [T0 + 1000 * k for k in range(down_s + 1, down_s + 5)]


def test_an_occurrence_on_time_fires_and_names_the_next() -> None:
    turn = every(5).come_up(T0, T0 + 3, runs=0)
    assert turn.fire
    assert turn.next_ms == T0 + 5000


def test_a_restored_schedule_equals_the_one_built_and_keeps_its_rule() -> None:
    built = Schedule(
        id="r", cron="*/5 * * * *", timezone="Europe/Berlin", start_ms=T0, callback=HOOK
    )
    values = {name: getattr(built, name) for name in Schedule.__dataclass_fields__}
    del values["rule"]
    restored = restore_schedule(**values)
    assert restored == built
    assert restored.next_after(T0) == built.next_after(T0)
    assert restored.rule is built.rule  # one Cron per rule and zone
