"""The schedule routes, in process over a memory and a SQLite store: every route, its statuses,
and what each does to the occurrence timers a schedule owns."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx
import pytest

from tickwheel.model import State
from tickwheel.schedule import RECENT_RUNS
from tickwheel.stores.base import Store, StoreSettings
from tickwheel.stores.memory import MemoryStore
from tickwheel.stores.open import open_store

from .conftest import ClientFactory, serve
from .test_api import error_of

HOOK = "https://example.com/hook"
RFC3339_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
MINUTE_MS = 60_000


def schedule(**fields: Any) -> dict[str, Any]:
    """A valid schedule body, every minute; `fields` replace or add fields."""
    return {"every": 60, "callback": {"url": HOOK}, **fields}


def next_year_at(month: int, day: int, hour: int) -> datetime:
    """A UTC time in the coming year: far enough to be ahead, near enough for the horizon."""
    return datetime(datetime.now(UTC).year + 1, month, day, hour, tzinfo=UTC)


def ms_of(when: datetime) -> int:
    return int(when.timestamp() * 1000)


async def create(client: httpx.AsyncClient, **fields: Any) -> dict[str, Any]:
    response = await client.post("/v1/schedules", json=schedule(**fields))
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


async def fire(store: Store, schedule_id: str, error: str | None = None) -> str:
    """Claim the schedule's pending occurrence ahead of its time and settle it as a worker
    would: move the series on, then ack it (or dead-letter it with `error`). Returns its id."""
    state = await store.get_schedule(schedule_id)
    assert state is not None
    assert state.next_ms is not None
    leases = await store.claim("default", state.next_ms, 100, 60_000)
    (lease,) = [lease for lease in leases if lease.timer.id.startswith(f"{schedule_id}@")]
    assert await store.advance([lease]) == [True]
    if error is None:
        await store.ack(lease)
    else:
        await store.kill(lease, error)
    return lease.timer.id


# --- creating --------------------------------------------------------------------------------


async def test_create_returns_201_and_the_schedule(client: httpx.AsyncClient, store: Store) -> None:
    before = store.now_ms()
    response = await client.post("/v1/schedules", json=schedule(id="s1"))
    assert response.status_code == 201, response.text
    body = response.json()
    assert set(body) == {
        "id", "cron", "every", "timezone", "start", "start_ms", "end", "end_ms", "max_runs",
        "jitter", "misfire", "queue", "callback", "payload", "retry", "paused", "next_run",
        "next_run_ms", "runs", "created", "updated", "upcoming",
    }  # fmt: skip
    defaults = {
        "id": "s1", "cron": None, "every": 60, "timezone": "UTC", "end": None, "end_ms": None,
        "max_runs": None, "jitter": 0, "misfire": "once", "paused": False, "runs": 0,
        "queue": "default", "payload": None,
    }  # fmt: skip
    assert {name: body[name] for name in defaults} == defaults
    assert body["callback"] == {"url": HOOK, "method": "POST", "headers": {}, "body": None}
    assert body["retry"]["max_attempts"] == 10
    # no start: an `every` schedule starts one interval from now, with its first occurrence
    assert before + MINUTE_MS <= body["start_ms"] <= store.now_ms() + MINUTE_MS
    assert body["next_run_ms"] == body["start_ms"]
    assert body["upcoming"] == [
        datetime.fromtimestamp((body["start_ms"] + n * MINUTE_MS) / 1000, UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
        for n in range(5)
    ]
    assert body["next_run"] == body["upcoming"][0]
    for text in (body["start"], body["created"], body["updated"], *body["upcoming"]):
        assert RFC3339_UTC.fullmatch(text), text
    stored = await store.get(f"s1@{body['next_run_ms']}")
    assert stored is not None
    assert (stored.state, stored.due_ms) == (State.SCHEDULED, body["next_run_ms"])


async def test_create_generates_an_id(client: httpx.AsyncClient) -> None:
    first = await create(client)
    second = await create(client)
    assert len(first["id"]) == 26
    assert first["id"] != second["id"]


async def test_cron_in_a_zone_with_start_and_end(client: httpx.AsyncClient) -> None:
    start = next_year_at(1, 1, 0)
    body = await create(
        client,
        every=None,
        cron="0 9 * * 1-5",
        timezone="Europe/Berlin",
        start=start.isoformat().replace("+00:00", "Z"),
        end=start.timestamp() + 30 * 86_400,
    )
    # 09:00 in Berlin is 08:00 UTC in winter; the first five weekdays of the year
    days = [day for day in range(1, 10) if datetime(start.year, 1, day).weekday() < 5][:5]
    assert body["upcoming"] == [f"{start.year}-01-{day:02}T08:00:00.000Z" for day in days]
    assert body["start_ms"] == ms_of(start)
    assert body["end_ms"] == ms_of(start) + 30 * 86_400_000


async def test_cron_with_seconds(client: httpx.AsyncClient) -> None:
    start = next_year_at(3, 1, 12)
    body = await create(client, every=None, cron="*/15 * * * * *", start=start.timestamp())
    assert [text[11:19] for text in body["upcoming"]] == [
        "12:00:00", "12:00:15", "12:00:30", "12:00:45", "12:01:00",
    ]  # fmt: skip


async def test_every_counts_from_start_and_max_runs_ends_it(client: httpx.AsyncClient) -> None:
    start = next_year_at(6, 1, 0)
    body = await create(client, every=1.5, start=start.timestamp(), max_runs=3)
    assert [ms - ms_of(start) for ms in map(_ms, body["upcoming"])] == [0, 1500, 3000]
    past = await create(client, every=3600, start=0)  # aligned to whole hours since 1970
    assert past["next_run_ms"] % 3_600_000 == 0


def _ms(text: str) -> int:
    return ms_of(datetime.fromisoformat(text.replace("Z", "+00:00")))


async def test_payload_schedule_for_a_queue(client: httpx.AsyncClient, store: Store) -> None:
    body = await create(client, id="q", callback=None, queue="reports", payload={"n": 1})
    assert (body["callback"], body["queue"], body["payload"]) == (None, "reports", {"n": 1})
    stored = await store.get(f"q@{body['next_run_ms']}")
    assert stored is not None
    assert (stored.queue, stored.payload, stored.callback) == ("reports", {"n": 1}, None)


async def test_jitter_delays_the_occurrence_timer_only(
    client: httpx.AsyncClient, store: Store
) -> None:
    body = await create(client, id="j", jitter=30, start=next_year_at(1, 1, 0).timestamp())
    stored = await store.get(f"j@{body['next_run_ms']}")
    assert stored is not None
    assert body["next_run_ms"] <= stored.due_ms <= body["next_run_ms"] + 30_000
    assert body["jitter"] == 30


async def test_repeat_with_the_same_spec_is_200(client: httpx.AsyncClient) -> None:
    start = next_year_at(1, 1, 0).timestamp()
    for body in (schedule(id="with-start", start=start), schedule(id="without-start")):
        created = await client.post("/v1/schedules", json=body)
        repeated = await client.post("/v1/schedules", json=body)
        assert (created.status_code, repeated.status_code) == (201, 200), repeated.text
        assert repeated.json() == created.json()


async def test_same_id_with_another_spec_is_409(client: httpx.AsyncClient, store: Store) -> None:
    await create(client, id="c")
    for other in (
        schedule(id="c", every=61),
        schedule(id="c", every=None, cron="* * * * *"),
        schedule(id="c", start=0),
        schedule(id="c", callback={"url": HOOK + "2"}),
    ):
        error = error_of(await client.post("/v1/schedules", json=other), 409)
        assert (error["code"], error["field"]) == ("conflict", "id")
    stored = await store.get_schedule("c")
    assert stored is not None
    assert stored.schedule.every_s == 60


async def test_a_paused_schedule_repeats_too(client: httpx.AsyncClient) -> None:
    created = await create(client, id="p")
    await client.post("/v1/schedules/p/pause")
    repeated = await client.post("/v1/schedules", json=schedule(id="p"))
    assert repeated.status_code == 200
    assert repeated.json()["paused"] is True
    assert repeated.json()["start"] == created["start"]


async def test_private_callback_is_refused(
    client: httpx.AsyncClient, make_client: ClientFactory
) -> None:
    private = {"url": "http://127.0.0.1:9/hook"}
    error = error_of(await client.post("/v1/schedules", json=schedule(callback=private)), 422)
    assert error["field"] == "callback.url"
    await create(client, id="pub")
    changed = await client.patch("/v1/schedules/pub", json={"callback": private})
    assert error_of(changed, 422)["field"] == "callback.url"
    async with make_client(allow_private_targets=True) as allowed:
        assert (await allowed.post("/v1/schedules", json=schedule(callback=private))).is_success


async def test_start_past_the_horizon_is_422(client: httpx.AsyncClient) -> None:
    error = error_of(await client.post("/v1/schedules", json=schedule(start=9_999_999_999)), 422)
    assert error["field"] == "start"


async def test_header_values_are_redacted(client: httpx.AsyncClient) -> None:
    body = await create(client, id="h", callback={"url": HOOK, "headers": {"X-Key": "s3cret"}})
    assert body["callback"]["headers"] == {"X-Key": "***"}
    listed = (await client.get("/v1/schedules")).json()
    assert "s3cret" not in str(listed)
    assert "s3cret" not in (await client.get("/v1/schedules/h")).text


# --- reading ---------------------------------------------------------------------------------


async def test_get(client: httpx.AsyncClient) -> None:
    created = await create(client, id="g", every=None, cron="0 0 * * *")
    response = await client.get("/v1/schedules/g")
    assert response.status_code == 200
    assert response.json() == created
    assert len(created["upcoming"]) == 5


@pytest.mark.parametrize(
    "path", ["/v1/schedules/nope", "/v1/schedules/a@1", f"/v1/schedules/{'x' * 113}"]
)
async def test_unknown_or_impossible_id_is_404_everywhere(
    client: httpx.AsyncClient, path: str
) -> None:
    for method, suffix, body in (
        ("GET", "", None),
        ("PATCH", "", {"every": 5}),
        ("DELETE", "", None),
        ("POST", "/pause", None),
        ("POST", "/resume", None),
        ("GET", "/runs", None),
    ):
        response = await client.request(method, path + suffix, json=body)
        assert error_of(response, 404)["field"] == "id", (method, suffix)


async def test_list_pages_to_the_end(client: httpx.AsyncClient) -> None:
    ids = [f"s{n:02}" for n in range(7)]
    for schedule_id in ids:
        await create(client, id=schedule_id)
    seen: list[str] = []
    cursor = None
    for _ in range(10):
        params: dict[str, Any] = {"limit": 3}
        if cursor is not None:
            params["cursor"] = cursor
        page = (await client.get("/v1/schedules", params=params)).json()
        assert set(page) == {"schedules", "cursor"}
        assert all("upcoming" not in item for item in page["schedules"])
        seen += [item["id"] for item in page["schedules"]]
        cursor = page["cursor"]
        if cursor is None:
            break
    assert seen == ids  # id order on memory and SQLite


async def test_list_query_errors(client: httpx.AsyncClient) -> None:
    for params, status, field in (
        ({"limit": 0}, 422, "limit"),
        ({"limit": 1001}, 422, "limit"),
        ({"limit": "x"}, 422, "limit"),
        ({"cursor": ""}, 422, "cursor"),
        ({"state": "scheduled"}, 400, "state"),
    ):
        response = await client.get("/v1/schedules", params=params)
        assert error_of(response, status)["field"] == field, params


async def test_an_empty_list(client: httpx.AsyncClient) -> None:
    assert (await client.get("/v1/schedules")).json() == {"schedules": [], "cursor": None}


# --- changing --------------------------------------------------------------------------------


async def test_patch_switches_between_cron_and_every(
    client: httpx.AsyncClient, store: Store
) -> None:
    first = await create(client, id="sw", every=3600)
    old_timer = f"sw@{first['next_run_ms']}"
    to_cron = await client.patch("/v1/schedules/sw", json={"cron": "*/10 * * * *"})
    assert to_cron.status_code == 200, to_cron.text
    body = to_cron.json()
    assert (body["cron"], body["every"]) == ("*/10 * * * *", None)
    assert body["next_run_ms"] % 600_000 == 0
    assert body["next_run_ms"] > store.now_ms() - 1000
    gaps = [_ms(later) - _ms(earlier) for earlier, later in pairwise(body["upcoming"])]
    assert gaps == [600_000] * 4
    assert await store.get(old_timer) is None  # the old pending occurrence is cancelled
    assert await store.get(f"sw@{body['next_run_ms']}") is not None

    to_every = await client.patch("/v1/schedules/sw", json={"every": 90})
    assert to_every.status_code == 200, to_every.text
    back = to_every.json()
    assert (back["cron"], back["every"]) == (None, 90)
    assert (back["next_run_ms"] - back["start_ms"]) % 90_000 == 0
    assert await store.get(f"sw@{body['next_run_ms']}") is None
    pending = await store.get(f"sw@{back['next_run_ms']}")
    assert pending is not None
    assert pending.state is State.SCHEDULED
    assert back["updated"] >= back["created"]


async def test_patch_other_fields_and_null_restores_the_default(
    client: httpx.AsyncClient, store: Store
) -> None:
    await create(client, id="f", every=None, cron="0 12 * * *", max_runs=3, jitter=5)
    changed = await client.patch(
        "/v1/schedules/f",
        json={
            "timezone": "America/New_York",
            "misfire": "skip",
            "callback": {"url": HOOK + "/new", "method": "PUT"},
            "max_runs": None,
            "jitter": None,
            "retry": {"max_attempts": 2},
        },
    )
    assert changed.status_code == 200, changed.text
    body = changed.json()
    assert (body["timezone"], body["misfire"], body["max_runs"], body["jitter"]) == (
        "America/New_York", "skip", None, 0,
    )  # fmt: skip
    assert body["callback"]["url"] == HOOK + "/new"
    assert body["retry"]["max_attempts"] == 2
    assert all(text.endswith(("16:00:00.000Z", "17:00:00.000Z")) for text in body["upcoming"])
    pending = await store.get(f"f@{body['next_run_ms']}")
    assert pending is not None
    assert pending.callback is not None
    assert (pending.callback.url, pending.callback.method) == (HOOK + "/new", "PUT")
    assert pending.due_ms == body["next_run_ms"]  # no jitter left

    to_queue = await client.patch("/v1/schedules/f", json={"callback": None, "payload": [1]})
    assert (to_queue.json()["callback"], to_queue.json()["payload"]) == (None, [1])
    back = await client.patch("/v1/schedules/f", json={"timezone": None, "misfire": None})
    assert (back.json()["timezone"], back.json()["misfire"]) == ("UTC", "once")


async def test_patch_end_in_the_past_ends_the_schedule(
    client: httpx.AsyncClient, store: Store
) -> None:
    first = await create(client, id="e", start=0)
    response = await client.patch("/v1/schedules/e", json={"end": store.now_ms() / 1000 - 1})
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["next_run"], body["next_run_ms"], body["upcoming"]) == (None, None, [])
    assert await store.get(f"e@{first['next_run_ms']}") is None
    reopened = await client.patch("/v1/schedules/e", json={"end": None})
    assert reopened.json()["next_run_ms"] is not None


async def test_patch_of_nothing_changes_nothing(client: httpx.AsyncClient) -> None:
    created = await create(client, id="n")
    response = await client.patch("/v1/schedules/n", json={})
    assert response.status_code == 200
    assert response.json()["next_run_ms"] == created["next_run_ms"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"cron": "* * * * *", "every": 60}, "cron"),
        ({"every": None}, "cron"),
        ({"cron": "not cron"}, "cron"),
        ({"cron": "61 * * * *"}, "cron"),
        ({"every": 0}, "every"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"end": 0}, "end"),
        ({"callback": None}, "callback"),
        ({"misfire": "later"}, "misfire"),
        ({"id": "other"}, "id"),
        ({"start": 0}, "start"),
        ({"paused": True}, "paused"),
    ],
)
async def test_patch_errors_name_the_field(
    client: httpx.AsyncClient, store: Store, body: dict[str, Any], field: str
) -> None:
    created = await create(client, id="x")
    response = await client.patch("/v1/schedules/x", json=body)
    assert error_of(response, 422)["field"] == field
    stored = await store.get_schedule("x")
    assert stored is not None
    assert (stored.schedule.every_s, stored.next_ms) == (60, created["next_run_ms"])


# --- pausing ---------------------------------------------------------------------------------


async def test_pause_and_resume(client: httpx.AsyncClient, store: Store) -> None:
    created = await create(client, id="pr", start=next_year_at(1, 1, 0).timestamp())
    occurrence = f"pr@{created['next_run_ms']}"
    before = await store.get(occurrence)
    assert before is not None

    paused = await client.post("/v1/schedules/pr/pause")
    assert paused.status_code == 200, paused.text
    assert paused.json()["paused"] is True
    assert paused.json()["next_run_ms"] == created["next_run_ms"]
    assert await store.get(occurrence) is None  # nothing fires while paused
    assert (await client.get(f"/v1/timers/{occurrence}")).status_code == 404
    again = await client.post("/v1/schedules/pr/pause")
    assert (again.status_code, again.json()["paused"]) == (200, True)
    # a change keeps it paused
    changed = await client.patch("/v1/schedules/pr", json={"every": 120})
    assert changed.json()["paused"] is True
    assert await store.get(f"pr@{changed.json()['next_run_ms']}") is None

    resumed = await client.post("/v1/schedules/pr/resume")
    assert resumed.status_code == 200, resumed.text
    body = resumed.json()
    assert body["paused"] is False
    timer = await store.get(f"pr@{body['next_run_ms']}")
    assert timer is not None
    assert (timer.state, timer.due_ms) == (State.SCHEDULED, body["next_run_ms"])
    assert (await client.post("/v1/schedules/pr/resume")).json()["paused"] is False


async def test_resume_brings_the_occurrence_back_at_its_own_time(
    client: httpx.AsyncClient, store: Store
) -> None:
    created = await create(client, id="back", every=3600)
    await client.post("/v1/schedules/back/pause")
    await client.post("/v1/schedules/back/resume")
    timer = await store.get(f"back@{created['next_run_ms']}")
    assert timer is not None
    assert timer.due_ms == created["next_run_ms"]  # not moved to after the resume


# --- deleting --------------------------------------------------------------------------------


async def test_delete(client: httpx.AsyncClient, store: Store) -> None:
    created = await create(client, id="d")
    response = await client.delete("/v1/schedules/d")
    assert (response.status_code, response.content) == (204, b"")
    assert await store.get_schedule("d") is None
    assert await store.get(f"d@{created['next_run_ms']}") is None
    assert error_of(await client.get("/v1/schedules/d"), 404)["field"] == "id"
    assert error_of(await client.delete("/v1/schedules/d"), 404)["code"] == "not_found"
    assert (await client.post("/v1/schedules", json=schedule(id="d", every=5))).status_code == 201


# --- runs ------------------------------------------------------------------------------------


async def test_runs_newest_first_with_their_timers(client: httpx.AsyncClient, store: Store) -> None:
    created = await create(client, id="r", every=1)
    start_ms = created["start_ms"]
    assert (await fire(store, "r")) == f"r@{start_ms}"
    await fire(store, "r", error="HTTP 410")
    response = await client.get("/v1/schedules/r/runs")
    assert response.status_code == 200, response.text
    runs = response.json()["runs"]
    assert [run["nominal_ms"] for run in runs] == [start_ms + 2000, start_ms + 1000, start_ms]
    pending, dead, done = runs
    assert pending == {
        "nominal": created["upcoming"][2],
        "nominal_ms": start_ms + 2000,
        "timer_id": f"r@{start_ms + 2000}",
        "pending": True,
        "state": "scheduled",
        "attempt": 0,
        "last_error": None,
        "attempts": f"/v1/timers/r@{start_ms + 2000}/attempts",
    }
    assert (dead["state"], dead["attempt"], dead["last_error"]) == ("dead", 1, "HTTP 410")
    assert (done["state"], done["attempt"], done["pending"]) == ("done", 1, False)
    assert done["nominal"] == created["upcoming"][0]
    got = (await client.get("/v1/schedules/r")).json()
    assert got["runs"] == 2


async def test_runs_keep_the_latest_ten(client: httpx.AsyncClient, store: Store) -> None:
    await create(client, id="ten", every=1)
    for _ in range(RECENT_RUNS + 2):
        await fire(store, "ten")
    runs = (await client.get("/v1/schedules/ten/runs")).json()["runs"]
    assert len(runs) == RECENT_RUNS + 1  # the pending one, then the ten latest fired
    assert [run["pending"] for run in runs] == [True] + [False] * RECENT_RUNS


async def test_runs_of_a_paused_schedule_leave_out_the_absent_pending_timer(
    client: httpx.AsyncClient,
) -> None:
    await create(client, id="rp")
    assert len((await client.get("/v1/schedules/rp/runs")).json()["runs"]) == 1
    await client.post("/v1/schedules/rp/pause")
    assert (await client.get("/v1/schedules/rp/runs")).json() == {"runs": []}


@pytest.fixture(params=["memory", "sqlite"])
async def forgetful(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A store that keeps a done timer for no time at all."""
    settings = StoreSettings(retention_ms=0)
    opened = (
        MemoryStore(settings)
        if request.param == "memory"
        else open_store(f"sqlite:///{tmp_path}/t.db", settings)
    )
    try:
        yield opened
    finally:
        await opened.close()


