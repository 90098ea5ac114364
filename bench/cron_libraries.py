"""Which cron library tickwheel reads cron fields with: croniter or cronsim, by correctness, then speed.

Each library is asked for the occurrences of random 5-field rules around DST transitions
(2024-2026) in Europe/Berlin, America/New_York and Australia/Lord_Howe, two ways:

- "own zone": the library's own time-zone handling, repeated wall times dropped after the first;
- "naive + tickwheel": the library reads naive wall times and `tickwheel.recurrence` places them.

Both are compared with the brute-force minute walk of tests/test_recurrence.py (the rules
tickwheel documents). Then each library's `next` is timed on a 5-minute rule in Berlin.

    python bench/cron_libraries.py [--rules 400] [--seed 7]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from croniter import croniter
from cronsim import CronSim

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_recurrence import TRANSITIONS, ZONES, reference

from tickwheel.recurrence import Cron

Walls = Callable[[str, datetime], Iterator[datetime]]


def croniter_walls(expression: str, start: datetime) -> Iterator[datetime]:
    it = croniter(expression, start)
    while True:
        yield it.get_next(datetime)


def cronsim_walls(expression: str, start: datetime) -> Iterator[datetime]:
    return iter(CronSim(expression, start))


def own_zone(walls: Walls, expression: str, zone: str, start_ms: int, end_ms: int) -> list[int]:
    """Occurrences by the library's own zone handling; a wall time seen before is dropped."""
    tz = ZoneInfo(zone)
    start = datetime.fromtimestamp(start_ms / 1000, tz)
    found, seen = [], set()
    for when in walls(expression, start):
        ms = int(when.timestamp() * 1000)
        if ms >= end_ms:
            return found
        wall = when.astimezone(tz).replace(tzinfo=None)
        if ms > start_ms and wall not in seen:
            seen.add(wall)
            found.append(ms)
    return found


def naive(walls: Walls, expression: str, zone: str, start_ms: int, end_ms: int) -> list[int]:
    """Occurrences from naive wall times placed by tickwheel (the library swapped under Cron)."""
    rule = Cron(expression, zone)
    place = rule._place  # the placement under test, fed by the other library's wall times
    tz = ZoneInfo(zone)
    begin = datetime.fromtimestamp(start_ms / 1000, tz).replace(tzinfo=None) - timedelta(hours=3)
    found: list[int] = []
    for wall in walls(expression, begin):
        ms = int(place(wall).timestamp() * 1000)
        if ms >= end_ms:
            return found
        if ms > start_ms and (not found or ms > found[-1]):
            found.append(ms)
    return found


def random_rule(rng: random.Random) -> str:
    def field(low: int, high: int, star: float) -> str:
        pick = rng.random()
        if pick < star:
            return "*"
        if pick < star + 0.2:
            return f"*/{rng.randint(2, max(2, (high - low) // 2))}"
        if pick < star + 0.4:
            first = rng.randint(low, high)
            return f"{first}-{rng.randint(first, high)}"
        values = sorted(rng.sample(range(low, high + 1), rng.randint(1, 3)))
        return ",".join(map(str, values))

    return " ".join(
        [field(0, 59, 0.1), field(0, 23, 0.3), field(1, 28, 0.8), "*", field(0, 6, 0.7)]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rules", type=int, default=400)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    libraries: dict[str, Walls] = {"croniter": croniter_walls, "cronsim": cronsim_walls}
    wrong = {(name, way): 0 for name in libraries for way in ("own zone", "naive + tickwheel")}
    for _ in range(args.rules):
        expression, zone = random_rule(rng), rng.choice(ZONES)
        transition = rng.choice(TRANSITIONS[zone])
        start_ms = int((transition - timedelta(hours=rng.randint(3, 30))).timestamp() * 1000)
        end_ms = int((transition + timedelta(hours=30)).timestamp() * 1000)
        expected = reference(expression, zone, start_ms, end_ms)
        for name, walls in libraries.items():
            for way, run in (("own zone", own_zone), ("naive + tickwheel", naive)):
                try:
                    got = run(walls, expression, zone, start_ms, end_ms)
                except Exception:  # a library that raises on a rule gets it wrong
                    got = None
                wrong[name, way] += got != expected
    print(f"rules disagreeing with the reference, of {args.rules} around DST transitions")
    print("| library | own zone | naive + tickwheel | µs per next (Berlin, */5) |")
    print("|:--|--:|--:|--:|")
    berlin = ZoneInfo("Europe/Berlin")
    for name, walls in libraries.items():
        start = datetime(2025, 1, 1, tzinfo=UTC).astimezone(berlin)
        iterator = walls("*/5 * * * *", start)
        began = time.perf_counter()
        for _ in range(20_000):
            next(iterator)
        per_us = (time.perf_counter() - began) / 20_000 * 1e6
        own, placed = wrong[name, "own zone"], wrong[name, "naive + tickwheel"]
        print(f"| {name} | {own} | {placed} | {per_us:.1f} |")


if __name__ == "__main__":
    main()
