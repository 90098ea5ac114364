"""`POST /v1/timers` from 64 concurrent clients: `tickwheel serve --no-worker` on Redis beside a
bare FastAPI + uvicorn endpoint that parses the same JSON body, each in its own process."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import aiohttp
from harness.machine import HZ, pid_ticks
from harness.redis_server import free_port

CLIENTS = 64

# the floor: what any FastAPI service pays to accept this body, on the same server settings
# `tickwheel serve` uses (uvicorn, h11, uvloop, one worker), with nothing behind it
BARE_SOURCE = r"""
import sys
import uvicorn
from fastapi import FastAPI
from pydantic import BaseModel

class Callback(BaseModel):
    url: str
    body: str | None = None

class TimerIn(BaseModel):
    delay: float
    callback: Callback

app = FastAPI()

@app.post("/v1/timers", status_code=201)
async def create(timer: TimerIn) -> dict:
    return {"id": "x", "delay": timer.delay, "url": timer.callback.url}

uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), http="h11", loop="uvloop",
            log_level="warning", access_log=False)
"""


@dataclass
class Rate:
    label: str
    per_s: float
    server_cpu_us: float
    statuses: dict[int, int]


@contextlib.contextmanager
def server(args: list[str], port: int) -> Iterator[int]:
    """Run a server process until the block ends; yield its pid once it answers."""
    child = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if child.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{args[:4]} did not start") from None
                time.sleep(0.05)
        yield child.pid
    finally:
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(timeout=20)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(timeout=5)
        if child.stderr is not None:
            child.stderr.close()


async def post_all(
    url: str, requests: int, body: dict[str, object]
) -> tuple[float, dict[int, int]]:
    """Send `requests` POSTs from `CLIENTS` concurrent keep-alive clients; return the seconds
    and the count of each status."""
    statuses: dict[int, int] = {}
    per_client = requests // CLIENTS
    connector = aiohttp.TCPConnector(limit=CLIENTS)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def client() -> None:
            for _ in range(per_client):
                async with session.post(url, json=body) as answer:
                    await answer.read()
                    statuses[answer.status] = statuses.get(answer.status, 0) + 1

        await asyncio.gather(*(client() for _ in range(CLIENTS // 4)))  # warm the pool
        statuses.clear()
        t0 = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(CLIENTS)))
        return time.perf_counter() - t0, statuses


async def measure(label: str, port: int, pid: int, requests: int) -> Rate:
    body = {"delay": 3600, "callback": {"url": "https://example.com/hook", "body": "hi"}}
    url = f"http://127.0.0.1:{port}/v1/timers"
    ticks0 = pid_ticks(pid)
    seconds, statuses = await post_all(url, requests, body)
    done = sum(statuses.values())
    cpu_s = (pid_ticks(pid) - ticks0) / HZ
    return Rate(label, done / seconds, cpu_s / max(done, 1) * 1e6, statuses)


def rates(redis_url: str, requests: int) -> list[Rate]:
    """The bare endpoint, then `tickwheel serve --no-worker` on `redis_url`."""
    rows = []
    port = free_port()
    with server([sys.executable, "-c", BARE_SOURCE, str(port)], port) as pid:
        rows.append(asyncio.run(measure("bare FastAPI + uvicorn, same body", port, pid, requests)))
    port = free_port()
    args = [sys.executable, "-m", "tickwheel", "serve", "--no-worker", "--port", str(port)]
    with server([*args, "--store", redis_url], port) as pid:
        rows.append(asyncio.run(measure("tickwheel serve --no-worker, Redis", port, pid, requests)))
    return rows
