"""One run of the serve-path check: a `tickwheel serve` process (API and worker) of the code
under test, timers created through its API, fired at a receiver in another process."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from harness.machine import OtherLoad
from harness.report import pct

from scenarios.engine.receivers import ReceiverProcess

BATCH = 1000
CREATORS = 4
"""Batches in flight at once while creating."""


@dataclass(frozen=True)
class Code:
    """Which tickwheel runs `serve`: a label, the source directory put first on the path, and
    more arguments for `serve` (``--attempt-history 0``, say)."""

    label: str
    source: Path
    serve_args: tuple[str, ...] = ()


@dataclass
class Result:
    """What the receiver saw of one run's timers."""

    code: str
    rate: int
    sent: int
    arrived: int
    duplicates: int
    late_ms: list[float] = field(repr=False)
    achieved_per_s: float
    create_s: float
    serve_cpu_s: float

    @property
    def lost(self) -> int:
        return self.sent - self.arrived

    @property
    def early(self) -> int:
        return sum(1 for late in self.late_ms if late < 0)

    def p(self, q: float) -> float:
        return pct(self.late_ms, q) if self.late_ms else float("nan")


class Serve:
    """`python -m tickwheel serve` of `code` on `store_url`, on a port of its choosing."""

    def __init__(self, code: Code, store_url: str, log: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWHEEL_")}
        env["PYTHONPATH"] = str(code.source)
        with log.open("wb") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tickwheel", "serve", "--port", "0", "--store",
                 store_url, "--allow-private-targets", *code.serve_args],
                stdout=subprocess.PIPE, stderr=stderr, stdin=subprocess.DEVNULL, env=env,
            )  # fmt: skip
        assert self.process.stdout is not None
        line = self.process.stdout.readline().decode()
        found = re.search(r"serving (http://\S+)", line)
        if found is None:
            self.stop()
            raise RuntimeError(f"serve did not start: {line!r} (log: {log})")
        self.url = found.group(1).rstrip("/.,")

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)
        if self.process.stdout is not None:
            self.process.stdout.close()


# run by the code under test, so that its store writes its own layout
ADD_SOURCE = r"""
import asyncio, json, sys
from tickwheel.model import Callback, Timer
from tickwheel.stores import open_store

async def main():
    bodies = json.load(sys.stdin)
    store = open_store(sys.argv[1])
    timers = [Timer(id=b["id"], due_ms=round(b["due"] * 1000),
                    callback=Callback(url=b["callback"]["url"])) for b in bodies]
    for at in range(0, len(timers), 1000):
        await store.add_many(timers[at : at + 1000])
    await store.close()

asyncio.run(main())
"""


async def create_in_store(code: Code, store_url: str, bodies: list[dict[str, object]]) -> None:
    """Add the timers straight to the store, by the code under test in a child process."""
    env = {**os.environ, "PYTHONPATH": str(code.source)}
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", ADD_SOURCE, store_url, stdin=subprocess.PIPE, env=env
    )
    await child.communicate(json.dumps(bodies).encode())
    if child.returncode != 0:
        raise RuntimeError(f"adding through the store failed: exit {child.returncode}")


async def create(api: str, bodies: list[dict[str, object]]) -> None:
    """POST the timers in batches of `BATCH`, `CREATORS` at once; every one must be created."""
    batches = [bodies[at : at + BATCH] for at in range(0, len(bodies), BATCH)]
    async with aiohttp.ClientSession() as session:

        async def post(batch: list[dict[str, object]]) -> None:
            async with session.post(f"{api}/v1/timers/batch", json={"timers": batch}) as reply:
                answer = await reply.json()
                failed = [item for item in answer.get("results", ()) if item["status"] >= 300]
                if reply.status != 200 or failed:
                    raise RuntimeError(
                        f"create failed: {reply.status} {str(failed or answer)[:300]}"
                    )

        for at in range(0, len(batches), CREATORS):
            await asyncio.gather(*(post(batch) for batch in batches[at : at + CREATORS]))


async def run_once(
    code: Code,
    store_url: str,
    receiver: ReceiverProcess,
    *,
    rate: int,
    span_s: float,
    lead_s: float,
    settle_s: float,
    meter: OtherLoad,
    log: Path,
    via_api: bool,
    serves: int = 1,
) -> Result:
    """Start `serves` serve processes on the store, create `rate * span_s` timers due evenly
    over `span_s` from `lead_s` after the creates began, wait until `settle_s` after the last
    due time; return what arrived, and the CPU of all the serve processes."""
    await receiver.report()  # forget what an earlier run left
    running: list[Serve] = []
    try:
        for n in range(serves):
            running.append(Serve(code, store_url, log.with_suffix(f".{n}.log")))
            meter.track(running[-1].process.pid)
        serve = running[0]
        count = int(rate * span_s)
        began = time.time()
        first_due_ms = int((began + lead_s) * 1000)
        gap_ms = span_s * 1000 / count
        bodies: list[dict[str, object]] = [
            {"due": (first_due_ms + n * gap_ms) / 1000, "id": f"t-{n}",
             "callback": {"url": f"{receiver.url}/t"}}
            for n in range(count)
        ]  # fmt: skip
        if via_api:
            await create(serve.url, bodies)
        else:
            await create_in_store(code, store_url, bodies)
        create_s = time.time() - began
        if create_s > lead_s:
            raise RuntimeError(f"creating took {create_s:.1f} s, more than the {lead_s:g} s lead")
        cpu_before = sum(one.cpu_s() for one in running)
        last_due_s = (first_due_ms + span_s * 1000) / 1000
        await asyncio.sleep(max(0.0, last_due_s + settle_s - time.time()))
        report = await receiver.report()
        cpu_s = sum(one.cpu_s() for one in running) - cpu_before
    finally:
        for one in running:
            meter.untrack(one.process.pid)
            one.stop()
    late = report["late"]
    last = report["last"] or first_due_ms
    achieved = report["unique"] / max((last - first_due_ms) / 1000, span_s)
    return Result(
        code=code.label, rate=rate, sent=count, arrived=report["unique"],
        duplicates=report["dups"], late_ms=late, achieved_per_s=achieved, create_s=create_s,
        serve_cpu_s=cpu_s,
    )  # fmt: skip
