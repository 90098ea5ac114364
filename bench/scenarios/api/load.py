"""A light load generator: `CONNECTIONS` keep-alive connections, each sending the same prebuilt
`POST` and reading its answer before the next, on asyncio protocols (uvloop when installed).

Run as its own process (``python load.py PORT CONNECTIONS REQUESTS``, the body on stdin). A
quarter of the requests go first, untimed, to warm the server; then it prints one JSON line:
the seconds the timed requests took, the count of each status, the CPU seconds it used meanwhile
(what the client itself cost) and the requests answered in all, warm-up included.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time


class Connection(asyncio.Protocol):
    """One keep-alive connection: send the request, read the whole answer, count its status."""

    def __init__(self, request: bytes, statuses: dict[int, int]) -> None:
        self.request = request
        self.statuses = statuses
        self.buffer = b""
        self.left = 0
        self.answered: asyncio.Future[None] | None = None
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no subclass

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        head_end = self.buffer.find(b"\r\n\r\n")
        if head_end < 0:
            return
        head = self.buffer[:head_end].lower()
        start = head.find(b"content-length:")
        length = 0 if start < 0 else int(head[start + 15 : head.find(b"\r\n", start)])
        if len(self.buffer) < head_end + 4 + length:
            return
        status = int(self.buffer[9:12])
        self.statuses[status] = self.statuses.get(status, 0) + 1
        self.buffer = self.buffer[head_end + 4 + length :]
        if self.answered is not None and not self.answered.done():
            self.answered.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.answered is not None and not self.answered.done():
            self.answered.set_exception(ConnectionError("the server closed the connection"))

    async def send(self, count: int) -> None:
        assert self.transport is not None
        loop = asyncio.get_running_loop()
        for _ in range(count):
            self.answered = loop.create_future()
            self.transport.write(self.request)
            await self.answered


async def run(port: int, connections: int, requests: int, body: bytes) -> dict[str, object]:
    request = (
        b"POST /v1/timers HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
    ) % (port, len(body), body)
    loop = asyncio.get_running_loop()
    statuses: dict[int, int] = {}
    opened = [
        (await loop.create_connection(lambda: Connection(request, statuses), "127.0.0.1", port))[1]
        for _ in range(connections)
    ]
    per_connection = requests // connections
    warm = max(1, per_connection // 4)
    await asyncio.gather(*(c.send(warm) for c in opened))
    statuses.clear()
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    await asyncio.gather(*(c.send(per_connection) for c in opened))
    seconds = time.perf_counter() - t0
    cpu_s = time.process_time() - cpu0
    for connection in opened:
        assert connection.transport is not None
        connection.transport.close()
    answered = (warm + per_connection) * connections  # what the server's CPU was spent on
    return {"seconds": seconds, "statuses": statuses, "cpu_s": cpu_s, "answered": answered}


def main() -> None:
    port, connections, requests = (int(arg) for arg in sys.argv[1:4])
    body = sys.stdin.buffer.read()
    try:
        import uvloop

        factory = uvloop.new_event_loop
    except ImportError:
        factory = asyncio.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        result = runner.run(run(port, connections, requests, body))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
