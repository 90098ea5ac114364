"""An idle `tickwheel serve` in a child process: fill its store first, then count its CPU."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from harness.machine import HZ, pid_ticks

from tickwheel.model import Timer
from tickwheel.stores.base import Limit, Store
from tickwheel.stores.open import open_store

FAR_MS = 3_600_000  # the queues' timers are due in an hour: nothing fires while measured


@dataclass(frozen=True)
class Fill:
    """What a store holds while `serve` idles on it."""

    name: str
    queues: int
    limits: int


async def fill(url: str, what: Fill) -> None:
    """Give the store at `url` `what.limits` host limits and `what.queues` queues (one timer
    each, due in an hour)."""
    store: Store = open_store(url)
    try:
        for n in range(what.limits):
            await store.set_limit(f"h{n}.example.com", Limit(rate=10, concurrency=4))
        due_ms = store.now_ms() + FAR_MS
        timers = [
            Timer(id=f"q{n}", queue=f"q{n:05d}", due_ms=due_ms, payload=1)
            for n in range(what.queues)
        ]
        for start in range(0, len(timers), 1000):
            await store.add_many(timers[start : start + 1000])
    finally:
        await store.close()


def fill_with(src: Path, url: str, what: Fill) -> None:
    """`fill`, in a child process running the package in `src`: a store as that version
    writes it (an older SQLite schema, say)."""
    bench = Path(__file__).resolve().parents[2]
    code = (
        "import asyncio; from scenarios.idle.serving import Fill, fill; "
        f"asyncio.run(fill({url!r}, Fill({what.name!r}, {what.queues}, {what.limits})))"
    )
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{bench}"}
    subprocess.run([sys.executable, "-c", code], env=env, check=True)


def serve_cpu_s(
    url: str, warm_s: float, window_s: float, workdir: Path, src: Path | None = None
) -> float:
    """Start `tickwheel serve` on `url` (from the package in `src` when given: another
    checkout, for a before and after), let it settle `warm_s`, and return the CPU seconds it
    used over the next `window_s`; then stop it with SIGTERM."""
    env = {**os.environ, "TICKWHEEL_STORE": url, "TICKWHEEL_PORT": "0"}
    if src is not None:
        env["PYTHONPATH"] = str(src)
    process = subprocess.Popen(
        [sys.executable, "-m", "tickwheel", "serve"],
        cwd=workdir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(warm_s)
        if process.poll() is not None:
            raise RuntimeError(f"serve exited: {process.stderr.read() if process.stderr else ''}")
        start = pid_ticks(process.pid)
        time.sleep(window_s)
        return (pid_ticks(process.pid) - start) / HZ
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
