"""One run of the noisy-neighbour benchmark: workers in their own processes, tenant B's timers
to a prompt receiver, tenant A's (or none) at one instant to ports that never answer."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from harness.report import pct, progress

from scenarios.engine.receivers import ReceiverProcess
from tickwheel.model import Callback, RetryPolicy, State, Timer
from tickwheel.stores import open_store

ADD_CHUNK = 1000
ADD_AHEAD_MS = 2000
"""A's timers are added this long before they all fall due."""
SETTLE_MS = 10_000
"""After B's last due time, how long its callbacks may take to count as arrived."""
START_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Load:
    """What each tenant schedules."""

    a_timers: int
    a_queues: int
    a_timeout_s: float
    b_timers: int
    b_span_s: float
    lead_s: float  # from B's adds to its first due time
    b_ahead_s: float  # from B's first due time to A's instant


@dataclass
class Result:
    """Tenant B's callbacks as its receiver saw them, and what the store says of them."""

    late_ms: list[float]
    arrived: int
    duplicates: int
    dead: int
    sent: int

    @property
    def lost(self) -> int:
        return self.sent - self.arrived

    @property
    def early(self) -> int:
        return sum(1 for late in self.late_ms if late < 0)

    def p(self, q: float) -> float:
        return pct(self.late_ms, q) if self.late_ms else float("nan")


class Workers:
    """`tickwheel serve` (API and worker) and `count - 1` more `tickwheel worker` processes."""

    def __init__(self, store_url: str, count: int, directory: Path) -> None:
        directory.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWHEEL_")}
        common = ["--store", store_url, "--allow-private-targets"]
        self.processes: list[subprocess.Popen[bytes]] = []
        commands = [["serve", "--port", "0", *common]]
        commands += [["worker", *common] for _ in range(count - 1)]
        for n, command in enumerate(commands):
            with (directory / f"worker-{n}.log").open("wb") as log:
                self.processes.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "tickwheel", *command],
                        stdout=subprocess.PIPE,
                        stderr=log,
                        stdin=subprocess.DEVNULL,
                        env=env,
                    )
                )
        first = self.processes[0].stdout
        assert first is not None
        line = first.readline().decode()
        if not re.search(r"serving http://", line):
            self.stop()
            raise RuntimeError(f"serve did not start: {line!r}")

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
            if process.stdout is not None:
                process.stdout.close()


async def run_once(
    store_url: str,
    workers: int,
    load: Load,
    receiver: ReceiverProcess,
    hanging: list[str] | None,
    directory: Path,
) -> Result:
    """Start the workers, schedule both tenants' timers, wait for B's last due time plus a
    settling time, stop the workers; return what B's receiver saw."""
    await receiver.report()  # forget anything left from an earlier run
    run_directory = directory / f"run-{time.time_ns()}"
    running = Workers(store_url, workers, run_directory)
    store = open_store(store_url)
    try:
        await asyncio.sleep(1.0)  # the workers have looked at the store once
        # B first, due from `lead_s` on; A added to fall due at once `b_ahead_s` later
        b_start_ms = store.now_ms() + int(load.lead_s * 1000)
        b_gap_ms = load.b_span_s * 1000 / load.b_timers
        b = [
            Timer(
                id=f"b-{n}",
                due_ms=b_start_ms + int(n * b_gap_ms),
                queue="tenant-b",
                callback=Callback(url=receiver.url + "/b"),
            )
            for n in range(load.b_timers)
        ]
        await store.add_many(b)
        if hanging:
            a_at_ms = b_start_ms + int(load.b_ahead_s * 1000)
            await asyncio.sleep(max(0.0, (a_at_ms - ADD_AHEAD_MS - store.now_ms()) / 1000))
            retry = RetryPolicy(timeout_s=load.a_timeout_s)
            a = [
                Timer(
                    id=f"a-{n}",
                    due_ms=a_at_ms,
                    queue=f"tenant-a-{n % load.a_queues:04d}",
                    callback=Callback(url=hanging[n % len(hanging)]),
                    retry=retry,
                )
                for n in range(load.a_timers)
            ]
            began = time.monotonic()
            for chunk in range(0, len(a), ADD_CHUNK):
                await store.add_many(a[chunk : chunk + ADD_CHUNK])
            took_s = time.monotonic() - began
            if took_s * 1000 > ADD_AHEAD_MS:
                progress(f"   adding A took {took_s:.1f} s: its timers were due as added")
        end_ms = b_start_ms + int(load.b_span_s * 1000) + SETTLE_MS
        await asyncio.sleep(max(0.0, (end_ms - store.now_ms()) / 1000))
        report = await receiver.report()
        # B's lateness in arrival order (B's due times are `b_gap_ms` apart, so nearly its due
        # order), to place its late callbacks against A's instant and the workers' logs
        placed = {"b_start_ms": b_start_ms, "b_gap_ms": b_gap_ms, "late": report["late"]}
        if hanging:
            placed["a_at_ms"] = a_at_ms
        (run_directory / "b-late.json").write_text(json.dumps(placed))
        dead = 0
        cursor = None
        while True:
            page = await store.list(state=State.DEAD, queue="tenant-b", cursor=cursor)
            dead += len(page.timers)
            cursor = page.cursor
            if cursor is None:
                break
    finally:
        running.stop()
        await store.close()
    return Result(
        late_ms=report["late"],
        arrived=report["unique"],
        duplicates=report["dups"],
        dead=dead,
        sent=load.b_timers,
    )
