"""HTTP callbacks against a real receiver on loopback: headers, signatures, verdicts, SSRF."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import re
import shutil
import socket
import ssl
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from email.utils import formatdate
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tickwheel.callbacks import httpclient
from tickwheel.callbacks import resolver as dns
from tickwheel.callbacks.connection import READ_LIMIT_BYTES
from tickwheel.callbacks.guard import PrivateAddressRefused, keep_public
from tickwheel.callbacks.http import MAX_RETRY_AFTER_S, HttpTarget, retry_after_s
from tickwheel.callbacks.httpclient import HttpClient
from tickwheel.callbacks.pool import PoolTimeout
from tickwheel.callbacks.resolver import AddressInfo, ConnectFailed, getaddrinfo
from tickwheel.callbacks.settings import HttpSettings
from tickwheel.callbacks.signing import sign, verify_signature
from tickwheel.engine.outcome import ACKED, GuardedTarget, NotFired, Outcome, Verdict
from tickwheel.errors import Closed, InvalidArgument
from tickwheel.model import Callback, RetryPolicy, Timer, restore
from tickwheel.testing.receiver import Received, Receiver, Reply, describe

from .conftest import MakeReceiver
from .support import until


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
    strict = await make_receiver(signing_secret="s3cret")
    migrating = await make_receiver(signing_secret="s3cret", accept_v1=True)
    request = {"method": "POST", "target": "/hook", "timer_id": "t-1", "attempt": 1}
    now = int(time.time())
    signatures = [
        sign("s3cret", b"body", now, **request),
        sign("wrong", b"body", now, **request),
        sign("s3cret", b"body", now),  # v1 alone
    ]
    async with aiohttp.ClientSession() as session:
        for receiver in (strict, migrating):
            for signature in signatures:
                headers = {
                    "Tickwheel-Signature": signature,
                    "Tickwheel-Timer-Id": "t-1",
                    "Tickwheel-Attempt": "1",
                }
                async with session.post(f"{receiver.url}/hook", data=b"body", headers=headers):
                    pass
    assert [r.signature_ok for r in strict.received] == [True, False, False]
    assert [r.signature_ok for r in migrating.received] == [True, False, True]


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


def test_receiver_log_line_names_timer_lateness_and_signature() -> None:
    received = Received(
        method="POST",
        path="/hook",
        headers={},
        body=b"",
        at_ms=1_000_012.5,
        timer_id="t1",
        attempt=2,
        due_ms=1_000_000,
        signature_ok=False,
    )
    assert describe(received) == "POST /hook timer=t1 attempt=2 late_ms=12.5 signature=BAD"
    plain = Received("GET", "/", {}, b"", 1.0, None, None, None, None)
    assert describe(plain) == "GET /"


# --- HttpTarget ---------------------------------------------------------------------------------

SECRET = "whsec-test-secret"
TOKEN = "Bearer s3cr3t-token"


def timer_for(
    url: str,
    *,
    method: str = "POST",
    headers: dict[str, str] | None = None,
    body: str | None = '{"order": 42}',
    timeout_s: float = 5.0,
    timer_id: str = "timer-1",
) -> Timer:
    callback = Callback(url=url, method=method, headers=headers or {}, body=body)
    return Timer(
        id=timer_id,
        due_ms=1_700_000_000_123,
        callback=callback,
        retry=RetryPolicy(timeout_s=timeout_s),
    )


@pytest.fixture
async def target() -> AsyncIterator[HttpTarget]:
    """A target that may call loopback (the receiver), with a signing secret."""
    target = HttpTarget(HttpSettings(signing_secret=SECRET, allow_private_targets=True))
    yield target
    await target.close()


async def test_callback_carries_its_request_and_tickwheel_headers(
    receiver: Receiver, target: HttpTarget
) -> None:
    headers = {"Authorization": TOKEN, "Content-Type": "application/json"}
    outcome = await target.fire(timer_for(f"{receiver.url}/hooks/a?b=1", headers=headers), 3)
    assert outcome == ACKED
    [got] = receiver.received
    assert (got.method, got.path, got.body) == ("POST", "/hooks/a?b=1", b'{"order": 42}')
    assert (got.timer_id, got.attempt, got.due_ms) == ("timer-1", 3, 1_700_000_000_123)
    assert got.headers["idempotency-key"] == "timer-1"
    assert got.headers["authorization"] == TOKEN
    assert got.headers["content-type"] == "application/json"
    assert got.headers["user-agent"].startswith("tickwheel/")
    assert got.headers["accept-encoding"] == "identity"
    assert verify_signature(SECRET, got.headers, got.body, method="POST", target="/hooks/a?b=1")


async def test_signature_verifies_at_a_receiver_with_the_secret(
    make_receiver: MakeReceiver, target: HttpTarget
) -> None:
    receiver = await make_receiver(signing_secret=SECRET)
    other = await make_receiver(signing_secret="another")
    assert await target.fire(timer_for(receiver.url), 1) == ACKED
    assert await target.fire(timer_for(other.url), 1) == ACKED
    assert receiver.received[0].signature_ok is True
    assert other.received[0].signature_ok is False


async def test_no_signature_without_a_secret_and_no_invented_content_type(
    receiver: Receiver,
) -> None:
    target = HttpTarget(HttpSettings(allow_private_targets=True, user_agent="acme-timers/1"))
    try:
        assert await target.fire(timer_for(receiver.url, method="GET", body=None), 1) == ACKED
    finally:
        await target.close()
    [got] = receiver.received
    assert "tickwheel-signature" not in got.headers
    assert "content-type" not in got.headers
    assert (got.method, got.body, got.headers["user-agent"]) == ("GET", b"", "acme-timers/1")


async def test_idempotency_key_is_stable_across_attempts(
    receiver: Receiver, target: HttpTarget
) -> None:
    for attempt in (1, 2):
        await target.fire(timer_for(receiver.url, timer_id="order-7.expire"), attempt)
    keys = [(r.headers["idempotency-key"], r.attempt) for r in receiver.received]
    assert keys == [("order-7.expire", 1), ("order-7.expire", 2)]


async def test_server_error_retries_with_the_body_recorded(
    make_receiver: MakeReceiver, target: HttpTarget
) -> None:
    receiver = await make_receiver(respond=lambda _: Reply(500, body="database\n is down"))
    outcome = await target.fire(timer_for(receiver.url), 1)
    assert outcome == Outcome(Verdict.RETRY, "HTTP 500: database is down")


async def test_client_error_kills(make_receiver: MakeReceiver, target: HttpTarget) -> None:
    receiver = await make_receiver(respond=lambda _: Reply(400, body='{"error": "bad"}'))
    assert await target.fire(timer_for(receiver.url), 1) == Outcome(
        Verdict.KILL, 'HTTP 400: {"error": "bad"}'
    )


@pytest.mark.parametrize("status", [401, 403, 404, 410, 422])
async def test_other_4xx_kill(make_receiver: MakeReceiver, target: HttpTarget, status: int) -> None:
    receiver = await make_receiver(respond=lambda _: Reply(status))
    assert await target.fire(timer_for(receiver.url), 1) == Outcome(Verdict.KILL, f"HTTP {status}")


async def test_429_retries_after_the_seconds_asked(
    make_receiver: MakeReceiver, target: HttpTarget
) -> None:
    receiver = await make_receiver(respond=lambda _: Reply(429, {"Retry-After": "7"}, "slow down"))
    outcome = await target.fire(timer_for(receiver.url), 1)
    assert outcome == Outcome(Verdict.RETRY, "HTTP 429: slow down", retry_after_s=7, hold_s=7)


async def test_408_and_503_retry_and_an_http_date_is_honoured(
    make_receiver: MakeReceiver, target: HttpTarget
) -> None:
    later = formatdate(time.time() + 120, usegmt=True)
    timeout = await make_receiver(respond=lambda _: Reply(408))
    busy = await make_receiver(respond=lambda _: Reply(503, {"Retry-After": later}))
    assert await target.fire(timer_for(timeout.url), 1) == Outcome(Verdict.RETRY, "HTTP 408")
    outcome = await target.fire(timer_for(busy.url), 1)
    assert (outcome.verdict, outcome.error) == (Verdict.RETRY, "HTTP 503")
    assert outcome.retry_after_s is not None
    assert 115 <= outcome.retry_after_s <= 120
    assert outcome.hold_s == outcome.retry_after_s


@pytest.mark.parametrize(
    ("status", "value", "hold_s"),
    [
        (429, "99999", MAX_RETRY_AFTER_S),  # a host cannot hold its callbacks for a day
        (503, "9" * 40, None),  # nonsense: too many digits to be meant
        (429, "-5", None),
        (429, "1e9", None),
        (503, "\u0661\u0662", None),  # Arabic-Indic digits are digits to Python, not to HTTP
        (500, "30", None),  # a 500's Retry-After is that timer's, not the host's
        (408, "30", None),
    ],
)
async def test_a_hostile_retry_after_holds_the_host_at_most_max(
    make_receiver: MakeReceiver, target: HttpTarget, status: int, value: str, hold_s: float | None
) -> None:
    receiver = await make_receiver(respond=lambda _: Reply(status, {"Retry-After": value}))
    outcome = await target.fire(timer_for(receiver.url), 1)
    assert outcome.verdict is Verdict.RETRY
    assert outcome.hold_s == hold_s


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("7", 7.0),
        (" 0 ", 0.0),
        ("-1", None),
        ("1.5", None),
        ("9" * 13, None),
        ("soon", None),
        ("", None),
        (None, None),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),
        ("Sun, 06 Nov 1994 08:49:37 GMT", 0.0),
        ("Tue, 14 Nov 2023 22:13:50 GMT", 30.0),
        ("Tue, 14 Nov 2023 22:13:50", None),
    ],
)
def test_retry_after_parses_seconds_and_http_dates(
    value: str | None, expected: float | None
) -> None:
    assert retry_after_s(value, now_s=1_700_000_000) == expected


async def test_slow_receiver_times_out_and_retries(
    make_receiver: MakeReceiver, target: HttpTarget
) -> None:
    async def slow(_: Received) -> Reply:
        await asyncio.sleep(5)
        return Reply()

    receiver = await make_receiver(respond=slow)
    started = time.monotonic()
    outcome = await target.fire(timer_for(receiver.url, timeout_s=0.2), 1)
    assert outcome == Outcome(Verdict.RETRY, "timeout after 0.2 s")
    assert time.monotonic() - started < 2


async def test_connection_refused_retries(target: HttpTarget) -> None:
    port = closed_port()
    outcome = await target.fire(timer_for(f"http://127.0.0.1:{port}/x"), 1)
    assert outcome == Outcome(Verdict.RETRY, f"connection refused: 127.0.0.1:{port}")


async def test_unknown_host_retries(target: HttpTarget) -> None:
    outcome = await target.fire(timer_for("http://no-such-host.invalid/x"), 1)
    assert outcome.verdict is Verdict.RETRY
    assert outcome.error is not None
    assert outcome.error.startswith("DNS lookup failed: no-such-host.invalid:80")


async def raw_server(reply: bytes) -> asyncio.Server:
    """A loopback server that reads a request and answers `reply` bytes, then hangs up."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(reply)
        await writer.drain()
        writer.close()

    return await asyncio.start_server(answer, "127.0.0.1", 0)


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (b"", "connection closed by 127.0.0.1 before a response"),
        (b"NOT HTTP AT ALL\r\n\r\n", "invalid HTTP response from 127.0.0.1"),
    ],
)
async def test_broken_server_retries(target: HttpTarget, reply: bytes, error: str) -> None:
    server = await raw_server(reply)
    port = server.sockets[0].getsockname()[1]
    try:
        outcome = await target.fire(timer_for(f"http://127.0.0.1:{port}/?token=query-secret"), 1)
    finally:
        server.close()
        await server.wait_closed()
    assert outcome == Outcome(Verdict.RETRY, error)


