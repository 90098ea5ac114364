"""The flow-control routes over memory and SQLite stores: pausing timers and queues, queue
settings, host limits, the list's filters and replaying a queue's dead letters; every refusal."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tickwheel.model import State, Timer
from tickwheel.schedule import Schedule
from tickwheel.stores.base import Limit, QueueSettings, Store
from tickwheel.stores.redis import RedisStore

from .conftest import ClientFactory, serve
from .test_api import error_of, timer

TOKEN = "s3cret-token"
ZERO = {"scheduled": 0, "leased": 0, "paused": 0, "done": 0, "dead": 0}


async def dead_letters(store: Store, queue: str, *ids: str) -> None:
    """Add timers due now to `queue` and dead-letter them, as a worker would after a 4xx."""
    for timer_id in ids:
        await store.add(Timer(id=timer_id, due_ms=store.now_ms(), queue=queue, payload=1))
    while leases := await store.claim(queue, store.now_ms(), 1000, 60_000):
        for lease in leases:
            await store.kill(lease, "HTTP 410")


# --- a timer: pause and resume ---------------------------------------------------------------


async def test_pause_then_resume_a_timer(client: httpx.AsyncClient, store: Store) -> None:
    await client.post("/v1/timers", json=timer(id="t1"))
    paused = await client.post("/v1/timers/t1/pause")
    assert paused.status_code == 200
    assert paused.json()["state"] == "paused"
    assert (await store.get("t1")).state is State.PAUSED  # type: ignore[union-attr]
    again = await client.post("/v1/timers/t1/pause")
    assert again.status_code == 200
    assert again.json()["state"] == "paused"
    listed = await client.get("/v1/timers", params={"state": "paused"})
    assert [t["id"] for t in listed.json()["timers"]] == ["t1"]
    resumed = await client.post("/v1/timers/t1/resume")
    assert resumed.status_code == 200
    assert resumed.json()["state"] == "scheduled"
    assert resumed.json()["due_ms"] == paused.json()["due_ms"]
    again = await client.post("/v1/timers/t1/resume")
    assert again.status_code == 200
    assert again.json()["state"] == "scheduled"


async def test_a_paused_timer_can_be_cancelled(client: httpx.AsyncClient, store: Store) -> None:
    await client.post("/v1/timers", json=timer(id="t1"))
    await client.post("/v1/timers/t1/pause")
    assert (await client.delete("/v1/timers/t1")).status_code == 204
    assert await store.get("t1") is None


async def test_pause_and_resume_of_unknown_or_unfit_timers(
    client: httpx.AsyncClient, store: Store
) -> None:
    for action in ("pause", "resume"):
        assert error_of(await client.post(f"/v1/timers/nope/{action}"), 404)["field"] == "id"
        error_of(await client.post(f"/v1/timers/bad%20id/{action}"), 404)
    await dead_letters(store, "default", "d1")
    error = error_of(await client.post("/v1/timers/d1/pause"), 409)
    assert (error["code"], error["field"]) == ("not_scheduled", "id")
    error = error_of(await client.post("/v1/timers/d1/resume"), 409)
    assert error["code"] == "not_paused"
    await store.add(Timer(id="l1", due_ms=store.now_ms(), queue="q", payload=1))
    await store.claim("q", store.now_ms(), 1, 60_000)
    assert error_of(await client.post("/v1/timers/l1/pause"), 409)["code"] == "not_scheduled"
    assert (await store.get("l1")).state is State.LEASED  # type: ignore[union-attr]


async def test_reschedule_moves_a_paused_timer_and_keeps_it_paused(
    client: httpx.AsyncClient, store: Store
) -> None:
    await client.post("/v1/timers", json=timer(id="t1"))
    await client.post("/v1/timers/t1/pause")
    moved = await client.patch("/v1/timers/t1", json={"due": "2031-01-01T00:00:00Z"})
    assert moved.status_code == 200, moved.text
    assert (moved.json()["state"], moved.json()["due"]) == ("paused", "2031-01-01T00:00:00.000Z")
    stored = await store.get("t1")
    assert stored is not None
    assert (stored.state, stored.due_ms) == (State.PAUSED, 1_924_992_000_000)
    sooner = await client.patch("/v1/timers/t1", json={"delay": 60})
    assert sooner.json()["state"] == "paused"
    resumed = await client.post("/v1/timers/t1/resume")
    assert (resumed.json()["state"], resumed.json()["due_ms"]) == (
        "scheduled",
        sooner.json()["due_ms"],
    )


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"delay": -1}, "delay"),
        ({"delay": 10 * 3650 * 86_400}, "delay"),
        ({"delay": "soon"}, "delay"),
        ({"due": "2031-13-01T00:00:00Z"}, "due"),
        ({"due": 1, "delay": 1}, None),
        ({"delay": 1, "state": "scheduled"}, "state"),
    ],
)
async def test_reschedule_of_a_paused_timer_refuses_bad_times(
    client: httpx.AsyncClient, store: Store, body: dict[str, Any], field: str | None
) -> None:
    await client.post("/v1/timers", json=timer(id="t1"))
    await client.post("/v1/timers/t1/pause")
    before = await store.get("t1")
    error = error_of(await client.patch("/v1/timers/t1", json=body), 422)
    if field is not None:
        assert error["field"] == field
    assert await store.get("t1") == before


async def test_reschedule_refuses_a_leased_or_dead_timer_still(
    client: httpx.AsyncClient, store: Store
) -> None:
    await dead_letters(store, "default", "d1")
    error = error_of(await client.patch("/v1/timers/d1", json={"delay": 5}), 404)
    assert (error["code"], "dead" in error["message"]) == ("not_scheduled", True)
    await store.add(Timer(id="l1", due_ms=store.now_ms(), queue="q", payload=1))
    await store.claim("q", store.now_ms(), 1, 60_000)
    error = error_of(await client.patch("/v1/timers/l1", json={"delay": 5}), 404)
    assert error["code"] == "not_scheduled"
    assert (await store.get("l1")).state is State.LEASED  # type: ignore[union-attr]


async def test_a_schedule_occurrence_is_not_paused(client: httpx.AsyncClient, store: Store) -> None:
    state = await store.add_schedule(
        Schedule(id="s", every_s=60, start_ms=store.now_ms() + 60_000, payload=1)
    )
    for action in ("pause", "resume"):
        response = await client.post(f"/v1/timers/s@{state.next_ms}/{action}")
        assert error_of(response, 409)["code"] == "schedule_occurrence"
    assert error_of(await client.post("/v1/timers/s@1/pause"), 404)["field"] == "id"


# --- the list's filters ----------------------------------------------------------------------


async def test_list_filters_by_queue_state_and_due_range(
    client: httpx.AsyncClient, store: Store
) -> None:
    for timer_id, queue, due in [
        ("a1", "a", "2030-01-01T00:00:00Z"),
        ("a2", "a", "2030-01-02T00:00:00Z"),
        ("b1", "b", "2030-01-01T00:00:00Z"),
    ]:
        body = timer(id=timer_id, queue=queue, due=due)
        del body["delay"]
        assert (await client.post("/v1/timers", json=body)).status_code == 201
    await client.post("/v1/timers/a2/pause")

    async def ids(**params: str) -> list[str]:
        response = await client.get("/v1/timers", params=params)
        assert response.status_code == 200, response.text
        return sorted(t["id"] for t in response.json()["timers"])

    assert await ids(queue="a") == ["a1", "a2"]
    assert await ids(queue="a", state="scheduled") == ["a1"]
    assert await ids(due_from="2030-01-01T00:00:00Z", due_to="2030-01-02T00:00:00Z") == [
        "a1",
        "b1",
    ]
    assert await ids(due_from="2030-01-01T00:00:00.001Z") == ["a2"]
    assert await ids(due_to="2030-01-02T01:00:00+01:00") == ["a1", "b1"]  # exclusive
    assert await ids(queue="none") == []


async def test_list_pages_through_a_filter(client: httpx.AsyncClient) -> None:
    for n in range(7):
        await client.post("/v1/timers", json=timer(id=f"a{n}", queue="a"))
        await client.post("/v1/timers", json=timer(id=f"b{n}", queue="b"))
    seen: list[str] = []
    params = {"queue": "b", "limit": "3"}
    while True:
        page = (await client.get("/v1/timers", params=params)).json()
        seen += [t["id"] for t in page["timers"]]
        if page["cursor"] is None:
            break
        params["cursor"] = page["cursor"]
    assert sorted(seen) == [f"b{n}" for n in range(7)]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"queue": "a b"}, "queue"),
        ({"queue": "x" * 65}, "queue"),
        ({"queue": "é"}, "queue"),
        ({"queue": ""}, "queue"),
        ({"state": "sleeping"}, "state"),
        ({"state": "PAUSED"}, "state"),
        ({"due_from": "yesterday"}, "due_from"),
        ({"due_from": "1700000000"}, "due_from"),
        ({"due_to": "2030-01-01T00:00:00"}, "due_to"),  # no offset
        ({"due_to": "2030-02-30T00:00:00Z"}, "due_to"),
        ({"due_to": "1969-12-31T23:59:59Z"}, "due_to"),
        ({"due_from": "2030-01-01T00:00:00Z" + "0" * 100}, "due_from"),
    ],
)
async def test_list_refuses_bad_filters(
    client: httpx.AsyncClient, params: dict[str, str], field: str
) -> None:
    assert error_of(await client.get("/v1/timers", params=params), 422)["field"] == field


async def test_list_refuses_unknown_parameters_still(client: httpx.AsyncClient) -> None:
    error = error_of(await client.get("/v1/timers", params={"due": "2030-01-01T00:00:00Z"}), 400)
    assert error["field"] == "due"


# --- queues ----------------------------------------------------------------------------------


async def test_queues_list_counts_overdue_age_and_settings(
    client: httpx.AsyncClient, store: Store
) -> None:
    assert (await client.get("/v1/queues")).json() == {"queues": [], "cursor": None}
    now = store.now_ms()
    await store.add(Timer(id="late", due_ms=now - 90_000, queue="mail", payload=1))
    await store.add(Timer(id="later", due_ms=now + 90_000, queue="mail", payload=1))
    await store.add(Timer(id="soon", due_ms=now + 90_000, queue="sms", payload=1))
    await store.pause("later")
    await dead_letters(store, "sms", "gone")
    await store.set_queue("sms", QueueSettings(limit=Limit(rate=2.5, concurrency=3)))
    queues = (await client.get("/v1/queues")).json()["queues"]
    assert [q["name"] for q in queues] == ["mail", "sms"]
    mail, sms = queues
    assert mail["counts"] == ZERO | {"scheduled": 1, "paused": 1}
    assert 90 <= mail["oldest_overdue_s"] < 120
    assert (mail["paused"], mail["limit"]) == (False, None)
    assert sms["counts"] == ZERO | {"scheduled": 1, "dead": 1}
    assert sms["oldest_overdue_s"] is None
    assert sms["limit"] == {"rate": 2.5, "burst": None, "concurrency": 3}
    one = await client.get("/v1/queues/sms")
    assert one.status_code == 200
    assert one.json() == sms


async def test_a_queue_with_nothing_reads_as_zero(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/queues/empty")
    assert response.status_code == 200
    assert response.json() == {
        "name": "empty",
        "counts": ZERO,
        "oldest_overdue_s": None,
        "paused": False,
        "limit": None,
        "defaults": None,
    }


async def test_pause_and_resume_a_queue(client: httpx.AsyncClient, store: Store) -> None:
    await store.set_queue("mail", QueueSettings(limit=Limit(concurrency=2)))
    paused = await client.post("/v1/queues/mail/pause")
    assert paused.status_code == 200
    assert paused.json()["paused"] is True
    assert paused.json()["limit"] == {"rate": None, "burst": None, "concurrency": 2}
    assert (await store.queue_settings())["mail"] == QueueSettings(
        paused=True, limit=Limit(concurrency=2)
    )
    created = await client.post("/v1/timers", json=timer(id="m1", queue="mail"))
    assert created.status_code == 201  # a paused queue still takes timers
    resumed = await client.post("/v1/queues/mail/resume")
    assert resumed.json()["paused"] is False
    assert resumed.json()["counts"]["scheduled"] == 1
    assert (await store.queue_settings())["mail"] == QueueSettings(limit=Limit(concurrency=2))
    await client.post("/v1/queues/other/resume")
    assert "other" not in await store.queue_settings()


async def test_queue_limit_routes_change_the_limit_alone(
    client: httpx.AsyncClient, store: Store
) -> None:
    await client.post("/v1/queues/mail/pause")
    response = await client.put("/v1/queues/mail/limit", json={"rate": 50, "burst": 10})
    assert response.status_code == 200
    assert (response.json()["paused"], response.json()["limit"]) == (
        True,
        {"rate": 50.0, "burst": 10, "concurrency": None},
    )
    response = await client.put("/v1/queues/mail/limit", json={"concurrency": 3})
    assert response.json()["limit"] == {"rate": None, "burst": None, "concurrency": 3}
    assert (await store.queue_settings())["mail"] == QueueSettings(
        paused=True, limit=Limit(concurrency=3)
    )
    assert (await client.delete("/v1/queues/mail/limit")).status_code == 204
    assert (await store.queue_settings())["mail"] == QueueSettings(paused=True)
    error = error_of(await client.delete("/v1/queues/mail/limit"), 404)
    assert error["field"] == "queue"
    limited = await client.put("/v1/queues/sms/limit", json={"rate": 2})
    assert (limited.json()["paused"], limited.json()["counts"]) == (False, ZERO)
    await client.post("/v1/queues/mail/resume")
    assert await store.queue_settings() == {"sms": QueueSettings(limit=Limit(rate=2.0))}


async def test_pause_and_limit_routes_at_once_keep_both(
    client: httpx.AsyncClient, store: Store
) -> None:
    """Pauses and limit changes of the same queues sent together: none undoes another."""
    queues = [f"q{n}" for n in range(20)]
    responses = await asyncio.gather(
        *(client.post(f"/v1/queues/{q}/pause") for q in queues),
        *(client.put(f"/v1/queues/{q}/limit", json={"concurrency": n + 1})
          for n, q in enumerate(queues)),
    )  # fmt: skip
    assert {response.status_code for response in responses} == {200}
    assert await store.queue_settings() == {
        q: QueueSettings(paused=True, limit=Limit(concurrency=n + 1)) for n, q in enumerate(queues)
    }
    responses = await asyncio.gather(
        *(client.post(f"/v1/queues/{q}/resume") for q in queues),
        *(client.delete(f"/v1/queues/{q}/limit") for q in queues),
    )
    assert {response.status_code for response in responses} == {200, 204}
    assert await store.queue_settings() == {}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "rate"),
        ({"burst": 5}, "rate"),
        ({"concurrency": 1, "burst": 5}, "burst"),
        ({"rate": 0}, "rate"),
        ({"rate": 1e-300}, "rate"),
        ({"rate": 1e300}, "rate"),
        ({"rate": "5"}, "rate"),
        ({"rate": True}, "rate"),
        ({"rate": 5, "burst": 0}, "burst"),
        ({"rate": 5, "burst": 100_001}, "burst"),
        ({"concurrency": 0}, "concurrency"),
        ({"concurrency": 10_001}, "concurrency"),
        ({"concurrency": 2**70}, "concurrency"),
        ({"rate": 1, "paused": True}, "paused"),
        ({"limit": {"rate": 1}}, "limit"),
    ],
)
async def test_put_queue_limit_refuses_bad_bodies(
    client: httpx.AsyncClient, store: Store, body: dict[str, Any], field: str
) -> None:
    await client.post("/v1/queues/mail/pause")
    response = await client.put("/v1/queues/mail/limit", json=body)
    assert error_of(response, 422)["field"] == field
    assert await store.queue_settings() == {"mail": QueueSettings(paused=True)}


async def test_put_queue_limit_refuses_a_body_that_is_not_json_or_an_object(
    client: httpx.AsyncClient, store: Store
) -> None:
    headers = {"Content-Type": "application/json"}
    response = await client.put("/v1/queues/mail/limit", content=b"{rate", headers=headers)
    assert error_of(response, 400)["code"] == "invalid_json"
    error_of(await client.put("/v1/queues/mail/limit", json=[1, 2]), 422)
    error_of(await client.put("/v1/queues/mail/limit", json=None), 422)
    assert await store.queue_settings() == {}


async def test_put_queue_replaces_its_settings(client: httpx.AsyncClient, store: Store) -> None:
    body = {"paused": True, "limit": {"rate": 50, "burst": 10}}
    response = await client.put("/v1/queues/mail", json=body)
    assert response.status_code == 200
    assert response.json()["paused"] is True
    assert response.json()["limit"] == {"rate": 50.0, "burst": 10, "concurrency": None}
    assert (await store.queue_settings())["mail"] == QueueSettings(
        paused=True, limit=Limit(rate=50.0, burst=10)
    )
    response = await client.put("/v1/queues/mail", json={"limit": {"concurrency": 1}})
    assert response.json()["paused"] is False
    assert (await store.queue_settings())["mail"] == QueueSettings(limit=Limit(concurrency=1))
    assert (await client.put("/v1/queues/mail", json={})).json()["limit"] is None
    assert await store.queue_settings() == {}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"paused": "yes"}, "paused"),
        ({"paused": 1}, "paused"),
        ({"limit": {}}, "limit.rate"),
        ({"limit": {"burst": 5}}, "limit.rate"),
        ({"limit": {"concurrency": 1, "burst": 5}}, "limit.burst"),
        ({"limit": {"rate": 0}}, "limit.rate"),
        ({"limit": {"rate": -1}}, "limit.rate"),
        ({"limit": {"rate": 1e-300}}, "limit.rate"),
        ({"limit": {"rate": 100_001}}, "limit.rate"),
        ({"limit": {"rate": "5"}}, "limit.rate"),
        ({"limit": {"rate": 5, "burst": 0}}, "limit.burst"),
        ({"limit": {"rate": 5, "burst": 1.5}}, "limit.burst"),
        ({"limit": {"rate": 5, "burst": 100_001}}, "limit.burst"),
        ({"limit": {"concurrency": 0}}, "limit.concurrency"),
        ({"limit": {"concurrency": 10_001}}, "limit.concurrency"),
        ({"limit": {"concurrency": 2**70}}, "limit.concurrency"),
        ({"limit": {"rate": 1, "per": "minute"}}, "limit.per"),
        ({"paused": True, "color": "red"}, "color"),
        ({"limit": [1, 2]}, "limit"),
    ],
)
async def test_put_queue_refuses_bad_bodies(
    client: httpx.AsyncClient, store: Store, body: dict[str, Any], field: str
) -> None:
    assert error_of(await client.put("/v1/queues/mail", json=body), 422)["field"] == field
    assert await store.queue_settings() == {}


REVERSED = {"min_backoff": 10, "max_backoff": 1}


@pytest.mark.parametrize(
    ("path", "body", "field", "message"),
    [
        ("/v1/limits/example.com", {"burst": 3}, "rate", "give a rate, a concurrency or both"),
        ("/v1/queues/mail/limit", {"concurrency": 1, "burst": 3}, "burst", "needs a rate"),
        (
            "/v1/queues/mail",
            {"limit": {"concurrency": 1, "burst": 3}},
            "limit.burst",
            "needs a rate",
        ),
        ("/v1/queues/mail", {"limit": {}}, "limit.rate", "give a rate, a concurrency or both"),
        (
            "/v1/queues/mail/defaults",
            {"retry": REVERSED},
            "retry.min_backoff",
            "must not exceed max_backoff",
        ),
        (
            "/v1/queues/mail",
            {"defaults": {"retry": REVERSED}},
            "defaults.retry.min_backoff",
            "must not exceed max_backoff",
        ),
    ],
)
async def test_a_refusal_across_fields_names_its_path_in_the_request(
    client: httpx.AsyncClient,
    store: Store,
    path: str,
    body: dict[str, Any],
    field: str,
    message: str,
) -> None:
    response = await client.put(path, json=body)
    assert response.status_code == 422
    assert response.json() == {"error": {"code": "invalid", "message": message, "field": field}}
    assert await store.queue_settings() == {}
    assert await store.limits() == {}


async def test_put_queue_refuses_a_body_that_is_not_json(client: httpx.AsyncClient) -> None:
    response = await client.put(
        "/v1/queues/mail", content=b"{paused", headers={"Content-Type": "application/json"}
    )
    assert error_of(response, 400)["code"] == "invalid_json"


@pytest.mark.parametrize("queue", ["a%20b", "x" * 65, "%C3%A9", "a*", "a%00", "%2A"])
async def test_queue_routes_refuse_bad_names(
    client: httpx.AsyncClient, store: Store, queue: str
) -> None:
    for response in (
        await client.get(f"/v1/queues/{queue}"),
        await client.put(f"/v1/queues/{queue}", json={"paused": True}),
        await client.post(f"/v1/queues/{queue}/pause"),
        await client.post(f"/v1/queues/{queue}/resume"),
        await client.put(f"/v1/queues/{queue}/limit", json={"rate": 1}),
        await client.delete(f"/v1/queues/{queue}/limit"),
    ):
        assert error_of(response, 422)["field"] == "queue"
    assert await store.queue_settings() == {}


async def test_a_queue_name_with_a_slash_names_no_route(client: httpx.AsyncClient) -> None:
    assert error_of(await client.get("/v1/queues/a%2Fb"), 404)
    assert error_of(await client.put("/v1/queues/a%2Fb", json={"paused": True}), 404)
    assert error_of(await client.put("/v1/queues/a%2Fb/limit", json={"rate": 1}), 404)


# --- host limits -----------------------------------------------------------------------------


async def test_limits_put_list_and_delete(client: httpx.AsyncClient, store: Store) -> None:
    assert (await client.get("/v1/limits")).json() == {"limits": [], "cursor": None}
    response = await client.put("/v1/limits/api.example.com", json={"rate": 50, "burst": 5})
    assert response.status_code == 200
    assert response.json() == {"host": "api.example.com", "rate": 50.0, "burst": 5,
                               "concurrency": None}  # fmt: skip
    await client.put("/v1/limits/[::1]:8080", json={"concurrency": 4})
    await client.put("/v1/limits/api.example.com", json={"concurrency": 10})
    assert (await client.get("/v1/limits")).json() == {
        "limits": [
            {"host": "[::1]:8080", "rate": None, "burst": None, "concurrency": 4},
            {"host": "api.example.com", "rate": None, "burst": None, "concurrency": 10},
        ],
        "cursor": None,
    }
    assert await store.limits() == {
        "api.example.com": Limit(concurrency=10),
        "[::1]:8080": Limit(concurrency=4),
    }
    assert (await client.delete("/v1/limits/[::1]:8080")).status_code == 204
    error = error_of(await client.delete("/v1/limits/[::1]:8080"), 404)
    assert error["field"] == "host"
    assert list(await store.limits()) == ["api.example.com"]


@pytest.mark.parametrize(
    "host",
    [
        "user@example.com",
        "user:pw@example.com",
        "example.com/path",
        "example.com%2Fpath",
        "a%20b.example.com",
        "Example.com",
        "example.com.",
        "example.com:0",
        "example.com:65536",
        "example.com:080",
        "example.com:http",
        "b%C3%BCcher.de",
        "[::0001]:80",
        "[::1",
        "::1",
        "x" * 261,
        "http:%2F%2Fexample.com",
    ],
)
async def test_limits_refuse_bad_hosts(client: httpx.AsyncClient, store: Store, host: str) -> None:
    response = await client.put(f"/v1/limits/{host}", json={"rate": 1})
    assert error_of(response, 422)["field"] == "host"
    assert error_of(await client.delete(f"/v1/limits/{host}"), 422)["field"] == "host"
    assert await store.limits() == {}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "rate"),
        ({"burst": 3}, "rate"),
        ({"concurrency": 1, "burst": 3}, "burst"),
        ({"rate": 0}, "rate"),
        ({"rate": 1e300}, "rate"),
        ({"rate": True}, "rate"),
        ({"rate": None, "concurrency": None}, "rate"),
        ({"concurrency": 0}, "concurrency"),
        ({"concurrency": 1.0}, "concurrency"),
        ({"concurrency": 10_001}, "concurrency"),
        ({"rate": 1, "burst": 100_001}, "burst"),
        ({"rate": 1, "host": "x"}, "host"),
    ],
)
async def test_limits_refuse_bad_bodies(
    client: httpx.AsyncClient, store: Store, body: dict[str, Any], field: str
) -> None:
    response = await client.put("/v1/limits/example.com", json=body)
    assert error_of(response, 422)["field"] == field
    assert await store.limits() == {}


async def test_a_huge_body_is_refused_before_it_is_read(make_client: ClientFactory) -> None:
    async with make_client(max_body_bytes=64 * 1024) as client:
        huge = b'{"rate": 1, "x": "' + b"a" * 200_000 + b'"}'
        headers = {"Content-Type": "application/json"}
        for path in ("/v1/limits/example.com", "/v1/queues/mail", "/v1/queues/mail/limit"):
            assert error_of(await client.put(path, content=huge, headers=headers), 413)


# --- dead letters: replay a queue's ----------------------------------------------------------


async def test_replay_every_dead_timer_of_a_queue(client: httpx.AsyncClient, store: Store) -> None:
    await dead_letters(store, "mail", *(f"m{n:04}" for n in range(1500)))
    await dead_letters(store, "sms", "s1")
    response = await client.post("/v1/dead/replay", params={"queue": "mail"})
    assert response.status_code == 200
    assert response.json() == {"replayed": 1500}
    assert [t.id for t in (await store.list(State.DEAD)).timers] == ["s1"]
    assert (await store.get("m0000")).state is State.SCHEDULED  # type: ignore[union-attr]
    again = await client.post("/v1/dead/replay", params={"queue": "mail"})
    assert again.json() == {"replayed": 0}


@pytest.mark.parametrize("params", [{}, {"queue": "a b"}, {"queue": ""}, {"queue": "x" * 65}])
async def test_replay_of_a_queue_needs_a_valid_queue(
    client: httpx.AsyncClient, store: Store, params: dict[str, str]
) -> None:
    await dead_letters(store, "default", "d1")
    error = error_of(await client.post("/v1/dead/replay", params=params), 422)
    assert error["field"] == "queue"
    assert [t.id for t in (await store.list(State.DEAD)).timers] == ["d1"]


# --- the token -------------------------------------------------------------------------------


async def test_every_flow_route_needs_the_token(make_client: ClientFactory, store: Store) -> None:
    before = await store.add(Timer(id="t1", due_ms=store.now_ms() + 60_000, payload=1))
    calls = [
        ("POST", "/v1/timers/t1/pause", None),
        ("POST", "/v1/timers/t1/resume", None),
        ("GET", "/v1/queues", None),
        ("GET", "/v1/queues/default", None),
        ("PUT", "/v1/queues/default", {"paused": True}),
        ("POST", "/v1/queues/default/pause", None),
        ("POST", "/v1/queues/default/resume", None),
        ("PUT", "/v1/queues/default/limit", {"rate": 1}),
        ("DELETE", "/v1/queues/default/limit", None),
        ("PATCH", "/v1/timers/t1", {"delay": 120}),
        ("GET", "/v1/limits", None),
        ("PUT", "/v1/limits/example.com", {"rate": 1}),
        ("DELETE", "/v1/limits/example.com", None),
        ("POST", "/v1/dead/replay?queue=default", None),
    ]
    async with make_client(token=TOKEN) as client:
        for method, path, body in calls:
            response = await client.request(method, path, json=body)
            assert error_of(response, 401), path
        assert await store.get("t1") == before
        assert await store.queue_settings() == {}
        assert await store.limits() == {}
        good = {"Authorization": f"Bearer {TOKEN}"}
        for method, path, body in calls:
            response = await client.request(method, path, json=body, headers=good)
            assert response.status_code in (200, 204), (path, response.text)


# --- the same over Redis and Redis Cluster ---------------------------------------------------


@pytest.fixture(params=["redis_server", "redis_cluster"])
async def redis_store(request: pytest.FixtureRequest) -> AsyncIterator[RedisStore]:
    url = request.getfixturevalue(request.param).url
    opened = RedisStore.from_url(url, prefix=f"t{uuid.uuid4().hex[:12]}")
    try:
        yield opened
    finally:
        await opened.close()


async def test_flow_routes_over_redis(redis_store: RedisStore) -> None:
    """Pause and resume, the filters, queues, limits and replay-all end to end on Redis."""
    store = redis_store
    async with serve(store) as client:
        for n in range(30):
            await client.post("/v1/timers", json=timer(id=f"m{n:02}", queue="mail"))
        await dead_letters(store, "mail", "d1", "d2")
        await dead_letters(store, "sms", "d3")
        assert (await client.post("/v1/timers/m07/pause")).json()["state"] == "paused"
        ids: list[str] = []
        params = {"queue": "mail", "state": "scheduled", "limit": "7"}
        while True:
            page = (await client.get("/v1/timers", params=params)).json()
            ids += [t["id"] for t in page["timers"]]
            if page["cursor"] is None:
                break
            params["cursor"] = page["cursor"]
        assert sorted(ids) == [f"m{n:02}" for n in range(30) if n != 7]
        await client.post("/v1/queues/mail/pause")
        await client.put("/v1/limits/api.example.com:8443", json={"rate": 10, "concurrency": 2})
        queues = {q["name"]: q for q in (await client.get("/v1/queues")).json()["queues"]}
        assert queues["mail"]["counts"] == ZERO | {"scheduled": 29, "paused": 1, "dead": 2}
        assert queues["mail"]["paused"] is True
        assert queues["sms"]["counts"] == ZERO | {"dead": 1}
        replayed = await client.post("/v1/dead/replay", params={"queue": "mail"})
        assert replayed.json() == {"replayed": 2}
        assert (await client.get("/v1/limits")).json()["limits"] == [
            {"host": "api.example.com:8443", "rate": 10.0, "burst": None, "concurrency": 2}
        ]
        moved = await client.patch("/v1/timers/m07", json={"delay": 3600})
        assert moved.json()["state"] == "paused"
        limited = await client.put("/v1/queues/mail/limit", json={"rate": 5})
        assert (limited.json()["paused"], limited.json()["limit"]["rate"]) == (True, 5.0)
        assert (await client.post("/v1/queues/mail/resume")).json()["limit"]["rate"] == 5.0
        assert (await client.delete("/v1/queues/mail/limit")).status_code == 204
        assert (await client.post("/v1/timers/m07/resume")).json()["state"] == "scheduled"
        assert (await store.get("m07")).due_ms == moved.json()["due_ms"]  # type: ignore[union-attr]
        mail = (await client.get("/v1/queues/mail")).json()
        assert mail["counts"] == ZERO | {"scheduled": 32}
