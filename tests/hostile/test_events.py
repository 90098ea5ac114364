"""``GET /v1/events`` against a real ``tickwheel serve``: what a subscriber sees (its tenant's
queues only), resuming with ``Last-Event-ID`` (a bad or expired one starts with `reset`),
a cap on subscribers, and a reader that stops reading dropped while firing goes on."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from service.e2e_helpers import Processes, TickwheelProcess, processes

from tickwheel.service.routes.event_routes import MAX_SUBSCRIBERS, SEND_TIMEOUT_S
from tickwheel.testing.receiver import Receiver

pytestmark = pytest.mark.timeout(180)

BILLING = "billing-token-0123456789"
SHIPPING = "shipping-token-0123456789"
ADMIN = "admin-token-0123456789abc"
TOKENS = f"""
[[token]]
name = "billing"
token = "{BILLING}"
queues = ["billing-*"]
role = "write"

[[token]]
name = "shipping"
token = "{SHIPPING}"
queues = ["shipping"]
role = "write"

[[token]]
name = "ops"
token = "{ADMIN}"
queues = ["*"]
role = "admin"
"""


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
async def procs(tmp_path: Path) -> AsyncIterator[Processes]:
    async with processes(tmp_path) as started:
        yield started


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    async with Receiver(keep=False) as started:
        yield started


@pytest.fixture
async def server(tmp_path: Path, procs: Processes) -> TickwheelProcess:
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(TOKENS)
    return await procs.start(
        "serve",
        "--port",
        "0",
        "--store",
        f"sqlite:///{tmp_path}/t.db",
        "--allow-private-targets",
        "--tokens",
        str(tokens),
    )


class Events:
    """The events of one open stream, read as they come."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.events: list[dict[str, Any]] = []
        self.ids: list[str] = []
        self._lines = response.aiter_lines()

    async def take(self, count: int, timeout_s: float = 20) -> list[dict[str, Any]]:
        """Read until `count` events (comments and `retry:` aside) have come."""
        async with asyncio.timeout(timeout_s):
            event: dict[str, str] = {}
            while len(self.events) < count:
                line = await anext(self._lines)
                if line.startswith(("id: ", "event: ", "data: ")):
                    field, _, value = line.partition(": ")
                    event[field] = value
                elif line == "" and "data" in event:
                    self.events.append({**json.loads(event["data"]), "event": event["event"]})
                    if "id" in event:
                        self.ids.append(event["id"])
                    event = {}
        return self.events


@contextlib.asynccontextmanager
async def subscribe(
    url: str, token: str, params: dict[str, str] | None = None, **headers: str
) -> AsyncIterator[Events]:
    async with (
        httpx.AsyncClient(base_url=url, timeout=30) as client,
        client.stream(
            "GET", "/v1/events", params=params, headers={**auth(token), **headers}
        ) as response,
    ):
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        yield Events(response)


async def create(url: str, token: str, timer_id: str, queue: str, delay: float = 3600) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=30, headers=auth(token)) as client:
        body = {"id": timer_id, "queue": queue, "delay": delay, "payload": 1}
        answer = await client.post("/v1/timers", json=body)
        assert answer.status_code == 201, answer.text


async def test_a_token_sees_its_own_queues_events_and_is_refused_another_s(
    server: TickwheelProcess,
) -> None:
    async with subscribe(server.url, BILLING) as billing:
        await create(server.url, SHIPPING, "s1", "shipping")
        await create(server.url, BILLING, "b1", "billing-eu")
        async with httpx.AsyncClient(base_url=server.url, headers=auth(BILLING)) as client:
            assert (await client.delete("/v1/timers/b1")).status_code == 204
            other = await client.get("/v1/events", params={"queue": "shipping"})
            assert other.status_code == 403
            assert other.json()["error"]["code"] == "forbidden"
        events = await billing.take(2)
    assert [(e["event"], e["id"], e["queue"]) for e in events] == [
        ("created", "b1", "billing-eu"),
        ("cancelled", "b1", "billing-eu"),
    ]
    assert await server.stop(signal.SIGTERM) == 0, server.stderr()


async def test_firing_shows_fired_and_acked_and_a_stream_resumes_where_it_left(
    server: TickwheelProcess, receiver: Receiver
) -> None:
    async with subscribe(server.url, SHIPPING, {"queue": "shipping"}) as first:
        async with httpx.AsyncClient(base_url=server.url, headers=auth(SHIPPING)) as client:
            body = {"id": "hook", "queue": "shipping", "delay": 0.1}
            body["callback"] = {"url": receiver.url}
            assert (await client.post("/v1/timers", json=body)).status_code == 201
        events = await first.take(3)
        assert [e["event"] for e in events] == ["created", "fired", "acked"]
        assert events[1]["attempt"] == 1
        last = first.ids[0]  # as if the connection dropped after the first event
    await create(server.url, SHIPPING, "later", "shipping")
    async with subscribe(
        server.url, SHIPPING, {"queue": "shipping"}, **{"Last-Event-ID": last}
    ) as again:
        resumed = await again.take(3)
    assert [(e["event"], e["id"]) for e in resumed] == [
        ("fired", "hook"),
        ("acked", "hook"),
        ("created", "later"),
    ]
    assert await server.stop(signal.SIGTERM) == 0, server.stderr()