async def test_redirect_is_not_followed_and_kills(
    make_receiver: MakeReceiver, target: HttpTarget
) -> None:
    location = "http://169.254.169.254/latest/meta-data/"
    receiver = await make_receiver(respond=lambda _: Reply(302, {"Location": location}))
    outcome = await target.fire(timer_for(receiver.url), 1)
    assert outcome == Outcome(Verdict.KILL, f"HTTP 302: redirect to {location!r} not followed")
    assert receiver.count == 1


async def test_big_response_body_is_cut_to_the_first_200_chars(
    make_receiver: MakeReceiver, target: HttpTarget
) -> None:
    receiver = await make_receiver(respond=lambda _: Reply(500, body="x" * 2_000_000))
    outcome = await target.fire(timer_for(receiver.url), 1)
    assert outcome == Outcome(Verdict.RETRY, "HTTP 500: " + "x" * 200)


async def test_a_guarded_attempt_is_sent_only_while_its_guard_says_go(
    receiver: Receiver, target: HttpTarget
) -> None:
    """The guard is asked on the ready connection, after any wait for a slot: a worker stopped
    in that wait past its lease drops the request instead of firing a timer it lost."""
    assert isinstance(target, GuardedTarget)
    asked = []

    def no() -> bool:
        asked.append("no")
        return False

    with pytest.raises(NotFired):
        await target.fire_guarded(timer_for(receiver.url, timer_id="dropped"), 1, no)
    assert asked == ["no"]
    assert await target.fire_guarded(timer_for(receiver.url), 2, lambda: True) == ACKED
    assert [got.timer_id for got in receiver.received] == ["timer-1"]


