"""The servers `tickwheel serve` could run its API on, measured with the same app and store.

Each runs `create_app` over the bench's Redis from a factory module; granian and hypercorn are
not dependencies: install them apart (``pip install --target DIR granian hypercorn``) and pass
``--candidates DIR``. A probe sends 2 MiB of headers 64 KiB at a time and notes how much the
server took before it answered or closed: what one connection can make it hold.
"""

from __future__ import annotations

import socket
import sys
import time

from scenarios.api.posting import Server

PROBE_BYTES = 2 * 1024 * 1024
PROBE_CHUNK = 64 * 1024


def candidates(redis_url: str, path: str) -> list[Server]:
    """The tickwheel app under uvicorn (h11 bounded, httptools unbounded), granian, hypercorn."""
    env = {"BENCH_STORE": redis_url, "PYTHONPATH": f"{{dir}}:{path}"}
    uvicorn = [
        sys.executable,
        *[
            "-m",
            "uvicorn",
            "--app-dir",
            "{dir}",
            "--factory",
            "app:app",
            "--port",
            "{port}",
            "--no-access-log",
            "--log-level",
            "warning",
        ],
    ]
    return [
        Server(
            "uvicorn, h11 (32 KiB incomplete-event bound), as `serve` ran before",
            [*uvicorn, *["--http", "h11", "--h11-max-incomplete-event-size", "32768"]],
            env,
        ),
        Server("uvicorn, httptools (head unbounded)", [*uvicorn, "--http", "httptools"], env),
        Server(
            "granian 1 worker, asgi, uvloop (its 408 KiB buffer bound)",
            [
                sys.executable,
                *[
                    "-m",
                    "granian",
                    "--interface",
                    "asgi",
                    "--factory",
                    "--port",
                    "{port}",
                    "--loop",
                    "uvloop",
                    "--no-ws",
                    "--log-level",
                    "warning",
                    "--working-dir",
                    "{dir}",
                    "app:app",
                ],
            ],
            env,
        ),
        Server(
            "hypercorn, uvloop (h11, 16 KiB bound)",
            [
                sys.executable,
                *[
                    "-m",
                    "hypercorn",
                    "--bind",
                    "127.0.0.1:{port}",
                    "--worker-class",
                    "uvloop",
                    "--log-level",
                    "warning",
                    "app:app()",
                ],
            ],
            env,
        ),
    ]


def probe_head(port: int) -> str:
    """Send 2 MiB of one header, 64 KiB at a time; say what the server answered and when."""
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: ")
        conn.setblocking(False)
        answer = b""
        while sent < PROBE_BYTES and not answer:
            try:
                conn.sendall(b"a" * PROBE_CHUNK)
                sent += PROBE_CHUNK
            except BlockingIOError:
                pass
            except OSError:
                break
            time.sleep(0.005)
            try:
                answer = conn.recv(256)
            except BlockingIOError:
                pass
            except OSError:
                break
        if not answer and sent >= PROBE_BYTES:
            conn.setblocking(True)
            try:
                conn.sendall(b"\r\n\r\n")
                answer = conn.recv(256)
            except OSError:
                answer = b""
    status = answer[9:12].decode() if answer.startswith(b"HTTP/") else "closed"
    return f"{status} after {sent // 1024:,} KiB"
