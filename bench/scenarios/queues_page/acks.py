"""What the index of done timers by queue costs the firing path: claim and ack of N timers on
a SQLite file, in a child process running a given source tree (the version before had no such
index)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tickwheel.model import Timer
from tickwheel.stores.open import open_store


async def claim_and_ack_s(path: Path, count: int) -> float:
    """Seconds to claim (1,000 at a time) and ack (`ack_many`) `count` timers due now."""
    store = open_store(f"sqlite:///{path}")
    try:
        now = store.now_ms()
        timers = [
            Timer(id=f"t{n}", queue=f"q{n % 100}", due_ms=now, payload=1) for n in range(count)
        ]
        for start in range(0, count, 1000):
            await store.add_many(timers[start : start + 1000])
        started = time.perf_counter()
        for queue in sorted({timer.queue for timer in timers}):
            while leases := await store.claim(queue, store.now_ms(), 1000, 60_000):
                await store.ack_many(leases)
        return time.perf_counter() - started
    finally:
        await store.close()


def run_with(src: Path | None, count: int) -> float:
    """`claim_and_ack_s` in a child process on the package in `src` (this one's when None)."""
    bench = Path(__file__).resolve().parents[2]
    with tempfile.TemporaryDirectory(prefix="tickwheel-bench-acks-") as tmp:
        code = (
            "import asyncio, pathlib; from scenarios.queues_page.acks import claim_and_ack_s; "
            f"print(asyncio.run(claim_and_ack_s(pathlib.Path({tmp!r}) / 't.db', {count})))"
        )
        path = str(bench) if src is None else f"{src}{os.pathsep}{bench}"
        done = subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONPATH": path},
            check=True,
            capture_output=True,
            text=True,
        )
    return float(done.stdout.strip())
