"""What a receiver or a user writes cannot drive the operator's terminal or map the network.

A receiver chooses the body of its error answers, which becomes a timer's `last_error`; a user
chooses a callback's body. Both reach an operator's terminal through ``tickwheel get``, ``dead``
and ``ls``. A hostile receiver here answers with terminal escapes: a window title (OSC), a clear
screen (CSI), the one-byte C1 CSI and a bell.
"""

from __future__ import annotations

import http.server
import json
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cli.cli_support import Service, sqlite_service, wait_until
from typer.testing import CliRunner

from tickwheel.callbacks.http import HttpTarget
from tickwheel.callbacks.settings import HttpSettings
from tickwheel.cli import app
from tickwheel.engine.outcome import Verdict
from tickwheel.model import Callback, Timer, replace_controls
from tickwheel.testing.receiver import Receiver, Reply

pytestmark = pytest.mark.timeout(120)

ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x9b31mred\x7f\x00"
# what a terminal acts on: C0 but tab and line feed, DEL, C1
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
Run = Callable[..., Any]

service = sqlite_service("terminal")


def timer_for(url: str, body: str | None = None) -> Timer:
    return Timer(id="t-1", due_ms=0, callback=Callback(url=url, body=body))


def test_replace_controls_keeps_printable_text_and_marks_each_control() -> None:
    assert replace_controls("HTTP 404: not found ü €") == "HTTP 404: not found ü €"
    assert replace_controls(ESCAPES) == "\ufffd]0;pwned\ufffd\ufffd[2J\ufffd31mred\ufffd\ufffd"
    assert replace_controls("a\tb\nc\u202ed") == "a\ufffdb\ufffdc\ufffdd"
    assert replace_controls("a\tb\nc\u202ed", keep_lines=True) == "a\tb\nc\ufffdd"


async def test_an_error_body_is_stored_without_control_characters() -> None:
    async with Receiver(respond=lambda _: Reply(404, body=ESCAPES)) as receiver:
        target = HttpTarget(HttpSettings(allow_private_targets=True))
        try:
            outcome = await target.fire(timer_for(f"{receiver.url}/hook"), 1)
        finally:
            await target.close()
    assert outcome.verdict is Verdict.KILL
    assert outcome.error is not None
    assert not CONTROL.search(outcome.error), repr(outcome.error)
    assert outcome.error.startswith("HTTP 404: \ufffd]0;pwned")


async def test_a_name_resolving_to_a_private_address_is_refused_without_naming_it() -> None:
    async with Receiver(respond=lambda _: Reply(500, body="internal secret")) as receiver:
        target = HttpTarget()  # private targets refused (the default)
        try:
            outcome = await target.fire(timer_for(f"http://localhost:{receiver.port}/"), 1)
        finally:
            await target.close()
        assert receiver.count == 0
    assert outcome.verdict is Verdict.KILL
    assert outcome.error == "refused: localhost resolves only to private addresses"


async def test_a_private_target_body_is_recorded_only_when_private_targets_are_allowed() -> None:
    async with Receiver(respond=lambda _: Reply(500, body="internal detail")) as receiver:
        target = HttpTarget(HttpSettings(allow_private_targets=True))
        try:
            outcome = await target.fire(timer_for(f"http://localhost:{receiver.port}/"), 1)
        finally:
            await target.close()
    assert outcome.error == "HTTP 500: internal detail"


class _Hostile(http.server.BaseHTTPRequestHandler):
    """Answers every request 404 with terminal escapes in the body."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = ESCAPES.encode()
        self.send_response(404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Keep the test's output quiet."""


@pytest.fixture(scope="module")
def hostile_url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hostile)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def tw(service: Service) -> Run:
    runner = CliRunner()
    return lambda *args: runner.invoke(app, [*args, "--api", service.url], catch_exceptions=False)


def test_get_dead_and_ls_print_no_terminal_escapes(tw: Run, hostile_url: str) -> None:
    added = tw("add", "--in", "0s", "--url", hostile_url, "--id", "esc-1", "--text", ESCAPES)
    assert added.exit_code == 0, added.output

    def dead() -> bool:
        found = json.loads(tw("get", "esc-1", "--json").stdout)
        return bool(found["state"] == "dead")

    wait_until(dead)
    timer = json.loads(tw("get", "esc-1", "--json").stdout)
    assert timer["last_error"].startswith("HTTP 404: \ufffd]0;pwned")
    assert not CONTROL.search(timer["last_error"])
    for args in (("get", "esc-1"), ("dead",), ("ls", "--state", "dead")):
        result = tw(*args)
        assert result.exit_code == 0, result.output
        assert "esc-1" in result.stdout
        assert not CONTROL.search(result.stdout), (args, result.stdout)
    assert "pwned" in tw("get", "esc-1").stdout  # shown, but inert
    # JSON escapes what it carries: the body the user gave comes back whole, as \u001b
    raw = tw("get", "esc-1", "--json").stdout
    assert not CONTROL.search(raw)
    assert json.loads(raw)["callback"]["body"] == ESCAPES
