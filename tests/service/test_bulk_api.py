"""The bulk routes over memory and SQLite stores: purging a queue's timers of one state, cancelling
many timers at once, and a queue's defaults as `/v1/queues` shows them."""

from __future__ import annotations

import httpx

from tickwheel.model import State, Timer
from tickwheel.schedule import Schedule
from tickwheel.stores.base import Store

from .test_api import timer


async def add(store: Store, queue: str, *ids: str, delay_ms: int = 3_600_000) -> None:
    for timer_id in ids:
        await store.add(
            Timer(id=timer_id, due_ms=store.now_ms() + delay_ms, queue=queue, payload=1)
        )


async def test_purge_answers_the_count_and_leaves_other_states_and_queues(
    client: httpx.AsyncClient, store: Store
) -> None:
    await add(store, "q", "a", "b", "c")
    await add(store, "q", "p")
    await store.pause("p")
    await add(store, "other", "o")
    await add(store, "q", "held", delay_ms=0)
    (lease,) = await store.claim("q", store.now_ms(), 10, 60_000)
    assert lease.timer.id == "held"
    purged = await client.delete("/v1/queues/q/timers", params={"state": "scheduled"})
    assert purged.status_code == 200
    assert purged.json() == {"queue": "q", "state": "scheduled", "purged": 3}
    queue = (await client.get("/v1/queues/q")).json()
    assert queue["counts"] == {"scheduled": 0, "leased": 1, "paused": 1, "done": 0, "dead": 0}
    again = await client.delete("/v1/queues/q/timers", params={"state": "scheduled"})
    assert again.json()["purged"] == 0
    paused = await client.delete("/v1/queues/q/timers", params={"state": "paused"})
    assert paused.json()["purged"] == 1
    assert (await store.get("o")) is not None
    assert (await store.get("held")).state is State.LEASED  # type: ignore[union-attr]
    await store.ack(lease)  # its worker's ack lands as if nothing happened


async def test_purge_of_dead_letters(client: httpx.AsyncClient, store: Store) -> None:
    await add(store, "q", "d1", "d2", delay_ms=0)
    for lease in await store.claim("q", store.now_ms(), 10, 60_000):
        await store.kill(lease, "HTTP 410")
    answer = await client.delete("/v1/queues/q/timers", params={"state": "dead"})
    assert answer.json() == {"queue": "q", "state": "dead", "purged": 2}
    assert (await client.get("/v1/dead")).json()["timers"] == []


async def test_bulk_cancel_answers_per_id(client: httpx.AsyncClient, store: Store) -> None:
    await add(store, "q", "a", "b")
    await add(store, "q", "p")
    await store.pause("p")
    await add(store, "q", "held", delay_ms=0)
    await store.claim("q", store.now_ms(), 10, 60_000)
    state = await store.add_schedule(
        Schedule(id="s1", every_s=60, start_ms=store.now_ms() + 60_000, payload=1)
    )
    occurrence = f"s1@{state.next_ms}"
    ids = ["a", "p", "held", "nope", occurrence, "b", "bad id!"]
    answer = await client.post("/v1/timers/cancel", json={"ids": ids})
    assert answer.status_code == 200
    assert answer.json() == {
        "cancelled": 3,
        "results": [
            {"id": "a", "result": "cancelled"},
            {"id": "p", "result": "cancelled"},
            {"id": "held", "result": "not_scheduled"},
            {"id": "nope", "result": "not_found"},
            {"id": occurrence, "result": "schedule_occurrence"},
            {"id": "b", "result": "cancelled"},
            {"id": "bad id!", "result": "not_found"},
        ],
    }
    for gone in ("a", "b", "p"):
        assert await store.get(gone) is None
    assert await store.get(occurrence) is not None


async def test_queue_defaults_set_shown_and_removed(
    client: httpx.AsyncClient, store: Store
) -> None:
    body = {
        "retry": {"max_attempts": 2, "min_backoff": 0.1, "max_backoff": 1, "timeout": 2.5},
        "headers": {"Authorization": "Bearer abc", "X-Team": "ops"},
    }
    await client.post("/v1/queues/q/pause")
    answer = await client.put("/v1/queues/q/defaults", json=body)
    assert answer.status_code == 200, answer.text
    shown = answer.json()
    assert shown["paused"] is True  # the pause stays
    assert shown["defaults"] == {
        "retry": {
            "max_attempts": 2,
            "min_backoff": 0.1,
            "max_backoff": 1.0,
            "timeout": 2.5,
            "max_retry": None,
        },
        "headers": {"Authorization": "***", "X-Team": "***"},  # values hold credentials
    }
    listed = (await client.get("/v1/queues")).json()["queues"]
    assert [q["defaults"] for q in listed if q["name"] == "q"] == [shown["defaults"]]
    settings = (await store.queue_settings())["q"]
    assert settings.defaults is not None
    assert settings.defaults.retry is not None
    assert settings.defaults.retry.max_attempts == 2
    assert dict(settings.defaults.headers)["Authorization"] == "Bearer abc"
    # PUT /v1/queues/{queue} replaces every part, the defaults among them
    replaced = await client.put(
        "/v1/queues/q", json={"paused": True, "defaults": {"headers": {"X-A": "1"}}}
    )
    assert replaced.json()["defaults"] == {"retry": None, "headers": {"X-A": "***"}}
    assert (await client.delete("/v1/queues/q/defaults")).status_code == 204
    assert (await client.get("/v1/queues/q")).json()["defaults"] is None
    assert (await client.delete("/v1/queues/q/defaults")).status_code == 404
    assert (await client.put("/v1/queues/q/defaults", json={})).json()["defaults"] is None


async def test_a_timer_with_its_own_policy_keeps_it(client: httpx.AsyncClient) -> None:
    """The API shows a timer's own fields: defaults apply when it fires, never to what is
    stored."""
    await client.put("/v1/queues/q/defaults", json={"retry": {"max_attempts": 2}})
    created = await client.post("/v1/timers", json=timer(id="t1", queue="q"))
    assert created.json()["retry"]["max_attempts"] == 10