async def test_big_ok_body_acks(make_receiver: MakeReceiver, target: HttpTarget) -> None:
    receiver = await make_receiver(respond=lambda _: Reply(200, body="y" * 2_000_000))
    assert await target.fire(timer_for(receiver.url), 1) == ACKED
    assert await target.fire(timer_for(receiver.url), 2) == ACKED


@pytest.mark.parametrize("host", ["127.0.0.1", "[::1]", "[::ffff:127.0.0.1]", "0.0.0.0"])
async def test_private_literal_is_refused_unless_allowed(receiver: Receiver, host: str) -> None:
    url = receiver.url.replace("127.0.0.1", host)
    target = HttpTarget()
    try:
        outcome = await target.fire(timer_for(url), 1)
    finally:
        await target.close()
    shown = host.strip("[]").replace("::ffff:127.0.0.1", "::ffff:7f00:1")
    assert outcome == Outcome(Verdict.KILL, f"refused: {shown} is a private address")
    assert receiver.count == 0


async def test_name_resolving_to_loopback_is_refused(receiver: Receiver) -> None:
    target = HttpTarget()
    try:
        outcome = await target.fire(timer_for(receiver.url.replace("127.0.0.1", "localhost")), 1)
    finally:
        await target.close()
    assert outcome.verdict is Verdict.KILL
    # not the address: last_error would tell whoever reads it what a name maps to inside
    assert outcome.error == "refused: localhost resolves only to private addresses"
    assert receiver.count == 0


@pytest.mark.parametrize("host", ["127.1", "2130706433", "0x7f.0.0.1"])
async def test_legacy_ipv4_spellings_are_judged_by_the_address_they_resolve_to(host: str) -> None:
    target = HttpTarget()
    try:
        outcome = await target.fire(timer_for(f"http://{host}/x"), 1)
    finally:
        await target.close()
    refused = f"refused: {host} resolves only to private addresses"
    assert outcome == Outcome(Verdict.KILL, refused)


def stored_timer_for(url: str) -> Timer:
    """A timer as a store gives it back: its callback is not validated again (`restore`), so
    it may hold a URL that an older tickwheel accepted."""
    callback = restore(Callback, url=url, method="POST", headers={}, body=None)
    return Timer(id="timer-1", due_ms=1_700_000_000_123, callback=callback)


