"""Occurrences of `Every` and `Cron` rules, checked against a brute-force minute-by-minute walk.

The reference matches each UTC minute's local wall time against the fields itself (Vixie cron's
rules, day-of-month OR day-of-week unless either starts with ``*``), fires a repeated wall time
once and a skipped one at the end of its gap: the rules `tickwheel.recurrence` documents.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from functools import cache
from zoneinfo import ZoneInfo

import pytest
from budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from tickwheel.errors import InvalidArgument
from tickwheel.recurrence import Cron, Every, every_seconds, upcoming, zone

ZONES = ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe"]
MINUTE_MS = 60_000


def _ms(instant: datetime) -> int:
    return int(instant.timestamp() * 1000)


@cache  # walked when first needed: at import it cost every xdist worker 0.9 s of CPU
def _transitions(name: str) -> list[datetime]:
    tz = ZoneInfo(name)
    found = []
    instant = datetime(2024, 1, 1, tzinfo=UTC)
    offset = instant.astimezone(tz).utcoffset()
    while instant < datetime(2027, 1, 1, tzinfo=UTC):
        instant += timedelta(minutes=30)
        now = instant.astimezone(tz).utcoffset()
        if now != offset:
            found.append(instant)
            offset = now
    return found


def _values(text: str, low: int, high: int) -> set[int]:
    values: set[int] = set()
    for part in text.split(","):
        body, _, step = part.partition("/")
        if body == "*":
            first, last = low, high
        elif "-" in body:
            first, last = (int(x) for x in body.split("-"))
        else:
            first = int(body)
            last = high if step else first
        values.update(range(first, last + 1, int(step or 1)))
    return values


def reference(expression: str, zone: str, start_ms: int, end_ms: int) -> list[int]:
    minute, hour, dom, month, dow = expression.split()
    minutes, hours = _values(minute, 0, 59), _values(hour, 0, 23)
    days, months = _values(dom, 1, 31), _values(month, 1, 12)
    weekdays = {day % 7 for day in _values(dow, 0, 7)}
    either = not (dom.startswith("*") or dow.startswith("*"))

    def matches(wall: datetime) -> bool:
        if wall.minute not in minutes or wall.hour not in hours or wall.month not in months:
            return False
        day, weekday = wall.day in days, wall.isoweekday() % 7 in weekdays
        return (day or weekday) if either else (day and weekday)

    tz = ZoneInfo(zone)
    found: list[int] = []
    seen: set[datetime] = set()
    previous: datetime | None = None
    for ms in range(start_ms - start_ms % MINUTE_MS, end_ms, MINUTE_MS):
        wall = datetime.fromtimestamp(ms / 1000, tz).replace(tzinfo=None)
        skipped = []
        if previous is not None:
            skipped = [
                previous + timedelta(minutes=n)
                for n in range(1, (wall - previous) // timedelta(minutes=1))
            ]
        hit = (matches(wall) and wall not in seen) or any(matches(w) for w in skipped)
        if hit and ms > start_ms:
            found.append(ms)
        seen.add(wall)
        previous = wall
    return found


def walk(rule: Cron | Every, start_ms: int, end_ms: int) -> list[int]:
    found = []
    at: int | None = start_ms
    while True:
        at = rule.next_after(at)
        if at is None or at >= end_ms:
            return found
        found.append(at)


def _field(low: int, high: int) -> st.SearchStrategy[str]:
    number = st.integers(low, high)
    ranged = st.tuples(number, number).map(lambda p: f"{min(p)}-{max(p)}")
    stepped = st.tuples(st.sampled_from(["*", f"{low}"]), st.integers(2, 7)).map(
        lambda p: f"{p[0]}/{p[1]}"
    )
    listed = st.lists(number, min_size=1, max_size=3, unique=True).map(
        lambda xs: ",".join(map(str, sorted(xs)))
    )
    return st.one_of(st.just("*"), number.map(str), ranged, stepped, listed)


EXPRESSIONS = st.tuples(
    _field(0, 59), _field(0, 23), _field(1, 28), st.just("*"), _field(0, 6)
).map(" ".join)


@settings(max_examples=examples(full=40, ci=10), deadline=None)  # each walks 60 h minute by minute
@given(
    expression=EXPRESSIONS,
    zone=st.sampled_from(ZONES),
    pick=st.integers(0, 10_000),
    before_h=st.integers(1, 30),
)
def test_cron_matches_the_brute_force_reference_across_dst(
    expression: str, zone: str, pick: int, before_h: int
) -> None:
    transitions = _transitions(zone)
    transition = transitions[pick % len(transitions)]
    start_ms = _ms(transition - timedelta(hours=before_h))
    end_ms = _ms(transition + timedelta(hours=30))
    assert walk(Cron(expression, zone), start_ms, end_ms) == reference(
        expression, zone, start_ms, end_ms
    )


def berlin(*args: int, fold: int = 0) -> int:
    return _ms(datetime(*args, tzinfo=ZoneInfo("Europe/Berlin"), fold=fold))  # type: ignore[misc]


def test_a_wall_time_that_happens_twice_fires_once_at_its_first_instant() -> None:
    rule = Cron("30 2 * * *", "Europe/Berlin")
    # 2025-10-26: 02:30 happens at 00:30 UTC and again at 01:30 UTC
    assert rule.next_after(berlin(2025, 10, 26, 0)) == berlin(2025, 10, 26, 2, 30)
    assert rule.next_after(berlin(2025, 10, 26, 2, 30)) == berlin(2025, 10, 27, 2, 30)


def test_a_wall_time_that_never_happens_fires_when_the_gap_ends() -> None:
    rule = Cron("30 2 * * *", "Europe/Berlin")
    # 2025-03-30: clocks jump from 02:00 to 03:00
    assert rule.next_after(berlin(2025, 3, 30, 0)) == berlin(2025, 3, 30, 3, 0)
    every_quarter = Cron("*/15 * * * *", "Europe/Berlin")
    assert upcoming(every_quarter, berlin(2025, 3, 30, 1, 40), 3) == [
        berlin(2025, 3, 30, 1, 45),
        berlin(2025, 3, 30, 3, 0),  # 02:00-02:45 fold into the gap's end
        berlin(2025, 3, 30, 3, 15),
    ]


def test_lord_howe_moves_by_half_an_hour() -> None:
    tz = ZoneInfo("Australia/Lord_Howe")
    rule = Cron("0 2 * * *", "Australia/Lord_Howe")
    # 2025-10-05: 02:00 -> 02:30
    after = _ms(datetime(2025, 10, 5, 1, 0, tzinfo=tz))
    assert rule.next_after(after) == _ms(datetime(2025, 10, 5, 2, 30, tzinfo=tz))


def test_six_fields_count_seconds() -> None:
    rule = Cron("*/20 * * * * *")
    start = _ms(datetime(2030, 1, 1, tzinfo=UTC))
    assert upcoming(rule, start, 3) == [start + 20_000, start + 40_000, start + 60_000]


def test_a_rule_with_no_occurrence_left_ends() -> None:
    assert Cron("0 0 29 2 *").next_after(_ms(datetime(2028, 2, 29, tzinfo=UTC))) == _ms(
        datetime(2032, 2, 29, tzinfo=UTC)
    )


def test_every_counts_from_its_start_never_from_a_firing() -> None:
    rule = Every(1500, 10_000)
    assert rule.next_after(0) == 10_000
    assert rule.next_after(10_000) == 11_500
    assert rule.next_after(11_499) == 11_500
    assert upcoming(rule, 1_000_000, 2) == [1_001_500, 1_003_000]  # 1,000,000 is one


@pytest.mark.parametrize(
    ("build", "argument"),
    [
        (lambda: Cron("61 * * * *"), "cron"),
        (lambda: Cron("* * *"), "cron"),
        (lambda: Cron("0 0 30 2 *"), "cron"),
        (lambda: Cron("x" * 300), "cron"),
        (lambda: Cron("* * * * *", "Mars/Olympus"), "timezone"),
        (lambda: Cron("* * * * *", "../../etc/passwd"), "timezone"),
        (lambda: Cron("* * * * *", ""), "timezone"),
        (lambda: every_seconds(0, 0), "every"),
        (lambda: every_seconds(0.5, 0), "every"),
        (lambda: every_seconds(float("nan"), 0), "every"),
        (lambda: every_seconds(float("inf"), 0), "every"),
        (lambda: every_seconds(10**30, 0), "every"),
        (lambda: every_seconds(True, 0), "every"),
    ],
)
def test_bad_rules_name_their_argument(build: object, argument: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        build()  # type: ignore[operator]
    assert caught.value.argument == argument


def test_one_second_is_allowed() -> None:
    assert every_seconds(1, 0).next_after(0) == 1000


@pytest.mark.parametrize("name", ["America", "localtime", "posixrules", "../../etc/passwd", ""])
def test_only_a_zone_of_the_database_is_a_time_zone(name: str) -> None:
    with pytest.raises(InvalidArgument, match=r"^timezone:"):
        zone(name)


def test_a_rule_with_no_occurrence_before_year_9999_ends() -> None:
    last_leap_day_before_the_end = 253_370_764_800_000  # 9998-12-01, no 29 February after it
    assert Cron("0 0 29 2 *").next_after(last_leap_day_before_the_end) is None


def test_a_per_second_rule_walks_seconds_not_hours(monkeypatch: pytest.MonkeyPatch) -> None:
    """The API checks a new rule's first 200 occurrences: away from a clock change each must
    cost a few candidates, not the 3 h window a change needs (10,800 for a per-second rule)."""
    walked = 0
    walls = Cron._walls

    def counting(rule: Cron, start: datetime) -> Iterator[datetime]:
        nonlocal walked
        for candidate in walls(rule, start):
            walked += 1
            yield candidate

    monkeypatch.setattr(Cron, "_walls", counting)
    rule = Cron("* * * * * *", "Europe/Berlin")
    july = 1_782_864_000_000  # 2026-07-01T00:00Z: no clock change within hours
    assert upcoming(rule, july, 200) == [july + 1000 * n for n in range(1, 201)]
    assert walked <= 3 * 200