async def test_runs_whose_timer_is_gone_have_a_null_state(forgetful: Store) -> None:
    async with serve(forgetful) as client:
        created = await create(client, id="gone", every=1)
        await fire(forgetful, "gone")
        runs = (await client.get("/v1/schedules/gone/runs")).json()["runs"]
    assert runs[1] == {
        "nominal": created["start"],
        "nominal_ms": created["start_ms"],
        "timer_id": f"gone@{created['start_ms']}",
        "pending": False,
        "state": None,
        "attempt": None,
        "last_error": None,
        "attempts": f"/v1/timers/gone@{created['start_ms']}/attempts",
    }


# --- occurrence timers belong to their schedule ----------------------------------------------


async def test_occurrence_timers_are_read_but_not_moved_or_cancelled(
    client: httpx.AsyncClient, store: Store
) -> None:
    created = await create(client, id="own")
    occurrence = f"own@{created['next_run_ms']}"
    got = await client.get(f"/v1/timers/{occurrence}")
    assert got.status_code == 200
    assert got.json()["id"] == occurrence
    for response in (
        await client.delete(f"/v1/timers/{occurrence}"),
        await client.patch(f"/v1/timers/{occurrence}", json={"delay": 5}),
        await client.put(f"/v1/timers/{occurrence}", json={"delay": 5, "callback": {"url": HOOK}}),
    ):
        error = error_of(response, 409)
        assert (error["code"], error["field"]) == ("schedule_occurrence", "id")
        assert "pause, change or delete the schedule" in error["message"]
        assert "/v1/schedules/own" in error["message"]
    timer = await store.get(occurrence)
    assert timer is not None
    assert (timer.state, timer.due_ms) == (State.SCHEDULED, created["next_run_ms"])


