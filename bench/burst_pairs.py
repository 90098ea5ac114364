"""Part (a)'s plain-loop burst, this tree against an older one, in alternating processes.

Run ``python bench/burst_pairs.py --before SRC`` (SRC: an older tree's ``src``, e.g. from
``git archive <commit> src | tar -x -C /tmp/base``; ``--after SRC`` for another than this one). Each round starts one process per tree,
before first, then the other way round in the next round; each process starts its own
``redis-server`` and runs the variadic raw floor, then ``consume()`` with ``await d.ack()``
each, `--bursts` times (``--warm``: by a consumer that handled 1,000 timers due now first). It prints one line per burst and a min / median / max summary per tree.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

BENCH = Path(__file__).resolve().parent
HERE_SRC = BENCH.parent / "src"


PAUSE_S = 0.2  # a longer gap in a 10 ms sleep loop: this process was stopped (SIGSTOP)
TRIES = 5  # bursts run again at most, in one process, while a pause spoils them


class PauseWatch:
    """A thread that sleeps 10 ms at a time and keeps the longest gap it saw: a process
    stopped and continued (the host's other benchmarks pause ours) shows one."""

    def __init__(self) -> None:
        self.longest_s = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> PauseWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(0.01):
            now = time.monotonic()
            self.longest_s = max(self.longest_s, now - last)
            last = now


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", help="the older tree's src directory")
    parser.add_argument("--after", default=str(HERE_SRC), help="the newer (default: this) src")
    parser.add_argument("--rounds", type=int, default=3, help="process pairs (default 3)")
    parser.add_argument("--bursts", type=int, default=2, help="bursts per process (default 2)")
    parser.add_argument("--quick", action="store_true", help="bursts of 2,000, not 20,000")
    parser.add_argument(
        "--warm", action="store_true", help="by a consumer that handled 1,000 timers first"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


async def child(bursts: int, quick: bool, warm: bool) -> None:
    """Run the floor and the plain-loop burst `bursts` times; print one JSON line each."""
    from harness.redis_server import private_redis
    from scenarios.engine.burst import consume_burst, floor_burst
    from scenarios.engine.context import EngineBench
    from scenarios.engine.runs import FULL, QUICK

    from tickwheel.engine import WorkerSettings

    with private_redis("tickwheel-bench-burst-pairs-") as server:
        bench = EngineBench(server, QUICK if quick else FULL, WorkerSettings())
        try:
            for _ in range(bursts):
                for _ in range(TRIES):
                    with PauseWatch() as watch:
                        try:
                            floor = await floor_burst(bench, variadic=True)
                            run = await consume_burst(bench, batched=False, warm=warm)
                        except TimeoutError:  # the burst's 120 s bound, if a pause outlasted it
                            if watch.longest_s < PAUSE_S:
                                raise
                    if watch.longest_s < PAUSE_S:
                        break
                    print(json.dumps({"paused_s": watch.longest_s}), flush=True)
                else:
                    raise SystemExit(f"every one of {TRIES} tries was paused")
                calls = run.calls
                warm_up = int(run.extra.get("warm_up", 0))  # its claims were before the instant
                claimed_ahead = calls.claimed_by(run.due_ms) - warm_up if calls else 0
                line = {
                    "seconds": run.seconds,
                    "floor": floor.seconds,
                    "ratio": run.seconds / floor.seconds,
                    "client_cpu": run.cpu.get("bench", float("nan")),
                    "redis_cpu": run.cpu.get("redis", float("nan")),
                    "acked": run.acked,
                    "done": run.done,
                    "duplicates": run.duplicates,
                    "claims": len([c for c in calls.claims if c[2]]) if calls else 0,
                    "claimed_ahead": claimed_ahead,
                }
                print(json.dumps(line), flush=True)
        finally:
            await bench.close()


def run_one(src: str, args: argparse.Namespace) -> list[dict[str, float]]:
    """Run one child process on tree `src`; return its bursts."""
    env = dict(os.environ, PYTHONPATH=f"{src}{os.pathsep}{BENCH}")
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", f"--bursts={args.bursts}"]
    done = subprocess.run(
        [*argv, *(["--quick"] if args.quick else []), *(["--warm"] if args.warm else [])],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise SystemExit(f"a burst process on {src} failed:\n{done.stderr[-3000:]}")
    out = done.stdout
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    for line in lines:
        if "paused_s" in line:
            print(f"  (a burst on {src} ran again: paused {line['paused_s']:.1f} s)")
    return [line for line in lines if "paused_s" not in line]


def summary(name: str, runs: list[dict[str, float]]) -> str:
    """min / median / max of each figure over `runs`."""
    cells = []
    for key in ("seconds", "floor", "ratio", "client_cpu", "redis_cpu", "claimed_ahead"):
        xs = [run[key] for run in runs]
        cells.append(f"{key} {min(xs):.3g} / {statistics.median(xs):.3g} / {max(xs):.3g}")
    return f"{name} ({len(runs)} bursts): " + "; ".join(cells)


def main(argv: Sequence[str] | None = None) -> None:
    """Alternate processes of the two trees and print their bursts and a summary."""
    args = parse_args(argv)
    if args.child:
        import uvloop

        from tickwheel.runtime import steady_gc

        steady_gc()
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(child(args.bursts, args.quick, args.warm))
        return
    trees = {"after": args.after}
    if args.before:
        trees = {"before": args.before, **trees}
    results: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for round_ in range(args.rounds):
        order = list(trees) if round_ % 2 == 0 else list(reversed(trees))
        for name in order:
            for run in run_one(trees[name], args):
                results[name].append(run)
                print(
                    f"round {round_ + 1} {name}: {run['seconds']:.3f} s, floor "
                    f"{run['floor']:.3f} s ({run['ratio']:.1f} x), client CPU "
                    f"{run['client_cpu']:.2f} s, redis CPU {run['redis_cpu']:.2f} s, claimed "
                    f"ahead {run['claimed_ahead']:,}, acked {run['acked']:,}, done "
                    f"{run['done']:,}, duplicates {run['duplicates']}",
                    flush=True,
                )
    print("min / median / max:")
    for name, runs in results.items():
        print(summary(name, runs), flush=True)


if __name__ == "__main__":
    main()