async def test_a_url_the_client_cannot_encode_kills_without_quoting_it(target: HttpTarget) -> None:
    host = "é" * 70 + ".example"  # one IDNA label over 63 characters
    outcome = await target.fire(stored_timer_for(f"http://{host}/?token=s3cret"), 1)
    assert outcome == Outcome(Verdict.KILL, f"invalid URL: host {host}")


@pytest.mark.parametrize("host", ["a" * 64 + ".example", "a..b", ".example"])
async def test_a_host_dns_cannot_carry_kills_without_quoting_the_url(
    target: HttpTarget, host: str
) -> None:
    # yarl passes these ASCII hosts through; the IDNA codec under getaddrinfo refuses them
    outcome = await target.fire(stored_timer_for(f"http://{host}/?token=s3cret"), 1)
    assert outcome == Outcome(Verdict.KILL, f"invalid URL: host {host}")


async def test_an_unforeseen_error_retries_naming_only_its_type(
    monkeypatch: pytest.MonkeyPatch, target: HttpTarget
) -> None:
    async def broken(*_: object, **__: object) -> list[AddressInfo]:
        raise RuntimeError("resolver bug at http://localhost/?token=s3cret")

    monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", broken)
    outcome = await target.fire(timer_for("http://localhost/?token=s3cret"), 1)
    assert outcome == Outcome(Verdict.RETRY, "unexpected error: RuntimeError")


async def test_private_targets_work_when_allowed(receiver: Receiver, target: HttpTarget) -> None:
    assert await target.fire(timer_for(receiver.url), 1) == ACKED
    assert await target.fire(timer_for(receiver.url.replace("127.0.0.1", "localhost")), 1) == ACKED
    assert receiver.count == 2


def infos(*addresses: str) -> list[AddressInfo]:
    """getaddrinfo's answer for `addresses`, port 80."""
    return [
        (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, 80))
        for a in addresses
    ]


def test_resolution_keeps_only_public_addresses() -> None:
    found = infos("10.0.0.5", "93.184.215.14", "169.254.169.254", "::ffff:10.0.0.1")
    assert [info[4][0] for info in keep_public("mixed.example", found)] == ["93.184.215.14"]


def test_resolution_refuses_a_name_with_only_private_addresses() -> None:
    refused = r"^refused: metadata\.example resolves only to private addresses$"
    with pytest.raises(PrivateAddressRefused, match=refused):
        keep_public("metadata.example", infos("169.254.169.254", "10.0.0.5"))


async def test_secrets_stay_out_of_errors(make_receiver: MakeReceiver) -> None:
    target = HttpTarget(HttpSettings(signing_secret=SECRET))
    headers = {"Authorization": TOKEN}
    url = f"http://127.0.0.1:{closed_port()}/x?token=query-secret"
    try:
        outcomes = [
            await target.fire(timer_for(url, headers=headers), 1),
            await target.fire(timer_for(url.replace("127.0.0.1", "localhost"), headers=headers), 1),
            await target.fire(timer_for("http://127.1/?token=query-secret", headers=headers), 1),
        ]
    finally:
        await target.close()
    for outcome in outcomes:
        assert outcome.error is not None
        for secret in (SECRET, TOKEN, "query-secret"):
            assert secret not in outcome.error


async def test_connections_are_bounded_per_host_and_queueing_does_not_count_as_time(
    make_receiver: MakeReceiver,
) -> None:
    in_flight = 0
    most = 0

    async def slow(_: Received) -> Reply:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0.3)
        in_flight -= 1
        return Reply()

    receiver = await make_receiver(respond=slow)
    target = HttpTarget(HttpSettings(allow_private_targets=True, max_connections=8, max_per_host=4))
    try:
        timers = [timer_for(receiver.url, timer_id=f"t{i}", timeout_s=0.5) for i in range(8)]
        started = time.monotonic()
        outcomes = await asyncio.gather(*(target.fire(t, 1) for t in timers))
    finally:
        await target.close()
    # 8 requests, 4 at a time, 300 ms each: the second four waited 300 ms for their slots and
    # took 600 ms in all, longer than one attempt's timeout
    assert outcomes == [ACKED] * 8
    assert time.monotonic() - started > 0.5
    assert most == 4


async def test_the_wait_for_a_slot_ends_with_the_attempts_timeout() -> None:
    target = HttpTarget(HttpSettings(allow_private_targets=True, max_connections=8, max_per_host=1))
    async with RawServer(always(None)) as server:
        stuck = asyncio.create_task(target.fire(timer_for(server.url, timeout_s=5), 1))
        await until(lambda: server.requests == 1, timeout_s=2)
        started = time.monotonic()
        outcome = await target.fire(timer_for(server.url, timeout_s=0.3), 1)
        waited_s = time.monotonic() - started
        stuck.cancel()
        await target.close()
        await until(lambda: server.open == 0, timeout_s=2)
        port = server.port
    # not sent: handed back to the store shortly, spending no attempt
    assert (outcome.verdict, outcome.error) == (
        Verdict.DEFER,
        f"no free connection to 127.0.0.1:{port} within 0.3 s",
    )
    assert outcome.retry_after_s is not None
    assert 1 <= outcome.retry_after_s <= 2
    assert 0.25 < waited_s < 2


