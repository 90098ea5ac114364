"""`POST /v1/timers` from 64 keep-alive connections against servers that run side by side.

Every server is its own process (group), started once and left idle while another is measured;
the load generator (`load.py`) is a process of its own too, started for each measurement, so
its CPU is counted apart from the servers'. Rounds alternate over the servers, so a busy
neighbour on a shared machine weighs on each server alike.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.machine import HZ, pid_ticks
from harness.redis_server import free_port
from harness.report import progress

CONNECTIONS = 64
BODY = {"delay": 3600, "callback": {"url": "https://example.com/hook", "body": "hi"}}
LOAD = Path(__file__).with_name("load.py")

# the tickwheel app from a factory, for servers other than `serve`
FACTORY_SOURCE = """
import os

from tickwheel.service.api import create_app
from tickwheel.service.settings import ServiceSettings


def app():
    return create_app(ServiceSettings(store_url=os.environ["BENCH_STORE"]))
"""
# the floor: a FastAPI endpoint that parses the same body into a pydantic model, as a user
# would write it, served by plain `uvicorn floor:app`
FLOOR_SOURCE = """
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
"""


@dataclass
class Server:
    """A server to measure: its label, its command (``{port}`` and ``{dir}`` filled in) and
    extra environment."""

    label: str
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)
    floor: bool = False


@dataclass
class Sample:
    """One measurement of one server."""

    per_s: float
    server_cpu_us: float
    client_cpu_us: float
    statuses: dict[int, int]


@dataclass
class Running:
    server: Server
    port: int
    process: subprocess.Popen[bytes]
    samples: list[Sample] = field(default_factory=list)


def floor_server() -> Server:
    """Plain ``uvicorn floor:app``: httptools and uvloop as ``uvicorn[standard]`` installs
    them, one process, lifespan auto; only the access log is off, as `serve` writes none."""
    return Server(
        "FastAPI endpoint, plain `uvicorn floor:app --no-access-log` (httptools, uvloop)",
        [
            sys.executable,
            *[
                "-m",
                "uvicorn",
                "--app-dir",
                "{dir}",
                "floor:app",
                "--port",
                "{port}",
                "--no-access-log",
            ],
        ],
        floor=True,
    )


def before_server(redis_url: str, source: str) -> Server:
    """`tickwheel serve --no-worker` from another tree's ``src`` (the code before a change)."""
    return Server(
        f"`tickwheel serve --no-worker` from {source}, Redis",
        [
            sys.executable,
            "-m",
            "tickwheel",
            "serve",
            "--no-worker",
            "--port",
            "{port}",
            "--store",
            redis_url,
        ],
        {"PYTHONPATH": source},
    )


def serve_server(redis_url: str, api_workers: int) -> Server:
    return Server(
        f"`tickwheel serve --no-worker --api-workers {api_workers}`, Redis",
        [
            sys.executable,
            *["-m", "tickwheel", "serve", "--no-worker", "--port", "{port}"],
            "--store",
            redis_url,
            "--api-workers",
            str(api_workers),
        ],
    )


def tree_ticks(pid: int) -> int:
    """CPU ticks of `pid` and every process below it."""
    total = pid_ticks(pid)
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            for child in (task / "children").read_text().split():
                total += tree_ticks(int(child))
    return total


def _wait_listening(port: int, process: subprocess.Popen[bytes], label: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{label} did not start") from None
            time.sleep(0.05)


@contextlib.contextmanager
def started(servers: Sequence[Server]) -> Iterator[list[Running]]:
    """Start every server (each in its own process group), yield them, then stop them all."""
    directory = Path(tempfile.mkdtemp(prefix="tickwheel-bench-api-"))
    (directory / "floor.py").write_text(FLOOR_SOURCE)
    (directory / "app.py").write_text(FACTORY_SOURCE)
    running: list[Running] = []
    try:
        for server in servers:
            port = free_port()
            args = [part.format(port=port, dir=directory) for part in server.command]
            env = os.environ | {k: v.format(dir=directory) for k, v in server.env.items()}
            process = subprocess.Popen(
                args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                start_new_session=True,
            )  # fmt: skip
            running.append(Running(server, port, process))
            _wait_listening(port, process, server.label)
            progress(f"{server.label}: pid {process.pid}, port {port}")
        yield running
    finally:
        for run in running:
            _stop(run.process)
        for leftover in directory.iterdir():
            leftover.unlink()
        directory.rmdir()


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def measure(run: Running, requests: int) -> Sample:
    """Send `requests` creates to `run` from a fresh load-generator process."""
    ticks0 = tree_ticks(run.process.pid)
    out = subprocess.run(
        [sys.executable, str(LOAD), str(run.port), str(CONNECTIONS), str(requests)],
        input=json.dumps(BODY).encode(),
        capture_output=True,
        check=True,
    ).stdout
    server_s = (tree_ticks(run.process.pid) - ticks0) / HZ
    result = json.loads(out)
    statuses = {int(code): count for code, count in result["statuses"].items()}
    done = sum(statuses.values())
    return Sample(
        per_s=done / result["seconds"],
        server_cpu_us=server_s / result["answered"] * 1e6,
        client_cpu_us=result["cpu_s"] / done * 1e6,
        statuses=statuses,
    )


def alternate(running: list[Running], requests: int, rounds: int) -> None:
    """Measure each server once per round, in the same order each round."""
    for round_ in range(1, rounds + 1):
        for run in running:
            sample = measure(run, requests)
            run.samples.append(sample)
            progress(f"round {round_} {run.server.label}: {sample.per_s:,.0f}/s")
