"""Issue 23: schedules and host limits were unbounded, and ``{"cron": "* * * * * *"}`` kept a
done occurrence a second. A store holds at most its operator's caps (429 past them, nothing
written) and a schedule may fire no more often than the operator's minimum interval (422)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from service.conftest import serve
from service.test_api import error_of

from tickwheel.stores import MemoryStore, Store, StoreSettings
from tickwheel.stores.sqlite import SqliteStore

HOOK = "https://example.com/hook"


def capped(kind: str, tmp_path: Path, **caps: Any) -> Store:
    settings = StoreSettings(**caps)
    if kind == "memory":
        return MemoryStore(settings)
    return SqliteStore(tmp_path / "t.db", settings)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_schedule_past_the_cap_is_429_naming_the_field(kind: str, tmp_path: Path) -> None:
    store = capped(kind, tmp_path, max_schedules=2)
    try:
        async with serve(store) as client:
            for n in range(2):
                body = {"id": f"s{n}", "every": 60, "callback": {"url": HOOK}}
                assert (await client.post("/v1/schedules", json=body)).status_code == 201
            body = {"id": "s2", "every": 60, "callback": {"url": HOOK}}
            error = error_of(await client.post("/v1/schedules", json=body), 429)
            assert (error["code"], error["field"]) == ("cap_reached", "id")
            assert "(2)" in error["message"]
            assert (await client.get("/v1/schedules/s2")).status_code == 404
    finally:
        await store.close()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_host_limit_past_the_cap_is_429_and_an_existing_one_still_changes(
    kind: str, tmp_path: Path
) -> None:
    store = capped(kind, tmp_path, max_limits=1)
    try:
        async with serve(store) as client:
            assert (await client.put("/v1/limits/a.example", json={"rate": 5})).status_code == 200
            refused = await client.put("/v1/limits/b.example", json={"rate": 5})
            error = error_of(refused, 429)
            assert (error["code"], error["field"]) == ("cap_reached", "host")
            assert (await client.put("/v1/limits/a.example", json={"rate": 9})).status_code == 200
            assert list(await store.limits()) == ["a.example"]
    finally:
        await store.close()


@pytest.mark.parametrize(
    ("rule", "field"),
    [
        ({"cron": "* * * * * *"}, "cron"),
        ({"cron": "*/30 * * * * *"}, "cron"),
        ({"cron": "0,1 * * * *"}, "cron"),  # at minute 0 and 1: a gap of 60 s
        ({"every": 30}, "every"),
    ],
)
async def test_a_schedule_firing_more_often_than_the_minimum_is_422(
    rule: dict[str, Any], field: str
) -> None:
    store = MemoryStore()
    try:
        async with serve(store, min_schedule_interval_s=120) as client:
            body = {"id": "s1", "callback": {"url": HOOK}, **rule}
            error = error_of(await client.post("/v1/schedules", json=body), 422)
            assert error["field"] == field
            assert "120 s" in error["message"]
            assert await store.get_schedule("s1") is None
            body = {"id": "s1", "callback": {"url": HOOK}, "cron": "*/2 * * * *"}
            assert (await client.post("/v1/schedules", json=body)).status_code == 201
            changed = await client.patch("/v1/schedules/s1", json=rule)
            assert error_of(changed, 422)["field"] == field
    finally:
        await store.close()


async def test_a_cron_with_seconds_is_still_accepted_by_default() -> None:
    store = MemoryStore()
    try:
        async with serve(store) as client:
            body = {"id": "s1", "callback": {"url": HOOK}, "cron": "* * * * * *"}
            assert (await client.post("/v1/schedules", json=body)).status_code == 201
    finally:
        await store.close()


async def test_a_new_queue_past_the_cap_is_429_by_every_route_that_makes_one() -> None:
    store = MemoryStore()
    try:
        async with serve(store, max_queues=2) as client:
            for queue in ("q1", "q2"):
                body = {"delay": 60_000, "queue": queue, "callback": {"url": HOOK}}
                assert (await client.post("/v1/timers", json=body)).status_code == 201
            body = {"delay": 60_000, "queue": "q3", "callback": {"url": HOOK}}
            error = error_of(await client.post("/v1/timers", json=body), 429)
            assert (error["code"], error["field"]) == ("cap_reached", "queue")
            assert error_of(await client.put("/v1/timers/t3", json=body), 429)
            batch = [
                {"delay": 60_000, "queue": "q1", "callback": {"url": HOOK}},
                {"delay": 60_000, "queue": "q4", "callback": {"url": HOOK}},
            ]
            results = (await client.post("/v1/timers/batch", json={"timers": batch})).json()
            statuses = [r["status"] for r in results["results"]]
            assert statuses == [201, 429]
            assert results["results"][1]["error"]["field"] == "queue"
            for response in (
                await client.put("/v1/queues/q5/limit", json={"rate": 1}),
                await client.put("/v1/queues/q5", json={"paused": True}),
                await client.post("/v1/queues/q5/pause"),
                await client.post("/v1/schedules", json={"every": 60, "queue": "q5", "payload": 1}),
            ):
                assert error_of(response, 429)["field"] == "queue"
            assert (await client.post("/v1/queues/q1/pause")).status_code == 200
            defaults = {"paused": False, "limit": None}
            assert (await client.put("/v1/queues/q6", json=defaults)).status_code == 200
            assert sorted(q.name for q in await store.queue_infos()) == ["q1", "q2"]
    finally:
        await store.close()
