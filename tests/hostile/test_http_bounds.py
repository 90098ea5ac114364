"""The request bounds of a real `tickwheel serve`, over raw sockets: its HTTP protocol (httptools
with the head bounded) must refuse what httptools alone would buffer without end, and
``--api-workers`` processes must share the port without losing a request."""

from __future__ import annotations

import json
import re
import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli.cli_support import Service

from tickwheel.service.gate import MAX_REQUEST_HEADER_BYTES
from tickwheel.service.protocol import MAX_REQUEST_HEADERS, MAX_REQUEST_TARGET_BYTES

TIMER = json.dumps({"delay": 3600, "callback": {"url": "https://example.com/hook"}}).encode()


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    directory = tmp_path_factory.mktemp("bounds")
    started = Service(directory, "--store", "memory://", "--no-worker")
    try:
        yield started
    finally:
        started.stop()


def _port(service: Service) -> int:
    return int(service.url.rsplit(":", 1)[1])


def _read_answer(conn: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Read one whole answer: its status, headers (lower-cased names) and body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        assert chunk, f"closed before an answer: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    while len(body) < int(headers.get("content-length", 0)):
        body += conn.recv(65536)
    return int(lines[0].split()[1]), headers, body


def _ask(service: Service, raw: bytes) -> tuple[int, dict[str, str], bytes]:
    with socket.create_connection(("127.0.0.1", _port(service)), timeout=10) as conn:
        conn.sendall(raw)
        return _read_answer(conn)


def _closed(conn: socket.socket) -> bool:
    try:
        return conn.recv(1) == b""
    except ConnectionResetError:
        return True


def _get(headers: bytes = b"", target: bytes = b"/healthz") -> bytes:
    return b"GET " + target + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n" + headers + b"\r\n"


def test_a_head_that_never_ends_is_refused_as_it_arrives(service: Service) -> None:
    # one header value sent 64 KiB at a time, for up to 8 MiB and never ended: the answer
    # comes while it is still sent (httptools alone would buffer it all and wait for its end)
    with socket.create_connection(("127.0.0.1", _port(service)), timeout=10) as conn:
        conn.sendall(_get().removesuffix(b"\r\n") + b"X-Pad: ")
        conn.setblocking(False)
        sent, answer = 0, b""
        while sent < 8 * 1024 * 1024 and not answer:
            try:
                conn.sendall(b"a" * 65536)
                sent += 65536
            except BlockingIOError:
                pass
            except (BrokenPipeError, ConnectionResetError):
                break
            time.sleep(0.005)
            try:
                answer = conn.recv(65536)
            except BlockingIOError:
                pass
            except ConnectionResetError:
                break
        assert answer.startswith(b"HTTP/1.1 431 "), (sent, answer)
        assert b'"code": "headers_too_large"' in answer


def test_headers_over_the_bytes_or_lines_are_431_and_close(service: Service) -> None:
    over = b"X-Pad: " + b"a" * MAX_REQUEST_HEADER_BYTES + b"\r\n"
    many = b"".join(b"X-%d: 1\r\n" % n for n in range(MAX_REQUEST_HEADERS + 1))
    for headers in (over, many):
        with socket.create_connection(("127.0.0.1", _port(service)), timeout=10) as conn:
            conn.sendall(_get(headers))
            status, answered, body = _read_answer(conn)
            assert status == 431
            assert answered["connection"] == "close"
            assert json.loads(body)["error"]["code"] == "headers_too_large"
            assert _closed(conn)


def test_a_request_target_over_the_limit_is_414(service: Service) -> None:
    status, _, body = _ask(service, _get(target=b"/healthz?" + b"a" * MAX_REQUEST_TARGET_BYTES))
    assert status == 414
    assert json.loads(body)["error"]["code"] == "uri_too_long"


def test_ordinary_heads_pass_and_the_connection_is_kept(service: Service) -> None:
    near = b"X-Pad: " + b"a" * (MAX_REQUEST_HEADER_BYTES // 2) + b"\r\n"
    lines = b"".join(b"X-%d: 1\r\n" % n for n in range(MAX_REQUEST_HEADERS - 2))
    with socket.create_connection(("127.0.0.1", _port(service)), timeout=10) as conn:
        for headers in (near, lines, b""):
            conn.sendall(_get(headers))
            assert _read_answer(conn)[0] == 200


def test_a_body_over_the_limit_is_413_and_closes(service: Service) -> None:
    limit = 4 * 1024 * 1024
    declared = (
        b"POST /v1/timers HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % (limit + 1)
    )
    chunked = (
        b"POST /v1/timers HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )
    for head, chunk in ((declared, b""), (chunked, b"10000\r\n" + b"a" * 65536 + b"\r\n")):
        with socket.create_connection(("127.0.0.1", _port(service)), timeout=10) as conn:
            conn.sendall(head)
            try:
                for _ in range(limit // 65536 + 2):
                    if chunk:
                        conn.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass
            status, answered, body = _read_answer(conn)
            assert status == 413
            assert answered["connection"] == "close"
            assert json.loads(body)["error"]["code"] == "payload_too_large"


def _creates(url: str) -> float:
    """The creates one API process has counted, from its ``/metrics``."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    found = re.findall(r'tickwheel_http_requests_total\{[^}]*route="/v1/timers"[^}]*\} (\S+)', text)
    return sum(float(value) for value in found)


def test_api_workers_share_one_port(tmp_path: Path) -> None:
    service = Service(
        tmp_path, "--store", f"sqlite:///{tmp_path}/t.db", "--no-worker", "--api-workers", "2"
    )
    try:
        assert "api workers 2" in service.first_line
        # a connection each: the kernel spreads them over both processes; an odd number, so
        # that the two processes' counts differ and show as two values
        for _ in range(51):
            status, _, _ = _ask(
                service,
                b"POST /v1/timers HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                % (len(TIMER), TIMER),
            )
            assert status == 201
        seen = {_creates(service.url) for _ in range(30)}
        assert len(seen) == 2, seen  # each process counts its own
        assert sum(seen) == 51
        with urllib.request.urlopen(f"{service.url}/v1/stats", timeout=10) as answer:
            assert json.loads(answer.read())["counts"]["scheduled"] == 51
    finally:
        assert service.stop() == 0