async def test_the_wait_for_a_slot_is_bounded_below_long_timeouts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(httpclient, "SLOT_WAIT_S", 0.2)
    client = HttpClient(allow_private=True, max_connections=1)
    async with RawServer(always(None)) as server:
        stuck = asyncio.create_task(client.request(origin_of(server), GET, 5))
        await until(lambda: server.requests == 1, timeout_s=2)
        with pytest.raises(PoolTimeout, match=r"within 0\.2 s"):
            await client.request(origin_of(server), GET, 60)
        stuck.cancel()
        client.close()
        await until(lambda: server.open == 0, timeout_s=2)


async def test_fire_checks_its_arguments_and_close_is_idempotent(receiver: Receiver) -> None:
    with pytest.raises(InvalidArgument, match="max_per_host"):
        HttpSettings(max_per_host=0)
    target = HttpTarget(HttpSettings(allow_private_targets=True))
    with pytest.raises(ValueError, match="no HTTP callback"):
        await target.fire(Timer(id="q", due_ms=0, payload={"a": 1}), 1)
    await target.close()
    await target.close()
    with pytest.raises(Closed):
        await target.fire(timer_for(receiver.url), 1)


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"max_connections": 0}, "max_connections"),
        ({"max_connections": True}, "max_connections"),
        ({"max_per_host": 1.5}, "max_per_host"),
        ({"user_agent": "agent\r\nX-Injected: 1"}, "user_agent"),
        ({"signing_secret": b"bytes"}, "signing_secret"),
        ({"allow_private_targets": "yes"}, "allow_private_targets"),
    ],
)
def test_http_settings_are_validated_naming_the_field(fields: dict[str, Any], named: str) -> None:
    with pytest.raises(InvalidArgument, match=f"^{named}: "):
        HttpSettings(**fields)


def test_http_settings_keep_the_secret_out_of_their_repr() -> None:
    settings = HttpSettings(signing_secret=SECRET, max_connections=8)
    assert SECRET not in repr(settings)
    assert "max_connections=8" in repr(settings)


async def test_http_target_takes_one_settings_record() -> None:
    settings = HttpSettings(allow_private_targets=True, max_connections=8)
    target = HttpTarget(settings)
    assert target.settings == settings
    assert HttpTarget().settings == HttpSettings()
    await target.close()


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


# --- the client under odd servers (tickwheel.callbacks.httpclient) ------------------------------

Answer = Callable[[int, int], tuple[bytes | None, bool]]


def ok(body: bytes = b"ok", *extra: bytes) -> bytes:
    """A 200 response with `body` and `extra` header lines."""
    head = b"".join(line + b"\r\n" for line in extra)
    return b"HTTP/1.1 200 OK\r\n%sContent-Length: %d\r\n\r\n%s" % (head, len(body), body)


GET = b"GET / HTTP/1.1\r\nHost: test\r\n\r\n"


def origin_of(server: RawServer, host: str = "127.0.0.1") -> tuple[str, str, int]:
    return ("http", host, server.port)


def always(reply: bytes | None, hang_up: bool = False) -> Answer:
    """Answer every request with `reply` (None: nothing), hanging up after it if told."""
    return lambda _connection, _request: (reply, hang_up)


class Tally:
    """Connections open now and at most, over one server or several."""

    def __init__(self) -> None:
        self.open = 0
        self.most = 0

    def enter(self) -> None:
        self.open += 1
        self.most = max(self.most, self.open)


class RawServer:
    """A hand-written HTTP/1.1 server on loopback that counts its connections.

    `answer(connection_no, request_no)` (both from 1) gives the bytes to send for a request,
    or None to send nothing, and whether to hang up afterwards; a connection that gets nothing
    and stays open waits until the client closes it. Replies go out after `delay_s`.
    """

    def __init__(
        self,
        answer: Answer,
        *,
        delay_s: float = 0.0,
        shared: Tally | None = None,
        host: str = "127.0.0.1",
    ):
        self.answer = answer
        self.host = host  # another loopback address (127.0.0.2) is another host
        self.delay_s = delay_s
        self.tallies = [Tally()] if shared is None else [Tally(), shared]
        self.connections = 0
        self.requests = 0
        self.closed_by_client = 0
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    @property
    def open(self) -> int:
        return self.tallies[0].open

    @property
    def most_open(self) -> int:
        return self.tallies[0].most

    @property
    def port(self) -> int:
        assert self._server is not None
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/hook?token=s3cret"

    async def __aenter__(self) -> RawServer:
        self._server = await asyncio.start_server(self._serve, self.host, 0)
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        for tally in self.tallies:
            tally.enter()
        self._writers.append(writer)
        try:
            for request_no in itertools.count(1):
                head = await reader.readuntil(b"\r\n\r\n")
                length = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
                await reader.readexactly(int(length[1]) if length else 0)
                self.requests += 1
                reply, hang_up = self.answer(number, request_no)
                if reply is None and not hang_up:
                    await reader.read()  # nothing to say: wait until the client gives up
                    self.closed_by_client += 1
                    break
                await asyncio.sleep(self.delay_s)
                if reply:
                    writer.write(reply)
                    await writer.drain()
                if hang_up:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            self.closed_by_client += 1
        finally:
            for tally in self.tallies:
                tally.open -= 1
            writer.close()


async def test_keep_alive_reuses_one_connection(target: HttpTarget) -> None:
    async with RawServer(always(ok())) as server:
        for attempt in (1, 2, 3):
            assert await target.fire(timer_for(server.url), attempt) == ACKED
    assert (server.connections, server.requests) == (1, 3)


