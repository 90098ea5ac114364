"""A lean receiver in a child process that reports the arrival time of every callback."""

from __future__ import annotations

from scenarios.engine.receivers import ReceiverProcess

# on uvloop and httptools, so it takes little of the cores the worker shares; it prints its
# URL, then answers each "report" line with one JSON line of what arrived since the last one
ARRIVALS_SOURCE = r"""
import asyncio, json, os, sys, time
import httptools, uvloop

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
arrived, early = [], [0]

class Callbacks(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport
        self.parser = httptools.HttpRequestParser(self)
        self.due_ms = None

    def data_received(self, data):
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self.transport.close()

    def on_header(self, name, value):
        if name.lower() == b"tickwheel-due":
            self.due_ms = int(value)

    def on_message_complete(self):
        at_ms = time.time_ns() / 1e6
        arrived.append(at_ms)
        if self.due_ms is not None and at_ms < self.due_ms:
            early[0] += 1
        self.due_ms = None
        self.transport.write(OK)

async def main():
    global arrived
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Callbacks, "127.0.0.1", 0, backlog=1024)
    print(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", flush=True)
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while (line := await reader.readline()).strip() == b"report":
        print(json.dumps({"at": arrived, "early": early[0]}), flush=True)
        arrived = []
        early[0] = 0

uvloop.run(main())
"""


def arrivals_receiver() -> ReceiverProcess:
    """Start the receiver; `report()` returns ``{"at": [epoch ms, ...], "early": n}``."""
    return ReceiverProcess(ARRIVALS_SOURCE)
