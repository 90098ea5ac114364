"""HTTP callbacks against a real receiver on loopback: headers, signatures, verdicts, SSRF."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest

from tickwheel.engine.signing import sign
from tickwheel.service.receiver import Received, Receiver, Reply

from .conftest import MakeReceiver


async def test_receiver_records_requests_with_tickwheel_headers(receiver: Receiver) -> None:
    before_ms = time.time_ns() / 1e6
    async with aiohttp.ClientSession() as session:
        headers = {"Tickwheel-Timer-Id": "t1", "Tickwheel-Attempt": "3", "Tickwheel-Due": "1234"}
        async with session.put(f"{receiver.url}/hook?x=1", data=b"hi", headers=headers) as reply:
            assert reply.status == 200
    await receiver.wait_for(1, timeout_s=5)
    [got] = receiver.received
    assert (got.method, got.path, got.body) == ("PUT", "/hook?x=1", b"hi")
    assert (got.timer_id, got.attempt, got.due_ms) == ("t1", 3, 1234)
    assert got.headers["tickwheel-timer-id"] == "t1"
    assert got.signature_ok is None
    assert before_ms <= got.at_ms <= time.time_ns() / 1e6


async def test_receiver_verifies_signatures(make_receiver: MakeReceiver) -> None:
    receiver = await make_receiver(signing_secret="s3cret")
    async with aiohttp.ClientSession() as session:
        for secret in ("s3cret", "wrong"):
            signature = sign(secret, b"body", int(time.time()))
            headers = {"Tickwheel-Signature": signature}
            async with session.post(receiver.url, data=b"body", headers=headers):
                pass
    assert [r.signature_ok for r in receiver.received] == [True, False]
    assert receiver.received[0].timer_id is None


async def test_receiver_replies_as_told_sync_or_async(make_receiver: MakeReceiver) -> None:
    async def later(received: Received) -> Reply:
        await asyncio.sleep(0)
        return Reply(503, {"Retry-After": "2"}, f"busy {received.path}")

    sync = await make_receiver(respond=lambda received: Reply(status=418, body="teapot"))
    deferred = await make_receiver(respond=later)
    async with aiohttp.ClientSession() as session:
        async with session.get(sync.url) as reply:
            assert (reply.status, await reply.text()) == (418, "teapot")
        async with session.get(f"{deferred.url}/p") as reply:
            assert (reply.status, await reply.text()) == (503, "busy /p")
            assert reply.headers["Retry-After"] == "2"


async def test_receiver_wait_for_times_out_naming_the_count(receiver: Receiver) -> None:
    with pytest.raises(TimeoutError, match="received 0 of 1"):
        await receiver.wait_for(1, timeout_s=0.05)


async def test_receiver_without_keep_only_counts(make_receiver: MakeReceiver) -> None:
    receiver = await make_receiver(keep=False)
    async with aiohttp.ClientSession() as session, session.get(receiver.url):
        pass
    await receiver.wait_for(1, timeout_s=5)
    assert (receiver.count, receiver.received) == (1, [])
