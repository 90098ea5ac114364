"""The bulk commands and client methods against a real ``tickwheel serve`` on a SQLite file:
``tickwheel purge`` (asking unless --yes), ``tickwheel cancel`` with several ids, and the
client's purge, cancel_many and queue defaults."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tickwheel.client import AsyncClient, Client
from tickwheel.errors import NotFound, RequestInvalid

from .cli_support import Run, Service, ok_json, sqlite_service

pytestmark = pytest.mark.timeout(120)

service = sqlite_service("bulk-cli")


def add(tw: Run, queue: str, *ids: str) -> None:
    for timer_id in ids:
        url = "http://127.0.0.1:9/x"
        result = tw("add", "--id", timer_id, "--queue", queue, "--in", "1h", "--url", url)
        assert result.exit_code == 0, result.output


def counts(service: Service, queue: str) -> dict[str, Any]:
    with Client(service.url) as client:
        found: dict[str, Any] = client.queue(queue).counts
    return found


def test_purge_asks_first_and_deletes_on_yes(tw: Run, service: Service) -> None:
    add(tw, "purge-a", "pa1", "pa2", "pa3")
    refused = tw("purge", "--queue", "purge-a", "--state", "scheduled", input=b"n\n")
    assert refused.exit_code == 1
    assert "Delete every scheduled timer of queue purge-a?" in refused.output
    assert counts(service, "purge-a")["scheduled"] == 3
    unasked = tw("purge", "--queue", "purge-a", "--state", "scheduled")  # nothing to read
    assert unasked.exit_code == 1
    assert counts(service, "purge-a")["scheduled"] == 3
    agreed = tw("purge", "--queue", "purge-a", "--state", "scheduled", input=b"y\n")
    assert agreed.exit_code == 0, agreed.output
    assert "purged 3 scheduled timers of queue purge-a" in agreed.output
    assert counts(service, "purge-a")["scheduled"] == 0


def test_purge_with_yes_prints_json(tw: Run) -> None:
    add(tw, "purge-b", "pb1", "pb2")
    answer = ok_json(tw("purge", "--queue", "purge-b", "--state", "scheduled", "--yes", "--json"))
    assert answer == {"queue": "purge-b", "state": "scheduled", "purged": 2}


@pytest.mark.parametrize("state", ["leased", "done", "everything"])
def test_purge_of_a_state_not_purgeable_is_a_usage_error(tw: Run, state: str) -> None:
    result = tw("purge", "--queue", "q", "--state", state, "--yes")
    assert result.exit_code == 2
    assert "--state must be one of scheduled, paused, dead" in result.output


def test_cancel_with_several_ids_names_those_not_cancelled(tw: Run) -> None:
    add(tw, "cancel-a", "ca1", "ca2")
    result = tw("cancel", "ca1", "nope", "ca2")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == ["cancelled 2 of 3", "nope: not_found"]
    add(tw, "cancel-a", "ca3")
    again = tw("cancel", "ca3", "ca1", "--json")  # ca1 is gone: status 1, the JSON all the same
    assert again.exit_code == 1
    assert json.loads(again.stdout)["results"] == [
        {"id": "ca3", "result": "cancelled"},
        {"id": "ca1", "result": "not_found"},
    ]


def test_the_clients_bulk_methods(service: Service) -> None:
    with Client(service.url) as client:
        for n in range(3):
            client.add(url=f"{service.url}/healthz", delay=3600, id=f"cm{n}", queue="client-q")
        assert client.cancel_many(["cm0", "cm1", "zz"]) == {
            "cm0": "cancelled",
            "cm1": "cancelled",
            "zz": "not_found",
        }
        assert client.purge("client-q", "scheduled") == 1
        with pytest.raises(RequestInvalid):
            client.purge("client-q", "leased")
        queue = client.set_queue_defaults(
            "client-q", retry={"max_attempts": 2, "timeout": 3}, headers={"X-Team": "ops"}
        )
        assert queue.defaults is not None
        assert queue.defaults["retry"]["max_attempts"] == 2
        assert queue.defaults["headers"] == {"X-Team": "***"}
        assert [q.defaults for q in client.queues() if q.name == "client-q"] == [queue.defaults]
        client.remove_queue_defaults("client-q")
        assert client.queue("client-q").defaults is None
        with pytest.raises(NotFound):
            client.remove_queue_defaults("client-q")


async def test_the_async_client_has_the_same_bulk_verbs(service: Service) -> None:
    async with AsyncClient(service.url) as client:
        await client.add(url=f"{service.url}/healthz", delay=3600, id="am0", queue="async-q")
        assert await client.cancel_many(["am0"]) == {"am0": "cancelled"}
        assert await client.purge("async-q", "dead") == 0
        queue = await client.set_queue_defaults("async-q", headers={"X-A": "1"})
        assert queue.defaults == {"retry": None, "headers": {"X-A": "***"}}
        await client.remove_queue_defaults("async-q")


def test_defaults_set_and_rm(tw: Run, service: Service) -> None:
    result = tw(
        "defaults", "set", "cli-q", "--attempts", "3", "--timeout", "500ms", "-H", "X-Team: ops"
    )
    assert result.exit_code == 0, result.output
    assert (
        result.stdout.strip() == "defaults of queue cli-q: 3 attempts, 0.5 s each; headers X-Team"
    )
    with Client(service.url) as client:
        shown = client.queue("cli-q").defaults
    assert shown is not None
    assert shown["retry"]["max_attempts"] == 3
    assert shown["retry"]["max_backoff"] == 3600  # not given: the built-in value
    assert shown["headers"] == {"X-Team": "***"}
    body = ok_json(tw("defaults", "set", "cli-q", "-H", "Authorization: Bearer x", "--json"))
    assert body["defaults"] == {"retry": None, "headers": {"Authorization": "***"}}
    removed = tw("defaults", "rm", "cli-q")
    assert removed.exit_code == 0, removed.output
    assert removed.stdout.strip() == "removed the defaults of queue cli-q"
    again = tw("defaults", "rm", "cli-q")
    assert again.exit_code == 1
    assert "queue 'cli-q' has no defaults" in again.output


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        (["cli-q"], 2, "give a retry option, a --header or both"),
        (["cli-q", "--timeout", "soon"], 2, "soon"),
        (["cli-q", "--attempts", "0"], 2, "--attempts"),
        (["cli-q", "-H", "no-colon"], 2, "is not a header"),
        (["cli-q", "-H", "Tickwheel-Attempt: 1"], 2, "is set by tickwheel"),
        (["cli-q", "--timeout", "2h"], 2, "timeout"),
    ],
)
def test_defaults_refused(tw: Run, args: list[str], status: int, message: str) -> None:
    result = tw("defaults", "set", *args)
    assert result.exit_code == status, result.output
    assert message in result.output
