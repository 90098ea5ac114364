"""`tickwheel serve --no-worker` in child processes, each from a source tree of its own, and
the latency of the queue routes measured against them from this process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from harness.redis_server import free_port


@contextmanager
def serving(url: str, workdir: Path, src: Path | None) -> Iterator[str]:
    """Run the API alone on the store at `url` (from the package in `src` when given: an older
    checkout, for a before) until the block ends; yield its base URL."""
    port = free_port()
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    command = ["serve", "--no-worker", "--port", str(port), "--store", url]
    process = subprocess.Popen(
        [sys.executable, "-m", "tickwheel", *command],
        cwd=workdir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"serve on {url} did not start")
            time.sleep(0.2)
        yield base
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def latencies_ms(client: httpx.Client, url: str, requests: int) -> list[float]:
    """GET `url` `requests` times, one after another on one connection; each one's ms."""
    took = []
    for _ in range(requests):
        start = time.perf_counter()
        response = client.get(url)
        took.append((time.perf_counter() - start) * 1000)
        if response.status_code != 200:
            raise RuntimeError(f"{url}: {response.status_code} {response.text[:200]}")
    return took
