"""Hostile ``traceparent`` and ``tracestate`` headers on the create routes: anything but a
valid version-00 context is ignored (the W3C rule: start afresh), never an error, and what
a timer keeps is bounded; the Python API refuses the same values by name."""

from __future__ import annotations

import httpx
import pytest

from tickwheel.errors import InvalidTimer
from tickwheel.model import Timer
from tickwheel.stores.memory import MemoryStore
from tickwheel.tracecontext import (
    MAX_TRACESTATE_CHARS,
    MAX_TRACESTATE_MEMBERS,
    attempt_traceparent,
    parse_traceparent,
    parse_tracestate,
)

PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
BAD_PARENTS = [
    "",
    "garbage",
    PARENT.upper(),  # hex is lower case
    "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # a version we do not read
    "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # forbidden version
    "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # all-zero trace id
    "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  # all-zero span id
    PARENT + "-extra",
    " " + PARENT,
    PARENT[:-1],
    "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
    "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
    "x" * 20_000,
]


def _body(timer_id: str) -> dict[str, object]:
    return {"id": timer_id, "delay": 60, "payload": 1}


@pytest.mark.parametrize("value", BAD_PARENTS)
async def test_an_invalid_traceparent_is_ignored_not_refused(
    client: httpx.AsyncClient, store: MemoryStore, value: str
) -> None:
    answer = await client.post(
        "/v1/timers", json=_body("t1"), headers={"traceparent": value, "tracestate": "a=1"}
    )
    assert answer.status_code == 201, answer.text
    stored = await store.get("t1")
    assert stored is not None
    assert (stored.trace_parent, stored.trace_state) == (None, None)
    with pytest.raises(InvalidTimer, match="trace_parent"):
        Timer(due_ms=1, payload=1, trace_parent=value)


async def test_a_repeated_traceparent_is_ignored(
    client: httpx.AsyncClient, store: MemoryStore
) -> None:
    headers = [("traceparent", PARENT), ("traceparent", PARENT)]
    answer = await client.post("/v1/timers", json=_body("t1"), headers=headers)
    assert answer.status_code == 201
    stored = await store.get("t1")
    assert stored is not None
    assert stored.trace_parent is None


@pytest.mark.parametrize(
    "state",
    [
        ",".join(f"k{n}=v" for n in range(MAX_TRACESTATE_MEMBERS + 1)),  # too many members
        "a=" + "v" * MAX_TRACESTATE_CHARS,  # too long
        "a=1,a=2",  # a key twice
        "A=1",  # keys are lower case
        "a=1=2",
        "a= ",
        "a=\x01",
        "=1",
    ],
)
async def test_a_bad_tracestate_is_dropped_and_the_traceparent_kept(
    client: httpx.AsyncClient, store: MemoryStore, state: str
) -> None:
    headers = {"traceparent": PARENT, "tracestate": state}
    answer = await client.post("/v1/timers", json=_body("t1"), headers=headers)
    assert answer.status_code == 201
    stored = await store.get("t1")
    assert stored is not None
    assert (stored.trace_parent, stored.trace_state) == (PARENT, None)


async def test_tracestate_fields_are_one_list_and_the_batch_keeps_them(
    client: httpx.AsyncClient, store: MemoryStore
) -> None:
    headers = [("traceparent", PARENT), ("tracestate", "a=1 , b=2"), ("tracestate", "c@d=3")]
    answer = await client.post(
        "/v1/timers/batch", json={"timers": [_body("b1"), _body("b2")]}, headers=headers
    )
    assert [r["status"] for r in answer.json()["results"]] == [201, 201]
    for timer_id in ("b1", "b2"):
        stored = await store.get(timer_id)
        assert stored is not None
        assert (stored.trace_parent, stored.trace_state) == (PARENT, "a=1,b=2,c@d=3")


def test_the_parsers_and_an_attempt_s_traceparent() -> None:
    assert parse_traceparent(PARENT) == PARENT
    assert parse_traceparent(None) is None
    assert parse_tracestate("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE") is not None
    assert parse_tracestate(",,") is None
    child = attempt_traceparent(PARENT)
    assert child[:36] == PARENT[:36]
    assert child[-3:] == "-01"
    assert child[36:52] != PARENT[36:52]
    assert parse_traceparent(child) == child
    assert attempt_traceparent(PARENT, "1" * 16) == PARENT[:36] + "1" * 16 + "-01"
    with pytest.raises(InvalidTimer, match="trace_state"):
        Timer(due_ms=1, payload=1, trace_state="a=1")  # no tracestate without a parent
    with pytest.raises(InvalidTimer, match="trace_state"):
        Timer(due_ms=1, payload=1, trace_parent=PARENT, trace_state="a=1 ,b=2")
