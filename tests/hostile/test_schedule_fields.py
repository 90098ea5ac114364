"""Every field of a schedule, created or changed, with hostile values: each is a 422 naming the
field, never a 500, and nothing is stored.

The bounds they test: ``every`` from 1 s to 366 days, ``jitter`` at most an hour, ``max_runs``
from 1 to a billion, ``start`` at most 10 years ahead, ids of at most 112 characters of the
timer id alphabet (an occurrence's id adds ``@<ms>``), cron expressions of at most 256
characters, time zones by their IANA names and nothing else the zone database holds.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tickwheel.recurrence import MAX_EVERY_MS
from tickwheel.schedule import MAX_RUNS
from tickwheel.stores.memory import MemoryStore

from .test_fields import (
    FAR_TOO_DEEP,
    HOOK,
    HUGE,
    INF,
    JSON,
    LONG,
    NAN,
    NOT_NAMES,
    NOT_SECONDS,
    SURROGATE,
    TOO_DEEP,
    cases,
    raw,
)

MAX_EVERY_S = MAX_EVERY_MS // 1000
YEAR_S = 365 * 86_400


def schedule(**fields: Any) -> dict[str, Any]:
    """A valid schedule body, hourly; `fields` replace or add top-level fields."""
    return {"every": 3600, "callback": {"url": HOOK}, **fields}


def cron(**fields: Any) -> dict[str, Any]:
    """A valid cron schedule body; `fields` replace or add top-level fields."""
    return schedule(**{"every": None, "cron": "0 9 * * *", **fields})


NOT_TIMES = [*NOT_SECONDS, "\x01", SURROGATE, 253_402_300_800, "2030-01-01T00:00:00", "tomorrow"]
BAD_CRONS = [
    HUGE, 1, True, [], {}, "", "x" * 257, LONG, SURROGATE, "@daily", "* * * *",
    "* * * * * * *", "61 * * * *", "* 24 * * *", "0 0 30 2 *", "0 0 * 13 *", "0 0 * * 8",
    "*/0 * * * *", "a b c d e", "\x00 * * * *", "0 0 1 1 * 2099", "0 0 ? * *",
]  # fmt: skip
BAD_ZONES = [
    "../../etc/passwd", "/etc/passwd", "..", "America", "Etc", "zone.tab", "tzdata.zi",
    "Mars/Olympus", "europe/berlin", "UTC/", "", "x" * 65, LONG, SURROGATE, "UTC\x00",
    1, None, True, [], {},
]  # fmt: skip
BAD_IDS = [*NOT_NAMES, "x" * 113, "a@1", "s@123", "@"]
NOT_EVERY = [*NOT_SECONDS, 0, -0.0, 0.5, 0.999, 1e-400, MAX_EVERY_S + 1, 1e308]
NOT_MAX_RUNS = [HUGE, -HUGE, -1, 0, MAX_RUNS + 1, 1.5, 3.0, True, NAN, INF, "3", LONG, []]
NOT_MISFIRE = ["never", "SKIP", "", 1, None, True, LONG, [], SURROGATE]
NOT_URLS = [
    "", None, 1, LONG, "javascript:alert(1)", "https:///x", "http://127.0.0.1/hook",
    "http://[::1]/", "http://localhost/", f"https://example.com/{SURROGATE}",
]  # fmt: skip
NOT_HEADERS = [{"Host": "x"}, {"X": "a\nb"}, {f"X-{n}": "v" for n in range(33)}]
NOT_BODIES = ["x" * 70_000, {"a": NAN}, TOO_DEEP, FAR_TOO_DEEP]
NOT_PAYLOADS = [NAN, [INF], SURROGATE, {SURROGATE: 1}, "x" * 70_000, TOO_DEEP, FAR_TOO_DEEP]


def with_callback(**fields: Any) -> dict[str, Any]:
    """A valid schedule body whose callback has `fields`."""
    return schedule(callback={"url": HOOK, **fields})


CREATE_CASES = [
    *cases("id", lambda v: schedule(id=v), BAD_IDS),
    *cases("cron", lambda v: cron(cron=v), BAD_CRONS),
    *cases("cron", lambda v: v, [schedule(every=None), schedule(cron="* * * * *")]),
    *cases("every", lambda v: schedule(every=v), NOT_EVERY),
    *cases("timezone", lambda v: cron(timezone=v), BAD_ZONES),
    *cases("timezone", lambda v: schedule(timezone=v), ["../../etc/passwd", "America"]),
    *cases("start", lambda v: schedule(start=v), [*NOT_TIMES, 9_999_999_999, 11 * YEAR_S + 2e9]),
    *cases("end", lambda v: schedule(end=v), NOT_TIMES),
    *cases("end", lambda v: schedule(start=2_000_000_000, end=v), [0, 1_999_999_999, 2e9]),
    *cases("max_runs", lambda v: schedule(max_runs=v), NOT_MAX_RUNS),
    *cases("jitter", lambda v: schedule(jitter=v), [*NOT_SECONDS, 3601, 1e308, None]),
    *cases("misfire", lambda v: schedule(misfire=v), NOT_MISFIRE),
    *cases("queue", lambda v: schedule(queue=v), [*NOT_NAMES[:4], "x" * 65, *NOT_NAMES[5:], None]),
    *cases("callback", lambda v: schedule(callback=v), [1, "x", [], True, NAN, None]),
    *cases("callback.url", lambda v: schedule(callback={"url": v}), NOT_URLS),
    *cases("callback.method", lambda v: with_callback(method=v), ["TRACE", "post", None]),
    *cases("callback.headers", lambda v: with_callback(headers=v), NOT_HEADERS),
    *cases("callback.body", lambda v: with_callback(body=v), NOT_BODIES),
    *cases("retry", lambda v: schedule(retry=v), ["x", 1, [], True]),
    *cases("retry.max_attempts", lambda v: schedule(retry={"max_attempts": v}), [0, 1001, HUGE]),
    *cases("retry.timeout", lambda v: schedule(retry={"timeout": v}), [0, 1801, NAN]),
    *cases(
        "retry.min_backoff", lambda v: schedule(retry={"min_backoff": v, "max_backoff": 1}), [10]
    ),
    *cases("payload", lambda v: schedule(callback=None, payload=v), NOT_PAYLOADS),
    *cases("paused", lambda v: schedule(paused=v), [True]),
    *cases("unknown", lambda v: schedule(unknown=v), [1]),
    *cases("due", lambda v: schedule(due=v), [1]),
]


@pytest.mark.parametrize(("body", "field"), CREATE_CASES)
async def test_create_refuses_naming_the_field(
    client: httpx.AsyncClient, store: MemoryStore, body: dict[str, Any], field: str
) -> None:
    response = await client.post("/v1/schedules", content=raw(body), headers=JSON)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("invalid", field)
    assert len(error["message"]) < 1000
    assert (await store.list_schedules()).schedules == []
    assert (await store.list()).timers == []


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("61 * * * *", "Bad minute"),
        ("* 24 * * *", "Bad hour"),
        ("0 0 30 2 *", "Bad day-of-month"),
        ("0 0 * * 8", "Bad day-of-week"),
        ("* * * *", "must have 5 fields (6 with seconds), got 4"),
    ],
)
async def test_a_bad_cron_says_why(client: httpx.AsyncClient, expression: str, reason: str) -> None:
    response = await client.post("/v1/schedules", json=cron(cron=expression))
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["field"] == "cron"
    assert reason in error["message"]


async def test_a_path_for_a_zone_reads_no_file(client: httpx.AsyncClient) -> None:
    for name in ("../../etc/passwd", "/etc/passwd", "../../../../../../etc/shadow"):
        response = await client.post("/v1/schedules", json=cron(timezone=name))
        assert response.status_code == 422
        assert response.json()["error"]["message"] == f"unknown time zone {name!r}"
        assert "root:" not in response.text


async def test_a_rule_first_met_past_the_horizon_names_start(client: httpx.AsyncClient) -> None:
    # a fifth Monday in February comes every 28 years or so: past a store's 10-year horizon
    response = await client.post("/v1/schedules", json=cron(cron="0 0 * 2 MON#5"))
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["field"] == "start"
    assert error["message"].startswith("the first occurrence is more than")


CHANGE_CASES = [
    *cases("cron", lambda v: {"cron": v}, [c for c in BAD_CRONS if c != ""]),
    *cases("cron", lambda v: v, [{"every": None}, {"cron": "* * * * *", "every": 60}]),
    *cases("every", lambda v: {"every": v}, [*NOT_SECONDS, 0, 0.5, MAX_EVERY_S + 1, 1e308]),
    *cases("timezone", lambda v: {"timezone": v}, [v for v in BAD_ZONES if v is not None]),
    *cases("end", lambda v: {"end": v}, [*NOT_TIMES, 0]),
    *cases("max_runs", lambda v: {"max_runs": v}, [HUGE, 0, MAX_RUNS + 1, 1.5, True, "3"]),
    *cases("jitter", lambda v: {"jitter": v}, [*NOT_SECONDS, 3601]),
    *cases("misfire", lambda v: {"misfire": v}, ["never", 1, True, LONG]),
    *cases("queue", lambda v: {"queue": v}, ["", "a b", "x" * 65, LONG, 1]),
    *cases("callback", lambda v: {"callback": v}, [1, "x", [], True, None]),
    *cases("callback.url", lambda v: {"callback": {"url": v}}, ["", "http://127.0.0.1/", LONG]),
    *cases("retry.timeout", lambda v: {"retry": {"timeout": v}}, [0, NAN, HUGE]),
    *cases("payload", lambda v: {"payload": v}, [NAN, SURROGATE, TOO_DEEP, "x" * 70_000]),
    *cases("id", lambda v: {"id": v}, ["other"]),
    *cases("start", lambda v: {"start": v}, [0]),
    *cases("paused", lambda v: {"paused": v}, [False]),
    *cases("unknown", lambda v: {"unknown": v}, [1]),
]


@pytest.mark.parametrize(("body", "field"), CHANGE_CASES)
async def test_change_refuses_naming_the_field(
    client: httpx.AsyncClient, store: MemoryStore, body: dict[str, Any], field: str
) -> None:
    created = await client.post("/v1/schedules", json=schedule(id="s"))
    assert created.status_code == 201, created.text
    response = await client.patch("/v1/schedules/s", content=raw(body), headers=JSON)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == field
    stored = await store.get_schedule("s")
    assert stored is not None
    assert stored.next_ms == created.json()["next_run_ms"]
    assert stored.schedule.every_s == 3600


@pytest.mark.parametrize(
    "body",
    [
        schedule(every=1),
        schedule(every=1.0004),
        schedule(every=MAX_EVERY_S),
        schedule(jitter=3600),
        schedule(jitter=0.001),
        schedule(max_runs=MAX_RUNS),
        schedule(max_runs=1),
        schedule(id="x" * 112),
        schedule(id="a.b:c-d_e"),
        schedule(start=0),
        schedule(start="1970-01-01T00:00:00Z", end=253_402_300_799),
        schedule(start=9 * YEAR_S + 1_700_000_000),
        schedule(misfire="skip"),
        schedule(misfire="all"),
        cron(cron="*/15 * * * * *"),
        cron(cron="0 0 L 2 *"),
        cron(cron="0 9 * * MON-FRI", timezone="Pacific/Kiritimati"),
        cron(cron="30 2 * * *", timezone="Europe/Berlin"),
        cron(cron="0 0 29 2 *", timezone="Australia/Lord_Howe"),
        cron(timezone="Etc/GMT-14"),
        schedule(callback=None, payload=TOO_DEEP[0]),
        schedule(callback={"url": HOOK, "body": {"a": [1, 2]}, "headers": {"X-A": "é"}}),
    ],
    ids=lambda body: json.dumps(body)[:70],
)
async def test_values_at_the_bounds_are_accepted(
    client: httpx.AsyncClient, body: dict[str, Any]
) -> None:
    response = await client.post("/v1/schedules", json=body)
    assert response.status_code == 201, response.text
    got = await client.get(f"/v1/schedules/{response.json()['id']}")
    assert got.status_code == 200, got.text