async def test_an_occurrence_id_cannot_be_taken_by_a_timer(client: httpx.AsyncClient) -> None:
    # a timer planted under a future occurrence's id would fire in its place
    put = await client.put("/v1/timers/own@4102444800000", json={"delay": 5, "payload": 1})
    assert error_of(put, 409)["code"] == "schedule_occurrence"
    posted = await client.post("/v1/timers", json={"id": "own@1", "delay": 5, "payload": 1})
    assert error_of(posted, 422)["field"] == "id"


async def test_unknown_occurrence_is_404(client: httpx.AsyncClient) -> None:
    for response in (
        await client.get("/v1/timers/none@1"),
        await client.delete("/v1/timers/none@1"),
        await client.patch("/v1/timers/none@1", json={"delay": 5}),
        await client.post("/v1/dead/none@1/replay"),
    ):
        assert error_of(response, 404)["field"] == "id"


async def test_a_dead_occurrence_can_be_replayed(client: httpx.AsyncClient, store: Store) -> None:
    await create(client, id="rep", every=1)
    occurrence = await fire(store, "rep", error="HTTP 500")
    dead = (await client.get("/v1/dead")).json()["timers"]
    assert [timer["id"] for timer in dead] == [occurrence]
    replayed = await client.post(f"/v1/dead/{occurrence}/replay")
    assert replayed.status_code == 200, replayed.text
    assert replayed.json()["state"] == "scheduled"


