"""CLI start benchmark (issue 27): the wall time of one ``tickwheel ls`` against a running
``tickwheel serve``, the command as a user runs it (interpreter start, imports, one request).

Run ``python bench/cli_start.py`` (``--rounds N``). With ``--before SRC`` (the ``src`` directory
of another checkout, say ``git archive <commit> src | tar -x -C /tmp/before``) each round runs
that checkout's command too, alternating which goes first, on the same interpreter and service;
the table then gives the ratio of the medians.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _serve(directory: Path) -> tuple[subprocess.Popen[str], str]:
    log = (directory / "serve.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "tickwheel", "serve", "--port", "0", "--store", "memory://"],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    assert server.stdout is not None
    line = server.stdout.readline()
    found = re.search(r"serving (http://\S+)", line)
    if found is None:
        server.kill()
        raise SystemExit(f"serve did not start: {line!r}")
    return server, found[1]


def _ls(api: str, src: str | None) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWHEEL_")}
    if src is not None:
        env["PYTHONPATH"] = src
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "tickwheel", "ls", "--api", api],
        env=env,
        capture_output=True,
        check=True,
    )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--before", metavar="SRC", help="the src/ of a checkout to compare")
    args = parser.parse_args()
    cases: dict[str, str | None] = {"this checkout": None}
    if args.before:
        cases = {"before": str(Path(args.before).resolve()), **cases}
    times: dict[str, list[float]] = {name: [] for name in cases}
    with tempfile.TemporaryDirectory() as directory:
        server, api = _serve(Path(directory))
        try:
            for round_ in range(args.rounds):
                order = list(cases) if round_ % 2 == 0 else list(reversed(cases))
                for name in order:
                    times[name].append(_ls(api, cases[name]))
                print(f"[{round_ + 1}/{args.rounds}] rounds", file=sys.stderr)
        finally:
            server.terminate()
            server.wait(timeout=30)
    medians = {name: statistics.median(found) for name, found in times.items()}
    print(f"| command | median of {args.rounds} (ms) | min (ms) |")
    print("|:--|--:|--:|")
    for name, found in times.items():
        print(f"| {name} | {medians[name] * 1000:.0f} | {min(found) * 1000:.0f} |")
    if args.before:
        ratio = medians["this checkout"] / medians["before"]
        print(f"| this checkout / before | {ratio:.2f} | |")


if __name__ == "__main__":
    main()
