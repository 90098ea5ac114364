"""Signatures hold against replays and hostile headers, in tickwheel and in the documented verifier.

Callbacks come from a real `HttpTarget` to a loopback server that keeps the request bytes as they
arrived, so v2 is checked against the target exactly as it went on the wire.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

from tickwheel.callbacks import signing
from tickwheel.callbacks.http import HttpTarget
from tickwheel.callbacks.settings import HttpSettings
from tickwheel.callbacks.signing import sign, verify_signature
from tickwheel.engine.outcome import ACKED
from tickwheel.model import Callback, Timer
from tickwheel.testing.receiver import Receiver

SECRET = "whsec-hostile"
README = Path(__file__).parents[2] / "README.md"
NOW = 1_700_000_000

Verifier = Callable[..., bool]


@dataclass(frozen=True)
class Captured:
    """One request as it arrived: the raw bytes and their parts, header names lower-case."""

    raw: bytes
    method: str
    target: str
    headers: dict[str, str]
    body: bytes

    @property
    def signature(self) -> str:
        return self.headers["tickwheel-signature"]


class CaptureServer:
    """A loopback HTTP/1.1 server that keeps each request byte for byte and answers 200."""

    def __init__(self) -> None:
        self.requests: list[Captured] = []
        self.url = ""
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        request_line, *lines = head[:-4].decode("ascii").split("\r\n")
        method, target, _ = request_line.split(" ")
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        self.requests.append(Captured(head + body, method, target, headers, body))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()
        await writer.wait_closed()


@pytest.fixture
async def capture() -> AsyncIterator[CaptureServer]:
    server = CaptureServer()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def target() -> AsyncIterator[HttpTarget]:
    target = HttpTarget(HttpSettings(signing_secret=SECRET, allow_private_targets=True))
    yield target
    await target.close()


def doc_verifier() -> Verifier:
    """Return the verifier that the README offers receiver authors, run as printed."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)
    [code] = [block for block in blocks if "def verify_tickwheel" in block]
    namespace: dict[str, object] = {}
    exec(compile(code, str(README), "exec"), namespace)
    verify = namespace["verify_tickwheel"]
    assert callable(verify)
    return verify


async def fire(
    target: HttpTarget,
    server: CaptureServer,
    path: str,
    *,
    method: str = "POST",
    body: str | None = '{"order": 42}',
    timer_id: str = "order-42",
    attempt: int = 2,
) -> Captured:
    """Fire one callback at `server` + `path` and return the request as it arrived."""
    callback = Callback(url=f"{server.url}{path}", method=method, body=body)
    timer = Timer(id=timer_id, due_ms=1_700_000_000_000, callback=callback)
    assert await target.fire(timer, attempt) == ACKED
    return server.requests[-1]


def check_with_doc(got: Captured, **change: object) -> bool:
    """Run the documented verifier on `got`, with some of what it is given changed."""
    given: dict[str, object] = {
        "secret": SECRET.encode(),
        "header": got.signature,
        "method": got.method,
        "target": got.target,
        "timer_id": got.headers["tickwheel-timer-id"],
        "attempt": got.headers["tickwheel-attempt"],
        "body": got.body,
    }
    return doc_verifier()(**{**given, **change})


def check_with_tickwheel(got: Captured, **change: object) -> bool:
    """Run `verify_signature` (v2 only) on `got`, with some of what it is given changed."""
    headers = dict(got.headers)
    if "timer_id" in change:
        headers["tickwheel-timer-id"] = str(change["timer_id"])
    if "attempt" in change:
        headers["tickwheel-attempt"] = str(change["attempt"])
    body = change.get("body", got.body)
    assert isinstance(body, bytes)
    return verify_signature(
        SECRET,
        headers,
        body,
        method=str(change.get("method", got.method)),
        target=str(change.get("target", got.target)),
        accept_v1=False,
    )


CHECKS = [pytest.param(check_with_doc, id="doc"), pytest.param(check_with_tickwheel, id="lib")]

# a path with non-ASCII, an encoded slash and a query: the target is checked as sent, encoded
TRICKY_PATH = "/hooks/café/a%2Fb?shop=7&q=ü&next=/x"


@pytest.mark.parametrize("check", CHECKS)
async def test_a_real_callback_verifies(
    check: Verifier, target: HttpTarget, capture: CaptureServer
) -> None:
    got = await fire(target, capture, TRICKY_PATH)
    assert got.target == "/hooks/caf%C3%A9/a%2Fb?shop=7&q=%C3%BC&next=/x"
    assert check(got)


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"target": "/hooks/cafe/a%2Fb?shop=7&q=%C3%BC&next=/x"}, id="path"),
        pytest.param({"target": "/hooks/caf%C3%A9/a%2Fb?shop=8&q=%C3%BC&next=/x"}, id="query"),
        pytest.param({"target": "/hooks/caf%C3%A9/a/b?shop=7&q=%C3%BC&next=/x"}, id="decoded"),
        pytest.param({"method": "PUT"}, id="method"),
        pytest.param({"timer_id": "order-43"}, id="timer-id"),
        pytest.param({"attempt": "3"}, id="attempt"),
        pytest.param({"body": b'{"order": 43}'}, id="body"),
        pytest.param({"body": b""}, id="no-body"),
    ],
)
async def test_a_real_callback_tampered_anywhere_is_refused(
    check: Verifier,
    change: dict[str, object],
    target: HttpTarget,
    capture: CaptureServer,
) -> None:
    got = await fire(target, capture, TRICKY_PATH)
    assert check(got)
    assert not check(got, **change)


