"""One library's row of the peers table, in a process of its own (issue 24's peers).

Usage: ``peer_run.py <peer> --redis URL [--postgres URL] [--jobs N] [--spread-s S]
[--phases enqueue,drain,burst,spread]``; prints one JSON line. A peer runs under the throwaway
venv's Python (``bench/peers.py`` says how to make it); tickwheel's own rows run this same file
under the project's Python, so every row is measured by the same code. It imports neither the
bench harness nor, for a peer, tickwheel.

- enqueue: one call per job, each awaited (or returned) before the next, as a producer writes
  it, the worker stopped (APScheduler's jobs are due an hour ahead, its scheduler running);
- drain: N jobs due now enqueued beforehand, then the library's worker started; the rate is
  from the worker's start (a worker process: once it is ready) until the last job ran;
- burst: the worker running, N jobs due at one instant ahead (3 s and three times the
  enqueue's time, measured above): from that instant until the last ran, and p99 lateness;
- spread: the worker running, N jobs due evenly over ``--spread-s``: lateness p50/p99, runs
  before their due time (early) and jobs that never ran (lost) within the grace: the peer's
  `grace_s` after the last due time plus 1.5 times what its drain took for N jobs (at most
  `BACKLOG_CAP_S`), so that a slow worker's backlog counts as late, not lost.

Lateness is the run's epoch time (this host's clock, µs, written by the job) minus the due
time (integer ms): every library is handed the same due times, through its own API.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import math
import os
import tempfile
import time
from typing import Any

from peer_base import Peer
from run_log import RunLog, Runs

DRAIN_TIMEOUT_S = 180.0
DRAIN_IDLE_S = 15.0
BACKLOG_CAP_S = 300.0
MODULES = {
    "tickwheel": "tickwheel_peer",
    "tickwheel-add_many": "tickwheel_peer",
    "tickwheel-scheduler": "tickwheel_peer",
    "saq": "async_peers",
    "arq": "async_peers",
    "taskiq": "async_peers",
    "taskiq-1s": "async_peers",
    "procrastinate": "async_peers",
    "huey": "thread_peers",
    "dramatiq": "thread_peers",
    "apscheduler": "thread_peers",
    "celery": "process_peers",
    "rq": "process_peers",
}


def pct(samples: list[float], q: float) -> float | None:
    """Nearest-rank percentile `q` (0 to 1), None without samples."""
    if not samples:
        return None
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


async def enqueue_rate(peer: Peer, n: int) -> float:
    await peer.reset()
    when = time.time() + 3600 if peer.enqueue_ahead else None
    if peer.enqueue_ahead:
        await peer.start()
    t0 = time.perf_counter()
    await peer.enqueue_all(n, when)
    elapsed = time.perf_counter() - t0
    if peer.enqueue_ahead:
        await peer.stop()
    return n / elapsed


async def drain(peer: Peer, log: RunLog, n: int) -> dict[str, Any]:
    await peer.reset()
    for i in range(n):
        await peer.enqueue(i, None)
    log.clear()
    await peer.start()  # a worker process's start() returns once it is ready
    started = time.time()
    runs = await log.wait(n, started + DRAIN_TIMEOUT_S, idle_s=DRAIN_IDLE_S)
    await peer.stop()
    last = max(runs.first.values(), default=started)
    rate = len(runs.first) / (last - started) if runs.first else None
    return {"drain_per_s": rate, "drain_ran": len(runs.first), "drain_again": runs.again}


async def due_at(peer: Peer, log: RunLog, dues_ms: list[int]) -> tuple[Runs, bool]:
    """Start the worker, enqueue job i due at `dues_ms[i]`, wait for the runs or the grace."""
    await peer.reset()
    log.clear()
    await peer.start()
    for i, due_ms in enumerate(dues_ms):
        await peer.enqueue(i, due_ms / 1000)
    in_time = time.time() * 1000 < dues_ms[0]
    runs = await log.wait(len(dues_ms), dues_ms[-1] / 1000 + peer.grace_s)
    await peer.stop()
    return runs, in_time


def lateness_ms(runs: Runs, dues_ms: list[int]) -> list[float]:
    return [at * 1000 - dues_ms[i] for i, at in runs.first.items()]


async def burst(peer: Peer, log: RunLog, n: int, lead_s: float) -> dict[str, Any]:
    instant_ms = math.ceil(time.time() * 1000 + lead_s * 1000)
    dues = [instant_ms] * n
    runs, in_time = await due_at(peer, log, dues)
    late = lateness_ms(runs, dues)
    return {
        "burst_last_ms": max(late) if len(late) == n else None,
        "burst_p99_ms": pct(late, 0.99),
        "burst_early": sum(1 for x in late if x < 0),
        "burst_lost": n - len(late),
        "burst_again": runs.again,
        "burst_in_time": in_time,
    }


async def spread(peer: Peer, log: RunLog, n: int, lead_s: float, spread_s: float) -> dict[str, Any]:
    start_ms = math.ceil(time.time() * 1000 + lead_s * 1000)
    dues = [start_ms + round(i * spread_s * 1000 / n) for i in range(n)]
    runs, in_time = await due_at(peer, log, dues)
    late = lateness_ms(runs, dues)
    return {
        "spread_p50_ms": pct(late, 0.50),
        "spread_p99_ms": pct(late, 0.99),
        "spread_max_ms": max(late, default=None),
        "spread_early": sum(1 for x in late if x < 0),
        "spread_lost": n - len(late),
        "spread_again": runs.again,
        "spread_in_time": in_time,
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    module = importlib.import_module(MODULES[args.peer])
    peer: Peer = module.make(args.peer, args.redis, args.postgres)
    phases = args.phases.split(",")
    with tempfile.TemporaryDirectory(prefix="peers-runs-") as directory:
        log = RunLog(os.path.join(directory, "runs.log"))
        await peer.open()
        try:
            found: dict[str, Any] = {"enqueue_per_s": await enqueue_rate(peer, args.jobs)}
            # the timed phases' jobs must all be enqueued before the first is due
            lead_s = 3.0 + 3.0 * args.jobs / found["enqueue_per_s"]
            if "drain" in phases:
                found |= await drain(peer, log, args.jobs)
                # a backlog the worker takes this long to run is late, not lost
                peer.grace_s += min(BACKLOG_CAP_S, 1.5 * args.jobs / (found["drain_per_s"] or 1))
            if "burst" in phases:
                found |= await burst(peer, log, args.jobs, lead_s)
            if "spread" in phases:
                found |= await spread(peer, log, args.jobs, lead_s, args.spread_s)
        finally:
            await peer.close()
    return found | {
        "version": peer.version(),
        "settings": peer.settings,
        "timing": peer.timing,
        "grace_s": peer.grace_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("peer", choices=sorted(MODULES))
    parser.add_argument("--redis", required=True)
    parser.add_argument("--postgres", default="")
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--spread-s", type=float, default=20.0)
    parser.add_argument("--phases", default="enqueue,drain,burst,spread")
    print(json.dumps(asyncio.run(run(parser.parse_args()))), flush=True)


if __name__ == "__main__":
    main()