async def test_a_pooled_connection_the_server_closed_is_not_reused(target: HttpTarget) -> None:
    async with RawServer(always(ok(), hang_up=True)) as server:
        assert await target.fire(timer_for(server.url), 1) == ACKED
        await asyncio.sleep(0.05)  # the close reaches the idle connection
        assert await target.fire(timer_for(server.url), 2) == ACKED
    assert (server.connections, server.requests) == (2, 2)


async def test_a_reused_connection_closed_before_any_reply_is_retried_once_fresh(
    target: HttpTarget,
) -> None:
    # the server hangs up on each connection's second request, as a server closing an idle
    # connection just as a request goes out: that request goes again on a new connection
    def answer(_connection: int, request: int) -> tuple[bytes | None, bool]:
        return (ok(), False) if request == 1 else (None, True)

    async with RawServer(answer) as server:
        assert await target.fire(timer_for(server.url), 1) == ACKED
        assert await target.fire(timer_for(server.url), 2) == ACKED
    assert (server.connections, server.requests) == (2, 3)


async def test_a_fresh_connection_closed_before_any_reply_is_not_retried(
    target: HttpTarget,
) -> None:
    async with RawServer(always(None, hang_up=True)) as server:
        outcome = await target.fire(timer_for(server.url), 1)
    assert outcome == Outcome(Verdict.RETRY, "connection closed by 127.0.0.1 before a response")
    assert server.requests == 1


async def test_a_reply_cut_short_retries_without_sending_again(target: HttpTarget) -> None:
    cut = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nonly"
    async with RawServer(always(cut, hang_up=True)) as server:
        outcome = await target.fire(timer_for(server.url), 1)
    assert outcome == Outcome(Verdict.RETRY, "connection closed by 127.0.0.1 during the response")
    assert server.requests == 1


async def test_chunked_reply_is_read_and_the_connection_kept(target: HttpTarget) -> None:
    chunked = (
        b"HTTP/1.1 503 Busy\r\nTransfer-Encoding: chunked\r\nRetry-After: 3\r\n\r\n"
        b"5\r\nbusy,\r\nA\r\n try later\r\n0\r\n\r\n"
    )
    async with RawServer(always(chunked)) as server:
        outcomes = [await target.fire(timer_for(server.url), attempt) for attempt in (1, 2)]
    assert outcomes == [Outcome(Verdict.RETRY, "HTTP 503: busy, try later", 3.0, 3.0)] * 2
    assert server.connections == 1


async def test_a_body_ended_by_the_close_is_read_to_the_close(target: HttpTarget) -> None:
    until_close = b"HTTP/1.1 500 Oops\r\n\r\nthe body ends\r\nwith the connection"
    async with RawServer(always(until_close, hang_up=True)) as server:
        outcome = await target.fire(timer_for(server.url), 1)
    assert outcome == Outcome(Verdict.RETRY, "HTTP 500: the body ends with the connection")


async def test_an_interim_100_reply_is_skipped(target: HttpTarget) -> None:
    async with RawServer(always(b"HTTP/1.1 100 Continue\r\n\r\n" + ok())) as server:
        assert await target.fire(timer_for(server.url), 1) == ACKED
        assert await target.fire(timer_for(server.url), 2) == ACKED
    assert server.connections == 1


async def test_connection_close_reply_is_not_reused(target: HttpTarget) -> None:
    # the server leaves its side open: the client must close it and not send on it again
    async with RawServer(always(ok(b"ok", b"Connection: close"))) as server:
        for attempt in (1, 2):
            assert await target.fire(timer_for(server.url), attempt) == ACKED
        await until(lambda: server.open == 0, timeout_s=2)
    assert (server.connections, server.requests, server.closed_by_client) == (2, 2, 2)


async def test_a_body_over_the_read_limit_costs_its_connection(target: HttpTarget) -> None:
    size = 4 * READ_LIMIT_BYTES
    big = b"HTTP/1.1 500 Oops\r\nContent-Length: %d\r\n\r\n%s" % (size, b"z" * size)
    async with RawServer(always(big)) as server:
        for attempt in (1, 2):
            outcome = await target.fire(timer_for(server.url), attempt)
            assert outcome == Outcome(Verdict.RETRY, "HTTP 500: " + "z" * 200)
        await until(lambda: server.open == 0, timeout_s=2)
    assert (server.connections, server.requests) == (2, 2)


async def test_a_server_that_never_answers_times_out_and_loses_the_connection(
    target: HttpTarget,
) -> None:
    async with RawServer(always(None)) as server:
        started = time.monotonic()
        outcome = await target.fire(timer_for(server.url, timeout_s=0.2), 1)
        assert time.monotonic() - started < 1
        await until(lambda: server.open == 0, timeout_s=2)
    assert outcome == Outcome(Verdict.RETRY, "timeout after 0.2 s")
    assert server.closed_by_client == 1