async def test_an_old_or_future_timestamp_is_refused_by_both(
    target: HttpTarget, capture: CaptureServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    got = await fire(target, capture, "/hook")
    sent_s = int(got.signature.split(",")[0].removeprefix("t="))
    verify = doc_verifier()
    arguments = (
        SECRET.encode(),
        got.signature,
        got.method,
        got.target,
        got.headers["tickwheel-timer-id"],
        got.headers["tickwheel-attempt"],
        got.body,
    )
    for now_s, valid in ((sent_s + 300, True), (sent_s + 301, False), (sent_s - 301, False)):
        # the doc's block reads the clock through its own `time` global
        monkeypatch.setitem(verify.__globals__, "time", SimpleNamespace(time=lambda t=now_s: t))
        assert verify(*arguments) is valid
        ours = verify_signature(
            SECRET,
            got.headers,
            got.body,
            method=got.method,
            target=got.target,
            accept_v1=False,
            now_s=now_s,
        )
        assert ours is valid


async def test_the_receiver_refuses_a_callback_replayed_to_another_path(
    target: HttpTarget, capture: CaptureServer
) -> None:
    got = await fire(target, capture, TRICKY_PATH)
    sent_line = f"POST {got.target} ".encode()
    async with Receiver(signing_secret=SECRET) as receiver:
        for request_line in (sent_line, b"POST /admin/refund?shop=7 "):
            reader, writer = await asyncio.open_connection(receiver.host, receiver.port)
            writer.write(got.raw.replace(sent_line, request_line, 1))
            await writer.drain()
            assert (await reader.readline()).startswith(b"HTTP/1.1 200")
            writer.close()
            await writer.wait_closed()
        await receiver.wait_for(2, timeout_s=5)
    # the first is the callback as sent, its percent-encoded path checked as it came
    assert [r.signature_ok for r in receiver.received] == [True, False]


# --- the v1 hole: an empty body signed once verifies on any path -------------------------------


def _replayed(got: Captured, *, keep_v2: bool) -> dict[str, str]:
    """`got`'s headers replayed as another timer, with or without the v2 value."""
    value = got.signature if keep_v2 else re.sub(r",v2=[0-9a-f]+", "", got.signature)
    return {**got.headers, "tickwheel-signature": value, "tickwheel-timer-id": "someone-else"}


async def test_a_request_stripped_of_v2_is_refused_by_default_for_any_request(
    target: HttpTarget, capture: CaptureServer
) -> None:
    got = await fire(target, capture, "/status", method="GET", body=None, timer_id="ping")
    assert got.body == b""
    elsewhere = {"method": "DELETE", "target": "/admin/accounts/7"}
    stripped = _replayed(got, keep_v2=False)
    # v1 binds the timestamp and the empty body, nothing of the request: refused by default,
    # on its own path as on another, and a verifier that cannot check v2 must opt in to v1
    assert not verify_signature(SECRET, stripped, b"", **elsewhere)
    assert not verify_signature(SECRET, stripped, b"", method="GET", target="/status")
    with pytest.raises(ValueError, match="method and target"):
        verify_signature(SECRET, stripped, b"")
    # what a receiver still migrating from v1-only senders accepts, knowingly
    assert verify_signature(SECRET, stripped, b"", accept_v1=True, **elsewhere)
    # sent as captured, v2 is there and decides, even while v1 is accepted
    unstripped = _replayed(got, keep_v2=True)
    assert not verify_signature(SECRET, unstripped, b"", accept_v1=True, **elsewhere)
    assert not check_with_doc(got, **elsewhere)


# --- hostile headers ---------------------------------------------------------------------------


def _signed(body: bytes = b"{}") -> str:
    return sign(SECRET, body, NOW, method="POST", target="/hook", timer_id="t1", attempt=1)


VALID = _signed()
V2 = VALID.split(",v2=")[1]


def _both(
    header: str,
    *,
    timer_id: str = "t1",
    attempt: str = "1",
    target: str = "/hook",
    body: bytes = b"{}",
) -> bool:
    """Check a request at `NOW` with tickwheel and with the doc's verifier; both must agree."""
    headers = {
        "Tickwheel-Signature": header,
        "Tickwheel-Timer-Id": timer_id,
        "Tickwheel-Attempt": attempt,
    }
    ours = verify_signature(
        SECRET, headers, body, method="POST", target=target, accept_v1=False, now_s=NOW
    )
    verify = doc_verifier()
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(verify.__globals__, "time", SimpleNamespace(time=lambda: NOW))
        theirs = verify(SECRET.encode(), header, "POST", target, timer_id, attempt, body)
    assert ours == theirs
    return ours


def test_the_valid_header_verifies() -> None:
    assert _both(VALID)
    assert _both(f" t={NOW} , v2={V2} ")


@pytest.mark.parametrize(
    "header",
    [
        pytest.param(f"t={'9' * 5000},v2={V2}", id="t-5000-digits"),
        pytest.param(f"t={'0' * 13},v2={V2}", id="t-13-digits"),
        pytest.param(f"t=9{'0' * 11},v2={V2}", id="t-12-digits-far-future"),
        pytest.param(f"t={NOW}," + ",".join([f"v2={V2}"] * 100_000), id="100k-v2"),
        pytest.param(f"t={NOW}," + "x=" * 2000 + f",v2={V2}", id="over-1KiB"),
        pytest.param(f"t={NOW},t={NOW},v2={V2}", id="two-t"),
        pytest.param(f"v2={V2}", id="no-t"),
        pytest.param(f"t={NOW}", id="no-mac"),
        pytest.param(f"t={NOW},v2", id="part-without-equals"),
        pytest.param(f"t=+{NOW},v2={V2}", id="signed-t"),
        pytest.param(f"t={NOW}.0,v2={V2}", id="fractional-t"),
        pytest.param(f"t=0x{NOW:x},v2={V2}", id="hex-t"),
        pytest.param("t=\u0661\u0667" + "\u0660" * 8 + f",v2={V2}", id="arabic-digits-t"),
        pytest.param(f"t={NOW},v2={V2}é", id="non-ascii-mac"),
        pytest.param(f"t={NOW},v2=\u00e9{V2[1:]}", id="non-ascii-same-length"),
        pytest.param(f"t={NOW},v2={V2.upper()}", id="upper-case-hex"),
        pytest.param(f"t={NOW},v2={V2[:-1]}", id="short-mac"),
        pytest.param(f"t={NOW},v1={V2}", id="v2-mac-as-v1"),
        pytest.param(f"t={NOW},V2={V2}", id="upper-case-key"),
        pytest.param("\x00" * 64, id="nul"),
        pytest.param("", id="empty"),
    ],
)
def test_a_hostile_header_is_refused_without_raising(header: str) -> None:
    assert not _both(header)


def test_more_than_eight_values_are_refused_even_with_a_valid_one() -> None:
    bogus = [f"v2={i:064x}" for i in range(8)]
    seven = ",".join([f"t={NOW}", *bogus[:7], f"v2={V2}"])
    eight = ",".join([f"t={NOW}", *bogus, f"v2={V2}"])
    headers = {"Tickwheel-Timer-Id": "t1", "Tickwheel-Attempt": "1"}
    for value, valid in ((seven, True), (eight, False)):
        verified = verify_signature(
            SECRET,
            {**headers, "Tickwheel-Signature": value},
            b"{}",
            method="POST",
            target="/hook",
            accept_v1=False,
            now_s=NOW,
        )
        assert verified is valid


@pytest.mark.parametrize(
    "header",
    [
        f"t={'9' * 5000},v2={V2}",
        f"t={NOW}," + ",".join([f"v2={V2}"] * 100_000),
        f"t={NOW},v2={V2}\u00e9",
        f"t={NOW},v2",
    ],
)
def test_a_hostile_header_is_refused_before_any_mac_is_made(
    header: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_mac(key: bytes, message: bytes) -> str:
        raise AssertionError("a MAC was computed for a header refused on sight")

    monkeypatch.setattr(signing, "_hex_mac", no_mac)
    assert not _both(header)


@pytest.mark.parametrize(
    ("timer_id", "attempt", "target"),
    [
        pytest.param("t\u00e91", "1", "/hook", id="non-ascii-timer-id"),
        pytest.param("t1", "\u0661", "/hook", id="non-ascii-attempt"),
        pytest.param("t1", "1", "/h\u00e9ok", id="non-ascii-target"),
        pytest.param("", "1", "/hook", id="empty-timer-id"),
        pytest.param("t1", "", "/hook", id="empty-attempt"),
        pytest.param("t1", "1", "/hook ", id="target-with-space"),
    ],
)
def test_hostile_request_fields_are_refused_without_raising(
    timer_id: str, attempt: str, target: str
) -> None:
    assert not _both(VALID, timer_id=timer_id, attempt=attempt, target=target)


def test_a_line_feed_in_a_field_cannot_move_body_bytes_into_the_fields() -> None:
    # signed: attempt "1" and body "7\n{}"; forged: attempt "1\n7" and body "{}", the same bytes
    value = _signed(b"7\n{}")
    assert _both(value, body=b"7\n{}")
    assert not _both(value, attempt="1\n7", body=b"{}")
