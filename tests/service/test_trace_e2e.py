"""Tracing through a real receiver: a `tickwheel serve` process keeps a create request's
``traceparent`` and sends it on each callback attempt, the same trace with the attempt's own
span id, and the ``tracestate`` as it came (no OpenTelemetry provider in the process)."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tickwheel.testing.receiver import Received, Receiver, Reply

from .e2e_helpers import Processes, processes

pytestmark = pytest.mark.timeout(120)

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CREATOR_SPAN = "00f067aa0ba902b7"
PARENT = f"00-{TRACE_ID}-{CREATOR_SPAN}-01"
STATE = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"


@pytest.fixture
async def procs(tmp_path: Path) -> AsyncIterator[Processes]:
    async with processes(tmp_path) as started:
        yield started


def _fail_first(received: Received) -> Reply:
    """503 to a timer's first attempt, so its retry shows a second span of one trace."""
    return Reply(503) if received.attempt == 1 and received.path == "/retried" else Reply()


def _ids(received: Received) -> tuple[str, str, str]:
    version, trace_id, span_id, flags = received.headers["traceparent"].split("-")
    assert (version, flags) == ("00", "01")
    return trace_id, span_id, received.headers.get("tracestate", "")


async def test_the_callback_continues_the_creating_request_s_trace(
    tmp_path: Path, procs: Processes
) -> None:
    async with Receiver(respond=_fail_first) as receiver:
        server = await procs.start(
            "serve",
            "--port",
            "0",
            "--store",
            f"sqlite:///{tmp_path}/t.db",
            "--allow-private-targets",
        )
        traced = {"traceparent": PARENT, "tracestate": STATE}
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            for path, route in (("/one", "post"), ("/retried", "post"), ("/put", "put")):
                body = {
                    "id": path[1:],
                    "delay": 0.2,
                    "callback": {"url": f"{receiver.url}{path}"},
                    "retry": {"min_backoff": 0, "max_backoff": 0},
                }
                if route == "post":
                    answer = await client.post("/v1/timers", json=body, headers=traced)
                else:
                    answer = await client.put(f"/v1/timers{path}", json=body, headers=traced)
                assert answer.status_code == 201, answer.text
            batch = {"timers": [{"id": "batched", "delay": 0.2, "callback": {"url": receiver.url}}]}
            answer = await client.post(
                "/v1/timers/batch", json=batch, headers={"traceparent": PARENT}
            )
            assert answer.json()["results"][0]["status"] == 201
            bad = "00-" + "0" * 32 + f"-{CREATOR_SPAN}-01"  # an all-zero trace id: ignored
            untraced = {"id": "plain", "delay": 0.2, "callback": {"url": f"{receiver.url}/plain"}}
            answer = await client.post(
                "/v1/timers", json=untraced, headers={"traceparent": bad, "tracestate": STATE}
            )
            assert answer.status_code == 201, answer.text
        await receiver.wait_for(6, 30)
        assert await server.stop(signal.SIGTERM) == 0, server.stderr()
    by_path: dict[str, list[Received]] = {}
    for received in receiver.received:
        by_path.setdefault(received.path, []).append(received)
    for path in ("/one", "/put"):
        (only,) = by_path[path]
        assert _ids(only)[0] == TRACE_ID
        assert _ids(only)[1] != CREATOR_SPAN
        assert _ids(only)[2] == STATE
    first, second = by_path["/retried"]
    assert _ids(first)[0] == _ids(second)[0] == TRACE_ID
    assert len({_ids(first)[1], _ids(second)[1], CREATOR_SPAN}) == 3  # a span per attempt
    (batched,) = by_path["/"]
    assert _ids(batched)[:1] == (TRACE_ID,)
    assert "tracestate" not in batched.headers
    (plain,) = by_path["/plain"]
    assert "traceparent" not in plain.headers
    assert "tracestate" not in plain.headers