# --- auth and the document -------------------------------------------------------------------


async def test_the_token_guards_the_schedule_routes(make_client: ClientFactory) -> None:
    async with make_client(token="tok") as client:
        refused = await client.get("/v1/schedules")
        allowed = await client.get("/v1/schedules", headers={"Authorization": "Bearer tok"})
    assert error_of(refused, 401)["code"] == "unauthorized"
    assert allowed.status_code == 200


async def test_openapi_documents_every_schedule_route(client: httpx.AsyncClient) -> None:
    document = (await client.get("/openapi.json")).json()
    paths = document["paths"]
    assert set(paths["/v1/schedules"]) == {"get", "post"}
    assert set(paths["/v1/schedules/{schedule_id}"]) == {"get", "patch", "delete"}
    for action in ("pause", "resume"):
        assert set(paths[f"/v1/schedules/{{schedule_id}}/{action}"]) == {"post"}
    assert set(paths["/v1/schedules/{schedule_id}/runs"]) == {"get"}
    create_op = paths["/v1/schedules"]["post"]
    assert create_op["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ScheduleIn"
    }
    assert {"200", "201", "409", "422"} <= set(create_op["responses"])
    assert "404" in paths["/v1/schedules/{schedule_id}"]["delete"]["responses"]
    assert "409" in paths["/v1/timers/{timer_id}"]["delete"]["responses"]
    schemas = document["components"]["schemas"]
    fields = set(schemas["ScheduleIn"]["properties"])
    assert fields == {
        "id", "cron", "every", "timezone", "start", "end", "max_runs", "jitter", "misfire",
        "queue", "callback", "payload", "retry",
    }  # fmt: skip
    assert "upcoming" in schemas["ScheduleDetailOut"]["properties"]
    assert schemas["ScheduleIn"]["properties"]["every"]["anyOf"][0]["minimum"] == 1