@contextlib.contextmanager
def full_listener() -> Iterator[socket.socket]:
    """A loopback listener whose accept queue is full: the kernel drops further SYNs."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        fillers = [socket.socket() for _ in range(3)]
        try:
            for filler in fillers:
                filler.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    filler.connect(("127.0.0.1", port))
            yield listener
        finally:
            for filler in fillers:
                filler.close()


async def test_a_connect_that_never_completes_times_out(target: HttpTarget) -> None:
    # a listener whose backlog is full and never accepted drops further SYNs (Linux)
    with full_listener() as listener:
        port = listener.getsockname()[1]
        started = time.monotonic()
        outcome = await target.fire(timer_for(f"http://127.0.0.1:{port}/", timeout_s=0.2), 1)
        assert time.monotonic() - started < 1
    assert outcome == Outcome(Verdict.RETRY, "timeout after 0.2 s")


async def test_a_cancelled_attempt_closes_its_connection(target: HttpTarget) -> None:
    async with RawServer(always(None)) as server:
        attempt = asyncio.create_task(target.fire(timer_for(server.url), 1))
        await until(lambda: server.requests == 1, timeout_s=2)
        attempt.cancel()
        with pytest.raises(asyncio.CancelledError):
            await attempt
        await until(lambda: server.open == 0, timeout_s=2)
        server.answer = always(ok())
        assert await target.fire(timer_for(server.url), 2) == ACKED
    assert server.connections == 2


async def test_idle_connections_expire(monkeypatch: pytest.MonkeyPatch, target: HttpTarget) -> None:
    monkeypatch.setattr(httpclient, "KEEPALIVE_S", 0.05)
    async with RawServer(always(ok())) as server:
        assert await target.fire(timer_for(server.url), 1) == ACKED
        await until(lambda: server.open == 0, timeout_s=2)
        assert await target.fire(timer_for(server.url), 2) == ACKED
    assert (server.connections, server.closed_by_client) == (2, 1)


async def test_close_closes_idle_connections(target: HttpTarget) -> None:
    async with RawServer(always(ok())) as server:
        assert await target.fire(timer_for(server.url), 1) == ACKED
        await target.close()
        await until(lambda: server.open == 0, timeout_s=2)


async def test_open_connections_stay_within_both_bounds() -> None:
    # idle connections count too: never more than 2 open to one origin, 3 over both
    both = Tally()
    target = HttpTarget(HttpSettings(allow_private_targets=True, max_connections=3, max_per_host=2))
    try:
        async with (
            RawServer(always(ok()), delay_s=0.005, shared=both) as one,
            RawServer(always(ok()), delay_s=0.005, shared=both) as two,
        ):

            async def burst(server: RawServer, count: int) -> list[Outcome]:
                timers = [timer_for(server.url, timer_id=f"t{i}") for i in range(count)]
                return await asyncio.gather(*(target.fire(t, 1) for t in timers))

            for _ in range(3):
                assert await burst(one, 20) == [ACKED] * 20
                outcomes = await asyncio.gather(burst(one, 20), burst(two, 20))
                assert outcomes == [[ACKED] * 20] * 2
            await target.close()
            await until(lambda: both.open == 0, timeout_s=2)
    finally:
        await target.close()
    assert (one.requests, two.requests) == (120, 60)
    assert (one.most_open, two.most_open, both.most) == (2, 2, 3)


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key, made with the openssl command."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    command = "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1"
    subprocess.run(
        [*command.split(), "-keyout", key, "-out", cert, "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True,
        capture_output=True,
    )
    return cert, key


async def test_tls_is_verified_against_the_trusted_roots(
    certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = certificate
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_side.load_cert_chain(cert, key)
    server = await asyncio.start_server(serve_ok_once, "127.0.0.1", 0, ssl=server_side)
    port = server.sockets[0].getsockname()[1]
    untrusted, trusted = (
        HttpTarget(HttpSettings(allow_private_targets=True)),
        HttpTarget(HttpSettings(allow_private_targets=True)),
    )
    try:
        refused = await untrusted.fire(timer_for(f"https://127.0.0.1:{port}/?token=t"), 1)
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # read when the context is made
        accepted = await trusted.fire(timer_for(f"https://127.0.0.1:{port}/?token=t"), 1)
        wrong_name = await trusted.fire(timer_for(f"https://localhost:{port}/"), 1)
    finally:
        await untrusted.close()
        await trusted.close()
        server.close()
        await server.wait_closed()
    assert refused == Outcome(Verdict.RETRY, f"TLS certificate error: 127.0.0.1:{port}")
    assert accepted == ACKED
    assert wrong_name == Outcome(Verdict.RETRY, f"TLS certificate error: localhost:{port}")


async def serve_ok_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answer one request with 200 and hang up."""
    with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
        await reader.readuntil(b"\r\n\r\n")
        writer.write(ok(b"ok", b"Connection: close"))
        await writer.drain()
    writer.close()


# --- slow start and name lookups (HttpClient) ---------------------------------------------------


async def gather_requests(
    client: HttpClient, origin: tuple[str, str, int], count: int, timeout_s: float = 5
) -> list[object]:
    """Send `count` requests at once; return each response's status or the exception raised."""
    results = await asyncio.gather(
        *(client.request(origin, GET, timeout_s) for _ in range(count)), return_exceptions=True
    )
    return [getattr(result, "status", result) for result in results]


