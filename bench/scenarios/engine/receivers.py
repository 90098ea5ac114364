"""The far ends of part (c): HTTP receivers in child processes that measure lateness."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

from harness.machine import OtherLoad

# the far ends of part (c), each in its own process on uvloop: it prints its URL, then answers
# "report" lines on stdin with one JSON line of what arrived since the last report
RECEIVER_COMMON = r"""
import asyncio, json, os, sys, time
import uvloop

late, ids = [], set()
seen = {"first": None, "last": None, "dups": 0}

def record(at_ms, timer_id, due_ms):
    if due_ms is not None:
        late.append(at_ms - due_ms)
    if timer_id in ids:
        seen["dups"] += 1
    ids.add(timer_id)
    if seen["first"] is None:
        seen["first"] = at_ms
    seen["last"] = at_ms

async def report_until_eof(url):
    global late, ids
    print(url, flush=True)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while (line := await reader.readline()).strip() == b"report":
        times = os.times()
        print(json.dumps({"late": late, "unique": len(ids), **seen,
                          "cpu_s": times.user + times.system}), flush=True)
        late, ids = [], set()
        seen.update(first=None, last=None, dups=0)
"""

# the default far end: a minimal keep-alive HTTP/1.1 server on httptools, so that it takes
# little of the 2 cores the worker and Redis share (a real endpoint runs on its own machine)
LEAN_RECEIVER_SOURCE = (
    RECEIVER_COMMON
    + r"""
import httptools

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"

class Callbacks(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport
        self.parser = httptools.HttpRequestParser(self)
        self.timer_id = self.due_ms = None

    def data_received(self, data):
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self.transport.close()

    def on_header(self, name, value):
        name = name.lower()
        if name == b"tickwheel-timer-id":
            self.timer_id = value
        elif name == b"tickwheel-due":
            self.due_ms = int(value)

    def on_message_complete(self):
        record(time.time_ns() / 1e6, self.timer_id, self.due_ms)
        self.timer_id = self.due_ms = None
        self.transport.write(OK)
        if not self.parser.should_keep_alive():
            self.transport.close()

async def main():
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Callbacks, "127.0.0.1", 0, backlog=1024)
    await report_until_eof(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}")

uvloop.run(main())
"""
)

# tickwheel's own Receiver (aiohttp), for one info row: it verifies and records what a test needs
TICKWHEEL_RECEIVER_SOURCE = (
    RECEIVER_COMMON
    + r"""
from tickwheel.testing import Receiver, Reply

OK = Reply()

def respond(received):
    record(received.at_ms, received.timer_id, received.due_ms)
    return OK

async def main():
    async with Receiver(keep=False, respond=respond) as receiver:
        await report_until_eof(receiver.url)

uvloop.run(main())
"""
)


class ReceiverProcess:
    """A receiver (`source`, one of the *_RECEIVER_SOURCE) in a child process, stopped by pid."""

    def __init__(self, source: str) -> None:
        self.child = subprocess.Popen(
            [sys.executable, "-c", source],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        assert self.child.stdout is not None
        self.url = self.child.stdout.readline().strip()
        if not self.url.startswith("http://"):
            self.stop()
            raise RuntimeError(f"receiver did not start: {self.url!r}")

    @property
    def pid(self) -> int:
        return self.child.pid

    async def report(self) -> dict[str, Any]:
        """What arrived since the last report (the child starts counting afresh)."""
        assert self.child.stdin is not None
        assert self.child.stdout is not None
        self.child.stdin.write("report\n")
        self.child.stdin.flush()
        line = await asyncio.to_thread(self.child.stdout.readline)
        result: dict[str, Any] = json.loads(line)
        return result

    def stop(self) -> None:
        if self.child.poll() is None:
            os.kill(self.child.pid, signal.SIGTERM)
            try:
                self.child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.child.pid, signal.SIGKILL)
                self.child.wait(timeout=5)


@contextlib.contextmanager
def receiving(source: str, meter: OtherLoad, whole: OtherLoad) -> Iterator[ReceiverProcess]:
    """A receiver process whose CPU the load meters leave out while it runs."""
    receiver = ReceiverProcess(source)
    meter.track(receiver.pid)
    whole.track(receiver.pid)
    try:
        yield receiver
    finally:
        meter.untrack(receiver.pid)
        whole.untrack(receiver.pid)
        receiver.stop()
