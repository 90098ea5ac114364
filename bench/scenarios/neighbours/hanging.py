"""Ports that accept connections and never answer: the careless neighbour's endpoints."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator


@contextlib.contextmanager
def hanging_ports(count: int) -> Iterator[list[str]]:
    """Listen on `count` loopback ports and never accept: the kernel completes each handshake
    (up to the backlog), the client sends its request and waits for an answer that never
    comes. Yields a callback URL per port."""
    sockets = []
    try:
        for _ in range(count):
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.bind(("127.0.0.1", 0))
            listener.listen(4096)
            sockets.append(listener)
        yield [f"http://127.0.0.1:{s.getsockname()[1]}/hook" for s in sockets]
    finally:
        for listener in sockets:
            listener.close()