@pytest.mark.parametrize(
    ("last_event_id", "reason"),
    [
        ("garbage", "invalid"),
        ("00000000-1", "restarted"),  # another process's place
        ("x" * 60, "invalid"),
        ("-1", "invalid"),
    ],
)
async def test_a_bad_last_event_id_starts_with_a_reset_not_an_error(
    server: TickwheelProcess, last_event_id: str, reason: str
) -> None:
    async with subscribe(
        server.url, SHIPPING, {"queue": "shipping"}, **{"Last-Event-ID": last_event_id}
    ) as stream:
        await create(server.url, SHIPPING, "t1", "shipping")
        events = await stream.take(2)
    assert events[0] == {"type": "reset", "reason": reason, "event": "reset"}
    assert events[1]["id"] == "t1"
    huge = {**auth(SHIPPING), "Last-Event-ID": "9" * 100}
    async with httpx.AsyncClient(base_url=server.url) as client:
        refused = await client.get("/v1/events", headers=huge)
    assert refused.status_code == 422  # longer than any id the stream writes


async def test_subscribers_past_the_cap_are_503_and_closing_frees_a_place(
    server: TickwheelProcess,
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(MAX_SUBSCRIBERS):
            await stack.enter_async_context(subscribe(server.url, SHIPPING))
        async with httpx.AsyncClient(base_url=server.url, headers=auth(SHIPPING)) as client:
            refused = await client.get("/v1/events")
        assert refused.status_code == 503
        assert refused.json()["error"]["code"] == "too_many_streams"
        assert refused.headers["retry-after"] == "5"
    async with asyncio.timeout(10):
        while True:  # the server sees the disconnects a moment later
            async with (
                httpx.AsyncClient(base_url=server.url, headers=auth(SHIPPING)) as client,
                client.stream("GET", "/v1/events") as response,
            ):
                if response.status_code == 200:
                    break
            await asyncio.sleep(0.1)


async def test_a_reader_that_stops_reading_is_dropped_and_firing_goes_on(
    server: TickwheelProcess, receiver: Receiver
) -> None:
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    stalled = socket.socket()
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting: the window
    stalled.connect((host, int(port)))
    stalled.sendall(
        f"GET /v1/events HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Authorization: Bearer {SHIPPING}\r\n\r\n".encode()
    )
    # more than the ring holds (20,000) and than loopback's buffers take (they grow to
    # megabytes), however the reader is dropped; then timers due at once, fired on time
    created = 40_000
    hooks = 100
    async with subscribe(server.url, SHIPPING) as reader:
        async with httpx.AsyncClient(base_url=server.url, headers=auth(SHIPPING)) as client:
            for start in range(0, created, 1000):
                timers = [
                    {"id": f"t{n}", "queue": "shipping", "delay": 3600, "payload": 1}
                    for n in range(start, start + 1000)
                ]
                answer = await client.post("/v1/timers/batch", json={"timers": timers})
                assert answer.status_code == 200, answer.text
            hooked = [
                {
                    "id": f"h{n}",
                    "queue": "shipping",
                    "delay": 0.2,
                    "callback": {"url": receiver.url},
                }
                for n in range(hooks)
            ]
            answer = await client.post("/v1/timers/batch", json={"timers": hooked})
            assert answer.status_code == 200, answer.text
        await receiver.wait_for(hooks, 10)
        events = await reader.take(created + 3 * hooks, timeout_s=90)
    assert [e["event"] for e in events[-3 * hooks :]].count("acked") == hooks
    # the stalled reader was dropped once a write waited `SEND_TIMEOUT_S`: reading now
    # drains what is buffered, then the connection ends (read sooner, it would be in time)
    await asyncio.sleep(SEND_TIMEOUT_S + 3)
    stalled.settimeout(30)  # a stream still open would send a heartbeat within 15 s
    with stalled:
        while data := stalled.recv(65536):
            assert b"keep-alive" not in data
    async with httpx.AsyncClient(base_url=server.url, headers=auth(ADMIN)) as client:
        metrics = (await client.get("/metrics")).text
    assert "tickwheel_event_streams_dropped_total 1.0" in metrics
    assert "tickwheel_event_streams 0.0" in metrics
    assert await server.stop(signal.SIGTERM) == 0, server.stderr()