async def test_a_new_origin_gets_four_connections_and_halves_them_on_timeouts() -> None:
    client = HttpClient(allow_private=True, max_connections=64, max_per_host=16)
    async with RawServer(always(None)) as server:
        origin = origin_of(server)
        assert client.concurrency(origin) == 4
        sent = asyncio.create_task(gather_requests(client, origin, 10, timeout_s=1.0))
        await until(lambda: server.requests == 4, timeout_s=2)
        await asyncio.sleep(0.1)
        assert (server.connections, server.requests) == (4, 4)  # the other six wait
        results = await sent
        client.close()
    timeouts = [r for r in results if isinstance(r, TimeoutError)]
    assert len(timeouts) >= 4
    assert all(isinstance(r, TimeoutError | PoolTimeout) for r in results)
    assert client.concurrency(origin) == 1  # 4 -> 2 -> 1, and no lower


@pytest.mark.latency  # all 16 open at once needs the CPU the parallel phase does not leave
async def test_prompt_answers_earn_connections_up_to_the_cap_and_busy_ones_halve_them() -> None:
    status = 200

    def answer(_connection: int, _request: int) -> tuple[bytes, bool]:
        return b"HTTP/1.1 %d X\r\nContent-Length: 0\r\n\r\n" % status, False

    client = HttpClient(allow_private=True, max_connections=64, max_per_host=16)
    async with RawServer(answer, delay_s=0.01) as server:
        origin = origin_of(server)
        for _ in range(10):  # one at a time: four connections are plenty, none are earned
            assert await gather_requests(client, origin, 1) == [200]
        assert client.concurrency(origin) == 4
        assert await gather_requests(client, origin, 60) == [200] * 60
        assert client.concurrency(origin) == 16
        assert server.most_open == 16
        limits = []
        for status in (503, 429, 503, 503, 500):
            assert await gather_requests(client, origin, 1) == [status]
            limits.append(client.concurrency(origin))
        client.close()
        await until(lambda: server.open == 0, timeout_s=2)
    assert limits == [8, 4, 2, 1, 1]


async def test_no_more_than_four_connections_to_an_origin_open_at_once() -> None:
    # each answer closes its connection, so every request opens one, and only four may be
    # opening (not yet answered) at a time; slots that could not be used are not earned
    client = HttpClient(allow_private=True, max_connections=64, max_per_host=16)
    async with RawServer(always(ok(), hang_up=True), delay_s=0.02) as server:
        origin = origin_of(server)
        assert await gather_requests(client, origin, 60) == [200] * 60
        client.close()
    assert (server.connections, server.most_open) == (60, 4)
    assert client.concurrency(origin) < 16


async def test_slow_answers_earn_no_connections() -> None:
    client = HttpClient(allow_private=True, max_connections=64, max_per_host=16)
    async with RawServer(always(ok())) as server:
        origin = origin_of(server)
        assert await gather_requests(client, origin, 1) == [200]  # fast: milliseconds
        server.delay_s = 0.4  # now slower than twice the fastest answer plus 0.25 s
        assert await gather_requests(client, origin, 8) == [200] * 8
        client.close()
        await until(lambda: server.open == 0, timeout_s=2)
    assert client.concurrency(origin) == 4


async def test_a_refused_connect_halves_the_origins_connections() -> None:
    client = HttpClient(allow_private=True, max_connections=64)
    origin = ("http", "127.0.0.1", closed_port())
    with pytest.raises(ConnectFailed) as failed:
        await client.request(origin, GET, 5)
    assert isinstance(failed.value.cause, ConnectionRefusedError)
    assert client.concurrency(origin) == 2
    client.close()


class CountingResolver:
    """The loop's getaddrinfo, `delay_s` later, counting lookups per host."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.lookups: collections.Counter[str] = collections.Counter()

    async def __call__(self, host: str) -> Sequence[AddressInfo]:
        self.lookups[host] += 1
        await asyncio.sleep(self.delay_s)
        return await getaddrinfo(host)


async def test_names_are_looked_up_once_for_requests_at_once_and_cached_a_while(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # long enough that the first requests stay within it on a loaded machine
    monkeypatch.setattr(dns, "DNS_CACHE_S", 2.0)
    resolver = CountingResolver(delay_s=0.05)
    client = HttpClient(allow_private=True, max_connections=64, resolve=resolver)
    # the server closes every connection: each request connects, and so looks its name up
    async with RawServer(always(ok(), hang_up=True)) as server:
        origin = origin_of(server, "localhost")
        assert await gather_requests(client, origin, 4) == [200] * 4
        assert await gather_requests(client, origin, 1) == [200]
        assert resolver.lookups == {"localhost": 1}
        await asyncio.sleep(2.1)
        assert await gather_requests(client, origin, 1) == [200]
        client.close()
    assert resolver.lookups == {"localhost": 2}
    assert server.connections == 6


async def test_a_slow_lookup_fails_as_dns_in_bounded_time_and_is_not_repeated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(dns, "DNS_TIMEOUT_S", 0.2)
    resolver = CountingResolver(delay_s=1.0)
    client = HttpClient(allow_private=True, max_connections=64, resolve=resolver)
    origin = ("http", "localhost", closed_port())
    started = time.monotonic()
    results = await gather_requests(client, origin, 3)
    # a request after the first ones gave up waits on the same lookup, still under way
    later = await gather_requests(client, origin, 1)
    assert time.monotonic() - started < 0.9
    for failed in [*results, *later]:
        assert isinstance(failed, ConnectFailed)
        assert (failed.dns, str(failed.cause)) == (True, "[Errno 110] no answer within 0.2 s")
    assert resolver.lookups == {"localhost": 1}
    assert client.concurrency(origin) == 4  # the origin is not to blame for its name server
    client.close()
