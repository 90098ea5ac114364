"""``GET /v1/timers/{id}/attempts`` and the attempt-history flags, tried as a neighbour or a
hostile receiver would: unknown and impossible ids, another tenant's timer, limits huge,
negative, repeated or not numbers, undeclared parameters; a receiver answering with terminal
escapes and a body far over a KiB; flags out of range."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from engine.support import running, until
from service.conftest import serve

from tickwheel.callbacks import HttpSettings, HttpTarget
from tickwheel.engine import Worker, WorkerSettings
from tickwheel.model import Callback, RetryPolicy, State, Timer, replace_controls
from tickwheel.service.tenants import parse_tenants
from tickwheel.stores import MemoryStore
from tickwheel.stores.attempt_record import Attempt
from tickwheel.testing.receiver import Receiver, Reply

ALICE = "alice-token-0123456789ab"
BOB = "bob-token-0123456789abcde"
TOKENS = f"""
[[token]]
name = "alice"
token = "{ALICE}"
queues = ["alice"]
role = "read"

[[token]]
name = "bob"
token = "{BOB}"
queues = ["bob"]
role = "write"
"""


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def recorded(store: MemoryStore, timer_id: str, queue: str, count: int) -> None:
    """Give timer `timer_id` of `queue` `count` attempts, the store's own way."""
    await store.add(Timer(id=timer_id, due_ms=store.now_ms(), queue=queue, payload=1))
    for n in range(1, count + 1):
        [lease] = await store.claim(queue, store.now_ms(), 1, 10_000)
        attempt = Attempt(attempt=n, at_ms=store.now_ms(), worker="w:1", outcome="retry")
        await store.retry(lease, store.now_ms(), "HTTP 500", attempt)


async def test_another_tenants_timer_and_unknown_ids_are_404() -> None:
    store = MemoryStore()
    await recorded(store, "bobs", "bob", 2)
    async with serve(store, tenants=parse_tenants(TOKENS)) as client:
        mine = await client.get("/v1/timers/bobs/attempts", headers=auth(BOB))
        assert mine.status_code == 200
        assert [a["attempt"] for a in mine.json()["attempts"]] == [2, 1]
        theirs = await client.get("/v1/timers/bobs/attempts", headers=auth(ALICE))
        assert theirs.status_code == 404
        assert theirs.json()["error"]["message"] == "no timer 'bobs'"
        for timer_id in ("nope", "x" * 5000, "%00", "..%2f..%2fetc", "a@b@c"):
            answer = await client.get(f"/v1/timers/{timer_id}/attempts", headers=auth(BOB))
            assert answer.status_code == 404, timer_id
        unauthenticated = await client.get("/v1/timers/bobs/attempts")
        assert unauthenticated.status_code == 401


@pytest.mark.parametrize(
    ("query", "status"),
    [
        ("limit=1", 200),
        ("limit=1000", 200),
        ("limit=1001", 422),
        ("limit=0", 422),
        ("limit=-1", 422),
        (f"limit={10**40}", 422),
        ("limit=1e3", 422),
        ("limit=NaN", 422),
        ("limit=1&limit=2", 400),
        ("cursor=x", 400),
        ("state=dead", 400),
    ],
)
async def test_the_limit_is_bounded_and_nothing_else_is_taken(query: str, status: int) -> None:
    store = MemoryStore()
    await recorded(store, "t", "default", 3)
    async with serve(store) as client:
        answer = await client.get(f"/v1/timers/t/attempts?{query}")
    assert answer.status_code == status, answer.text
    if status == 200:
        assert len(answer.json()["attempts"]) == min(3, int(query.split("=")[1]))


async def test_a_hostile_receivers_body_is_kept_short_and_control_free() -> None:
    escapes = "\x1b]0;pwned\x07\x1b[2J\x9b31m\u202e\r" * 100
    receiver = Receiver(respond=lambda received: Reply(500, body=escapes + "z" * 70_000))
    await receiver.start()
    store = MemoryStore()
    target = HttpTarget(HttpSettings(allow_private_targets=True))
    policy = RetryPolicy(max_attempts=1, timeout_s=2.0)
    callback = Callback(url=receiver.url)
    await store.add(Timer(id="t", due_ms=store.now_ms(), callback=callback, retry=policy))
    async with running(Worker(store, target, WorkerSettings(lookahead_ms=100))):

        async def dead() -> bool:
            timer = await store.get("t")
            return timer is not None and timer.state is State.DEAD

        await until(dead)
    await target.close()
    await receiver.stop()
    async with serve(store) as client:
        [attempt] = (await client.get("/v1/timers/t/attempts")).json()["attempts"]
    assert (attempt["status"], attempt["outcome"]) == (500, "dead")
    body = attempt["body"]
    # the body's first 1,024 bytes, each control character one replacement character
    assert body == replace_controls(
        escapes.encode()[:1024].decode(errors="replace"), keep_lines=True
    )
    assert len(body) <= 1024
    assert body.startswith("\ufffd]0;pwned\ufffd\ufffd[2J\ufffd31m\ufffd\ufffd\ufffd]0;")
    assert all(c.isprintable() or c in "\n\t" for c in body)


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["--attempt-history", "-1"], {}),
        (["--attempt-history", "1001"], {}),
        (["--attempt-retention", "-5"], {}),
        (["--attempt-retention", str(10**12)], {}),
        ([], {"TICKWHEEL_ATTEMPT_HISTORY": "twenty"}),
        ([], {"TICKWHEEL_ATTEMPT_RETENTION": "-1"}),
    ],
)
@pytest.mark.parametrize("command", ["serve", "worker"])
def test_history_flags_out_of_range_exit_2(
    tmp_path: Path, command: str, args: list[str], env: dict[str, str]
) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "tickwheel",
            command,
            "--store",
            f"sqlite:///{tmp_path}/t.db",
            *args,
        ],
        capture_output=True,
        timeout=60,
        env={**os.environ, **env},
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert b"Traceback" not in result.stderr
    assert b"attempt" in result.stderr
